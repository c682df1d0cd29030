// conv2d, direct: any stride, padding, dilation and groups.
//   y(ow, oh, o, n) = sum_{c < CG, kh, kw} xp(ow*sw + kw*dw - pw, oh*sh + kh*dh - ph, g*CG + c, n)
//                     * weight(kw, kh, c, o),   g = o / (O / groups)
// The sum over (kw, kh, c) runs in a register block of 32 output pixels along w (two 16-lane
// vectors) by 8 output channels: per step 2 vector loads of x, 8 broadcast weights, 16 FMAs.
#include "generators/nn_conv2d.h"

namespace opforge::generators::conv {

using namespace Halide;
using dsl::NnKernel;

NnKernel build_direct(const ConvInputs& in) {
  Var ow("ow"), oh("oh"), o("o"), n("n");
  Expr CG = in.CG(), OG = in.O() / in.groups;

  // ---- algorithm ----
  // The padded input as a buffer: the hot loop then loads without bounds selects.
  Func xp("direct_xp");
  Func xz = zero_padded(in);
  Var w("w"), h("h"), c("c");
  xp(w, h, c, n) = xz(w, h, c, n);
  RDom r(0, in.KW(), 0, in.KH(), 0, CG, "r");
  Expr oc = min(o, in.O() - 1);  // the register block rounds o up
  Expr g = oc / OG;
  // Weights regrouped so a block's OB channels are adjacent for each (kw, kh, c): one base
  // address for the 8 broadcasts (the plain layout spilled 8 pointers per step).
  const int OB = 8;
  Func wt("direct_wt");
  Var oi("oi"), oo("oo"), kw("kw"), kh("kh");
  wt(oi, kw, kh, c, oo) = in.weight(kw, kh, c, min(oo * OB + oi, in.O() - 1));
  Func acc("direct_acc");
  Func y = dsl::output_func("y");
  acc(ow, oh, o, n) = 0.0f;
  acc(ow, oh, o, n) += xp(ow * in.stride_w + r.x * in.dilation_w - in.pad_w,
                          oh * in.stride_h + r.y * in.dilation_h - in.pad_h, g * CG + r.z, n) *
                       wt(o % OB, r.x, r.y, r.z, o / OB);
  y(ow, oh, o, n) = output_stage(in, acc(ow, oh, o, n), o);

  // ---- schedule ----
  // Measured (2 threads, loaded shared host; ratio to oneDNN brgconv, own layout, same run):
  // 1x320x64x64 3x3: 0.28x with accumulators in memory (variable-size tail blocks), 0.36x
  // with bound_extent (registers), 0.44x with regrouped weights; 1x256x56x56 stride 2:
  // 0.19-0.21x. oneDNN's blocked layout (16 channels per vector) avoids the deinterleaving
  // that stride 2 costs along W here; direct_oc (nn_conv2d_direct_oc.cpp) vectorizes along
  // output channels instead and takes every groups == 1 convolution Winograd does not.
  // Double buffering was not tried here (the winograd test showed no clear gain).
  const int VW = 16, WB = 2 * VW;
  Var owo("owo"), owi("owi"), p("p");
  y.split(ow, owo, owi, WB, TailStrategy::GuardWithIf)
      .split(o, oo, oi, OB, TailStrategy::GuardWithIf)
      .reorder(owi, oi, owo, oh, oo, n)
      .vectorize(owi, VW)
      .unroll(oi)
      .fuse(oo, n, p)
      .parallel(p);
  // A fixed-size block (also at the tails) keeps the accumulators in registers.
  acc.compute_at(y, owo)
      .bound_extent(ow, WB)
      .bound_extent(o, OB)
      .vectorize(ow, VW)
      .unroll(ow)
      .unroll(o);
  acc.update()
      .split(ow, owo, owi, VW)
      .reorder(owi, owo, o, r.x, r.y, r.z)
      .vectorize(owi)
      .unroll(owo)
      .unroll(o);
  acc.update().specialize(in.KW() == 3).unroll(r.x);
  xp.compute_root().vectorize(w, VW).parallel(c);
  wt.compute_root().parallel(oo);
  // Dense loads for the common strides.
  y.specialize(in.stride_w == 1);
  y.specialize(in.stride_w == 2);

  return NnKernel{{y},
                  "direct: 32 pixels x 8 channels register block, padded input copy",
                  {{"w_block", WB}, {"o_block", OB}}};
}

}  // namespace opforge::generators::conv
