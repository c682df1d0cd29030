// conv2d, gemm_1x1: a 1x1 convolution with stride 1 and no padding is a matrix product per
// image, y[n] (O x H*W) = weight (O x C) . x[n] (C x H*W), NCHW being row-major in both. It
// runs matmul's packed GEMM (nn_matmul.cpp) with the pixels as the product's columns:
//   a = weight, M = O, K = C (a weight row contiguous along the input channels);
//   b = x[n] with its H x W plane flattened, N = H*W (a row contiguous along the pixels).
// x is dense (the runtime passes dense buffers; the stride constraint below lets Halide see
// it), so a flat pixel p at (p % W, p / W) addresses p itself: the B pack loads vectors, as in
// matmul.
#include "generators/nn_conv2d.h"
#include "generators/nn_matmul.h"

namespace opforge::generators::conv {

using namespace Halide;
using dsl::NnKernel;

NnKernel build_gemm_1x1(const ConvInputs& in) {
  const Expr O = in.O(), C = in.C(), W = in.W(), P = in.H() * in.W();
  const Var w("w"), h("h"), o("o"), n("n"), p("p"), k("k"), m("m"), bt("bt");

  // ---- algorithm ----
  // op(a)(k, m) and op(b)(p, k) clamped, as in matmul: register blocks and the last K chunk
  // overhang the data. p's clamp is marked likely: Halide finds matmul's clamped ramps itself
  // and peels the clamp off the B pack's steady state, but here the ramp sits inside % W and
  // / W until they simplify away, and the pack's loads stayed gathers.
  const Expr mc = clamp(m, 0, O - 1), kc = clamp(k, 0, C - 1), pc = clamp(likely(p), 0, P - 1);
  Func opa("opa"), opb("opb");
  opa(k, m, bt) = in.weight(0, 0, kc, mc);
  opb(p, k, bt) = in.x(pc % W, pc / W, kc, bt);
  PackedGemm g = define_packed_gemm(opa, opb, C, in.target);
  Func y = dsl::output_func("y");
  y(w, h, o, n) = output_stage(in, g.prod(h * W + w, o, n), o);

  // ---- schedule ----
  // Dense x and y with their planes at 0: (p % W) + (p / W) * W simplifies to p, so the
  // B pack loads and y's stores are vectors (the runtime's buffers always are; another layout
  // would fail the constraints' checks, not compute wrong).
  in.x.dim(0).set_min(0);
  in.x.dim(1).set_min(0).set_stride(W);
  // y's extents are x's and weight's (the runtime checked them): stated, so that bounds
  // inference relates the tiles (computed from x and weight) to y.
  OutputImageParam yb = y.output_buffer();
  yb.dim(0).set_min(0).set_extent(W);
  yb.dim(1).set_min(0).set_extent(in.H()).set_stride(W);
  yb.dim(2).set_min(0).set_extent(O);
  yb.dim(3).set_min(0).set_extent(in.N());

  // A tile is th whole rows of the image (about nt pixels: matmul's tile columns) x up to
  // mt output channels (tile rows of equal height): one parallel task. th is a constant per
  // range of W (each range its own loop nest), chosen so that ResNet's 56-, 28-, 14- and
  // 7-wide outputs (224 pixels) and the powers of two (256) make whole register blocks: tiles
  // then start at a multiple of rn pixels and the register block's n % rn is its own index;
  // other widths leave a tile start off the blocks, and align_bounds rounds the tile out to
  // whole blocks. (A th computed from W left bounds inference unable to bound the fused tile's
  // decomposition: y required from negative channels.) y is stored along w, one row at a time:
  // with w and the rows fused, the stores and prod's loads became scatters and gathers.
  const MatmulTiles& t = g.t;
  const int vec = t.rn / 2;
  const Expr mt = packed_gemm_tile_height(g, O);
  Var ho("ho"), hi("hi"), mo("mo"), mi("mi"), tile("tile");
  auto tiles = [&](Stage s, int th) {
    s.split(h, ho, hi, th, TailStrategy::GuardWithIf)
        .split(o, mo, mi, mt, TailStrategy::GuardWithIf)
        .reorder(w, hi, mi, ho, mo, n)
        .fuse(ho, mo, tile)
        .fuse(tile, n, tile)
        .parallel(tile)
        .vectorize(w, vec, TailStrategy::GuardWithIf);
  };
  for (int max_w = 8, th = t.nt / 8; max_w <= t.nt / 2; max_w *= 2, th /= 2)
    tiles(y.specialize(W <= max_w), th);
  tiles(y, 1);
  g.prod.align_bounds(g.n, t.rn);
  schedule_packed_gemm(g, LoopLevel(y, tile), true, false, false);

  return NnKernel{{y},
                  "gemm_1x1: matmul's packed GEMM over the flattened pixels (" +
                      std::to_string(t.rm) + "x" + std::to_string(t.rn) +
                      " register block), one parallel task per tile of whole output rows "
                      "(about " +
                      std::to_string(t.nt) + " pixels) x output channels (up to " +
                      std::to_string(t.mt) + ")",
                  {{"rn", t.rn}, {"rm", t.rm}, {"kc", t.kc}, {"nt", t.nt}, {"mt", t.mt}}};
}

}  // namespace opforge::generators::conv
