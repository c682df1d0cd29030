// conv2d, direct_oc: direct convolution vectorized along OUTPUT CHANNELS (groups == 1).
//   y(ow, oh, o, n) = sum_{c < C, kh, kw} xp(ow*sw + kw*dw - pw, oh*sh + kh*dh - ph, c, n)
//                     * weight(kw, kh, c, o)
// A register block holds OB = NV vectors of output channels x PW x PH output pixels. Per
// reduction step (kw, kh, c): NV vector loads of packed weights (the block's OB channels
// adjacent), PW * PH scalar loads of x broadcast across the lanes, NV * PW * PH FMAs. The
// pixels' x addresses are (row base) + ow*sw: a stride only spaces the broadcasts, so stride 2
// costs nothing in the inner loop (the `direct` algorithm vectorizes along W and
// deinterleaves). Strides 1 and 2 are compiled as constants; others take a slower version that
// keeps each pixel's offset in a (spilled) register. The block is transposed on its way to NCHW y
// (OB * PW * PH stores per block, next to its NV * PW * PH * C * KH * KW FMAs).
// Five algorithms share this builder: direct_oc and direct_oc_unpadded (tasks of 2 output rows
// x 128 channels), direct_oc_small (tasks of 32 channels x every pixel, for small outputs; also
// run as direct_oc_small_14x14) and direct_oc_small_8 (the same with 8-pixel row blocks).
// direct_oc_blocked (the same as direct_oc, 64 or more input channels) reads x through a
// channel-blocked copy and reduces 8 channels innermost (cb below).
#include "generators/nn_conv2d.h"

namespace opforge::generators::conv {

using namespace Halide;
using dsl::NnKernel;

namespace {

// One ISA's register block: NV vectors of output channels x PW x PH pixels.
struct Block {
  int nv, pw, ph;
};

// The four algorithms' differences (each one's comment below).
struct Form {
  const char* name;
  bool unpadded, small, blocked;
  bool row8 = false;  // direct_oc_small_8: blocks of 8 pixels along a row (below)
};

// unpadded: pad 0 and every block inside the output (ShiftInwards tails): x is read in
// place, without the padded copy (a pass over the input that costs most on 1x1 stride 2:
// measured same run, AVX-512, loaded host: 1.23-1.35x the padded version's speed on 256 -> 512
// at 56x56, 0.90-1.51x on 512 -> 1024 at 28x28 and 1024 -> 2048 at 14x14).
// small: the loop order of direct_oc_small (see the schedule).
// blocked (cb, direct_oc_blocked): x copied channel-blocked, xb(ci, w, h, co) = x(w, h, 8 co + ci)
// (zeros past C and outside the image), and the reduction runs 8 channels innermost: one pixel's 8
// broadcasts share a cache line (NCHW: 8 lines, one per channel plane), so a block's x tile
// over all C is ~1/3 the lines and stays in L1 across the group's channel blocks. Measured
// same run (load ~4, 2 threads), time vs the NCHW-plane version: AVX2 0.82-0.84x (256 -> 256
// and 128 -> 128 3x3 at 56x56), 0.93x (1x1 256 -> 512, against direct_oc_unpadded); AVX-512
// 0.90-0.96x. In direct_oc_small's order it was 0.96-1.05x: not used there. Channels are
// padded to a multiple of 8: ResNet's stem (3 -> 64 7x7 stride 2) took 1.6-2.2x the time,
// hence its own algorithm for C >= 64 (nn_conv2d.cpp).
NnKernel build(const ConvInputs& in, const Form& form) {
  const bool unpadded = form.unpadded, small = form.small, cb = form.blocked;
  const int VW = in.target.natural_vector_size<float>();  // 16 with AVX-512, 8 with AVX2
  // Accumulators: 2 x (7 x 2) = 28 of AVX-512's 32 zmm (weights 2, broadcasts fold into the
  // FMA); 2 x (3 x 2) = 12 of AVX2's 16 ymm (+ 2 weights + 1 broadcast). 7 x 2 pixels tile
  // ResNet's 56, 28, 14 and 7 wide outputs exactly. direct_oc_small on AVX2: 1 x (7 x 2) = 14
  // ymm (+ 1 weight + 1 broadcast): 3-wide blocks computed 9 columns of every 7-wide row
  // (ResNet's last stage), and its 7x7 outputs ran 1.1-1.3x faster with 7 x 2 than with 3 x 2
  // (512 -> 512 3x3 and 1024 -> 2048 1x1 stride 2, same runs); on 14x14 outputs 3 x 2 was
  // faster (256 -> 256 3x3 at 28x28: 0.71x the time, one noisy run) and is not used there
  // either way (see nn_conv2d.cpp's condition). Measured and dropped, AVX2: 2 x (7 x 1) with
  // weights from memory, 4 x (3 x 1) (oneDNN jit:avx2's shape) and 1 x (7 x 2) in direct_oc's
  // loop order: 1.0-1.5x the time of 2 x (3 x 2) on the 28x28 outputs; AVX-512 4 x (7 x 1):
  // 0.9-1.2x, no gain.
  // direct_oc_small_8 (row8: 3x3 or larger filters, outputs 7 or a multiple of 8 wide): 2 x
  // (8 x 1) on AVX-512, 2 x (4 x 1) on AVX2, where 7-wide blocks computed 14 columns of every 8
  // (1.75x the work on the UNet's 8x8). Against direct_oc_small's blocks (2026-12-05, AMD EPYC
  // family 26 model 2, 2 threads, alternating runs; raw and divided by oneDNN's time in the
  // same process): 1280@8 -> 1280 3x3 and 1280@16 -> 1280 3x3 stride 2 took 0.61-0.87x the
  // time on AVX-512 and 0.42-0.56x on AVX2 (two runs); ResNet-50's 7x7 3x3 (512@7, 512@14,
  // 256@14 and 1024@14 stride 2; three runs) 0.71-1.12x on AVX-512 (median 0.96) and 0.85-1.01x
  // on AVX2. Not used with 1x1 filters (AVX2 2048 -> 512 at 7x7: 1.1x the time) nor on
  // AVX-512's 14x14 (1.06-1.27x).
  const Block b = form.row8  ? (VW >= 16 ? Block{2, 8, 1} : Block{2, 4, 1})
                  : VW >= 16 ? Block{2, 7, 2}
                  : small    ? Block{1, 7, 2}
                             : Block{2, 3, 2};
  const int OB = b.nv * VW, PW = b.pw, PH = b.ph;
  Var ow("ow"), oh("oh"), o("o"), n("n"), oi("oi"), oo("oo");
  Var w("w"), h("h"), c("c"), kw("kw"), kh("kh");

  // ---- algorithm ----
  // The padded input as a buffer: the hot loop then loads without bounds selects.
  Func xp("doc_xp");
  Func xz = zero_padded(in);
  xp(w, h, c, n) = xz(w, h, c, n);
  // Weights packed so a block's OB output channels are adjacent for each (kw, kh, c); the
  // last block repeats channel O - 1 (computed, never stored).
  Func wt("doc_wt");
  wt(oi, kw, kh, c, oo) = in.weight(kw, kh, c, min(oo * OB + oi, in.O() - 1));
  // cb: the channel-blocked copies of x and of the weights (wtb: OB channels adjacent for each
  // (ci, kw, kh, co)).
  const int CB = 8;
  Var ci("ci"), co("co");
  Func xb("doc_xb"), wtb("doc_wtb");
  Expr cc = co * CB + ci, cok = cc < in.C(), ccl = min(cc, in.C() - 1);
  xb(ci, w, h, co, n) = select(cok, xz(w, h, ccl, n), 0.0f);
  wtb(oi, ci, kw, kh, co, oo) =
      select(cok, in.weight(kw, kh, ccl, min(oo * OB + oi, in.O() - 1)), 0.0f);
  RDom r = cb ? RDom(0, CB, 0, in.KW(), 0, in.KH(), 0, (in.C() + CB - 1) / CB, "r")
              : RDom(0, in.KW(), 0, in.KH(), 0, in.C(), "r");
  Func acc("doc_acc");
  acc(oi, ow, oh, oo, n) = 0.0f;
  if (cb) {
    Expr xw = ow * in.stride_w + r.y * in.dilation_w - in.pad_w;
    Expr xh = oh * in.stride_h + r.z * in.dilation_h - in.pad_h;
    acc(oi, ow, oh, oo, n) += xb(r.x, xw, xh, r.w, n) * wtb(oi, r.x, r.y, r.z, r.w, oo);
  } else {
    Expr xw = ow * in.stride_w + r.x * in.dilation_w - in.pad_w;
    Expr xh = oh * in.stride_h + r.y * in.dilation_h - in.pad_h;
    acc(oi, ow, oh, oo, n) +=
        (unpadded ? in.x(xw, xh, r.z, n) : xp(xw, xh, r.z, n)) * wt(oi, r.x, r.y, r.z, oo);
  }
  Func y = dsl::output_func("y");
  y(ow, oh, o, n) = output_stage(in, acc(o % OB, ow, oh, o / OB, n), o);

  // ---- schedule ----
  // Loops: per task, a group of OG = 128 output channels (its packed weights, 128 * C * KH *
  // KW floats, stay in L2) x 2 output rows; per 7 x 2 pixel block, the group's channel blocks
  // innermost, reusing the block's x tile from L1 (x was streamed O / 32 times with the
  // channel blocks outermost). Measured within noise alone (1x1 stride 2 256 -> 512 at 56x56:
  // 0.63x -> 0.66x oneDNN, host load ~10); kept for the larger-O shapes' L2 traffic.
  // small: per task OG = 32 output channels x every pixel, its weights packed by the task
  // (32 * C * KH * KW floats, L2) and read once; x (small when the output is) is re-read from
  // L2 by each task. With row-pair tasks a 7x7 output's 4 pairs each streamed their group's
  // weights (2.4 MB at 512 -> 512 3x3, over L2) from L3: 512 -> 512 3x3 and 1024 -> 2048
  // 1x1 stride 2 at 14x14 took 0.6-0.75x direct_oc's time (both ISAs, same runs). Measured
  // and dropped: OG = 64 (as fast or slower); OG = 64 or 256 in direct_oc's order (no gain).
  // A task runs its group over every image (n inside), so the weights are packed once per
  // group, not once per image: at batch 8 tasks of (group, image) took 1.2-1.5x the time
  // (512@7 -> 512 3x3: oneDNN's time / ours 0.56-0.60 -> 0.86 on AVX-512, 0.64-0.66 -> 0.75
  // on AVX2; 512@14 -> 512 stride 2 0.59 -> 0.74; 1x1 512@7 -> 2048 AVX2 0.62 -> 0.75; 2026-12-05,
  // AMD EPYC family 26 model 2, 2 threads, alternating runs); batch 1 is unchanged. The tasks
  // are then O / 32 whatever the batch (16 at 512 channels), as at batch 1.
  const int OG = small ? 32 : 128;
  // Row-pair tasks: the O channels in groups of equal size (at most OG, a multiple of OB), so
  // that the static split gives two threads equal work: 320 channels ran groups of 128, 128
  // and 64 (12 : 8 over two threads at 16x16), now 112, 112 and 96 on AVX2: the time 0.87-0.89x
  // at 320@16, 320@32 and 320@64 stride 2 (direct_oc_blocked; direct_oc 0.94x), 256 channels
  // unchanged (2026-12-06, AMD EPYC family 25 model 17, 2 threads, old and new kernels
  // interleaved in one process). AVX-512's 32-channel blocks still make 128, 128 and 64 of 320.
  // Divisions only: Halide bounds the fused task index's decode exactly only for a plain
  // expression (nn_matmul.cpp).
  const Expr groups = (in.O() + OG - 1) / OG;
  const Expr og_size = small ? Expr(OG) : ((in.O() + groups - 1) / groups + OB - 1) / OB * OB;
  Var owo("owo"), owi("owi"), oho("oho"), ohi("ohi"), og("og"), o2("o2"), t("t"), p("p");
  // Tails: unpadded, the last block shifts inwards (recomputing a few outputs) so that it
  // never reads past x; padded, it computes past the output into the copy's zeros.
  const TailStrategy tail = unpadded ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf;
  y.split(ow, owo, owi, PW, tail)
      .split(oh, oho, ohi, PH, tail)
      .split(o, og, o2, og_size, TailStrategy::GuardWithIf)
      .split(o2, oo, oi, OB, TailStrategy::GuardWithIf);
  if (small) {
    y.reorder(owi, ohi, oi, oo, owo, oho, n, og).rename(og, p).parallel(p);
  } else {
    y.reorder(owi, ohi, oi, oo, owo, oho, og, n).fuse(oho, og, t).fuse(t, n, p).parallel(p);
  }
  // A fixed-size block (also at the tails) keeps the accumulators in registers.
  acc.compute_at(y, oo)
      .bound(oi, 0, OB)
      .bound_extent(ow, PW)
      .bound_extent(oh, PH)
      .vectorize(oi, VW)
      .unroll(ow)
      .unroll(oh);
  Var oio("oio"), oii("oii");
  acc.update().split(oi, oio, oii, VW);
  if (cb) {
    acc.update().reorder(oii, oio, ow, oh, r.x, r.y, r.z, r.w).unroll(r.x);
  } else {
    acc.update().reorder(oii, oio, ow, oh, r.x, r.y, r.z);
  }
  acc.update().vectorize(oii).unroll(oio).unroll(ow).unroll(oh);
  // Constant strides (and dilation 1) make the block's x addresses one base + displacements;
  // with a run-time stride each pixel's offset was its own register, spilled. kw stays a loop:
  // unrolled, LLVM shares the broadcasts of pixel i at kw + sw and pixel i + 1 at kw, keeps
  // them live and spills accumulators. Measured 1x256x56x56 -> 256 3x3 stride 2, AVX-512,
  // 2 threads, loaded shared 2-vCPU Xeon (model 207), ratio to oneDNN 2.6 brgconv, same run:
  // run-time stride 0.50x; specialized with kw unrolled 0.48x; specialized, kw a loop 0.93x
  // (direct: 0.21x). Later runs of all ResNet-50 strided shapes: scripts/BENCHMARKS.md.
  // 1x1 first: without it the two one-trip filter loops wrap every 28-FMA step in ~25
  // instructions of loop bookkeeping (1x1 stride 2 256 -> 512 at 56x56: 0.66x oneDNN before,
  // 0.92x after, same run).
  Expr k1x1 = in.KW() == 1 && in.KH() == 1;
  for (int s = 1; s <= 2; s++) acc.update().specialize(k1x1 && in.stride_w == s);
  for (int s = 1; s <= 2; s++) acc.update().specialize(in.stride_w == s && in.dilation_w == 1);
  if (cb) {
    xb.compute_root().vectorize(ci).parallel(co);
    if (small) {
      wtb.compute_at(y, p).vectorize(oi, VW);
    } else {
      wtb.compute_root().vectorize(oi, VW).parallel(oo);
    }
  } else {
    if (!unpadded) xp.compute_root().vectorize(w, VW).parallel(c);
    if (small) {
      wt.compute_at(y, p).vectorize(oi, VW);
    } else {
      wt.compute_root().vectorize(oi, VW).parallel(oo);
    }
  }

  return NnKernel{{y},
                  std::string(form.name) + ": " + std::to_string(b.nv) +
                      " vectors of output channels x " + std::to_string(PW) + "x" +
                      std::to_string(PH) + " pixels register block, broadcast input, tasks of " +
                      (small ? "" : "up to ") + std::to_string(OG) + " channels x " +
                      (small ? "every pixel" : "2 rows, the channels in groups of equal size"),
                  {{"o_block", OB},
                   {"w_block", PW},
                   {"h_block", PH},
                   {"o_group", OG},
                   {"c_block", cb ? CB : 1}}};
}

}  // namespace

NnKernel build_direct_oc(const ConvInputs& in) {
  return build(in, {"direct_oc", false, false, false});
}
NnKernel build_direct_oc_blocked(const ConvInputs& in) {
  return build(in, {"direct_oc_blocked", false, false, true});
}
NnKernel build_direct_oc_unpadded(const ConvInputs& in) {
  return build(in, {"direct_oc_unpadded", true, false, false});
}
NnKernel build_direct_oc_small(const ConvInputs& in) {
  return build(in, {"direct_oc_small", false, true, false});
}
NnKernel build_direct_oc_small_8(const ConvInputs& in) {
  return build(in, {"direct_oc_small_8", false, true, false, true});
}

}  // namespace opforge::generators::conv
