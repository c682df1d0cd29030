// conv2d, gemm_1x1: a 1x1 convolution with stride 1 and no padding is a matrix product per
// image, y[n] (O x H*W) = weight (O x C) . x[n] (C x H*W), NCHW being row-major in both. It
// runs matmul's packed GEMM (nn_matmul.cpp) with the pixels as the product's columns:
//   a = weight, M = O, K = C (a weight row contiguous along the input channels);
//   b = x[n] with its H x W plane flattened, N = H*W (a row contiguous along the pixels).
// x is dense (the runtime passes dense buffers; the stride constraint below lets Halide see
// it), so a flat pixel p at (p % W, p / W) addresses p itself: the B pack loads vectors, as in
// matmul.
//
// gemm_1x1_s2, stride 2 (ResNet's downsampling shortcuts): b's pixel p is x at
// (2 * (p % W), 2 * (p / W)) with W the output width, no longer a vector of x. The B pack first
// copies, one input channel at a time, the tile's rows of every other pixel of every other
// input row into a dense slab W floats wide (stride-2 vector loads, which Halide deinterleaves),
// and packs from the slab as stride 1 packs from x.
#include "generators/nn_conv2d.h"
#include "generators/nn_matmul.h"

namespace opforge::generators::conv {

using namespace Halide;
using dsl::NnKernel;

namespace {

NnKernel gemm_1x1(const ConvInputs& in, int stride) {
  // b read from x in place at stride 1, else through a slab per input channel (below).
  const bool in_place = stride == 1;
  // Output extents (pad 0, a 1x1 filter): the input's at stride 1.
  const Expr W = in_place ? in.W() : (in.W() - 1) / stride + 1;
  const Expr H = in_place ? in.H() : (in.H() - 1) / stride + 1;
  const Expr O = in.O(), K = in.C(), P = H * W;
  const Var w("w"), h("h"), o("o"), n("n"), p("p"), k("k"), m("m"), bt("bt");

  // ---- algorithm ----
  // op(a)(k, m) and op(b)(p, k) clamped, as in matmul: register blocks and the last K chunk
  // overhang the data. p's clamp is marked likely: Halide finds matmul's clamped ramps itself
  // and peels the clamp off the B pack's steady state, but here the ramp sits inside % W and
  // / W until they simplify away, and the pack's loads stayed gathers.
  const Expr mc = clamp(m, 0, O - 1), kc = clamp(k, 0, K - 1), pc = clamp(likely(p), 0, P - 1);
  Func opa("opa"), opb("opb");
  opa(k, m, bt) = in.weight(0, 0, kc, mc);
  Func xs("x_strided");
  // The batch index clamped: bounds inference cannot tell that a tile of several images
  // (below) never reaches past N.
  const Expr btc = min(bt, in.N() - 1);
  if (in_place) {
    opb(p, k, bt) = in.x(pc % W, pc / W, kc, btc);
  } else {
    // The slab's rows start at the tile's first row, so p's index into it is
    // p % W + (p / W - row0) * W: the simplifier cancels (p / W) * W there when the column is
    // written p - (p / W) * W, not p % W (a gather per pack vector otherwise). The promise
    // gives bounds inference the range % would have had (exact: p >= 0 and W >= 1).
    xs(w, h, k, bt) = in.x(w * stride, h * stride, k, btc);
    opb(p, k, bt) = xs(unsafe_promise_clamped(pc - (pc / W) * W, 0, W - 1), pc / W, kc, bt);
  }
  PackedGemm g = define_packed_gemm(opa, opb, K, in.target, false);
  Func y = dsl::output_func("y");
  y(w, h, o, n) = output_stage(in, g.prod(h * W + w, o, n), o);

  // ---- schedule ----
  // Dense x and y with their planes at 0: (p % W) + (p / W) * W simplifies to p, so the
  // B pack loads and y's stores are vectors (the runtime's buffers always are; another layout
  // would fail the constraints' checks, not compute wrong).
  in.x.dim(0).set_min(0);
  in.x.dim(1).set_min(0).set_stride(in.W());
  // y's extents are x's and weight's (the runtime checked them): stated, so that bounds
  // inference relates the tiles (computed from x and weight) to y.
  OutputImageParam yb = y.output_buffer();
  yb.dim(0).set_min(0).set_extent(W);
  yb.dim(1).set_min(0).set_extent(H).set_stride(W);
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
  // Outputs of 64 pixels or fewer (ResNet's 7x7): a tile of whole images, nb of them, so that
  // the weights' A panel is packed once per K chunk for nb images, not once per image. nb:
  // up to 4 (4 x 64 columns: about nt), fewer where the batch is too small for 4 tasks, and a
  // divisor of N (a short last tile would compute nb images' columns all the same: the
  // GuardWithIf tail does not narrow prod's bounds). At batch 8 against a tile per image
  // (2026-12-05, AMD EPYC family 26 model 2, 2 threads, alternating runs; oneDNN's time over
  // ours, before -> after): AVX-512 512@7 -> 2048
  // 0.75, 0.78 -> 0.88, 0.86; 2048@7 -> 512 0.93, 0.90 -> 1.06, 1.07; 1024@14 -> 2048 stride
  // 2 0.77, 0.84 -> 0.89, 0.96; AVX2 (stride 2) 0.69, 0.71 -> 0.77, 0.77. Batch 1: the same
  // tiles. A tile still computes 64 columns per 49-pixel image (AVX2 gemm_1x1_small ran
  // 0.93-1.24x direct_oc_small's time at batch 8: not shipped there); at a batch divisible by
  // 4 the *_images algorithms (nn_conv2d_gemm_images.cpp) run 4 images' pixels as one tile's
  // columns instead.
  const Expr tile_rows = (O + mt - 1) / mt;
  const Expr N = in.N(), cap = N * tile_rows / 4;
  const Expr nb =
      select(N % 4 == 0 && cap >= 4, 4, N % 3 == 0 && cap >= 3, 3, N % 2 == 0 && cap >= 2, 2, 1);
  Var nbo("nbo"), nbi("nbi");
  y.specialize(P <= 64)
      .split(n, nbo, nbi, nb, TailStrategy::GuardWithIf)
      .split(o, mo, mi, mt, TailStrategy::GuardWithIf)
      .reorder(w, h, mi, nbi, mo, nbo)
      .fuse(mo, nbo, tile)
      .parallel(tile)
      .vectorize(w, vec, TailStrategy::GuardWithIf);
  for (int max_w = 8, th = t.nt / 8; max_w <= t.nt / 2; max_w *= 2, th /= 2)
    tiles(y.specialize(W <= max_w), th);
  tiles(y, 1);
  g.prod.align_bounds(g.n, t.rn);
  schedule_packed_gemm(g, LoopLevel(y, tile), true, false, false, true);
  if (!in_place) {
    // The slab per input channel k (the B pack along k outside): computed per k and folded to
    // one channel, allocated once per K chunk, it stays in L1 from its stores to the pack's
    // loads. 2026-12-05, AMD EPYC family 26 model 2, 2 threads (`opforge bench conv2d`): on
    // 512@28 -> 1024 (AVX2) 1.03-1.12x the time of gemm_1x1 on the same product at stride 1
    // (512@14 -> 1024); on 256@56 -> 512 1.13-1.17x at 1 thread, where perf puts the
    // difference on the slab's loads of x (cold: each even input row read whole, twice the
    // lines stride 1 reads). Not kept: Func::prefetch of x 4 channels ahead (no change), the
    // channel tile rows innermost in the tile order (to reread x from L2; no better). A slab
    // allocated per k (no fold) with the % W index (gathers) took 1.67x direct_oc_unpadded's
    // time at 256@56 -> 512 (AVX-512); this, 0.96-1.00x.
    g.bpack.reorder(g.ni, g.no, g.k);
    xs.store_at(g.prod, g.rko).compute_at(g.bpack, g.k).fold_storage(k, 1).bound(w, 0, W);
    // A row's last vector shifted inwards where the row holds one: a predicated stride-2
    // load is a masked load per lane.
    xs.specialize(W >= vec).vectorize(w, vec, TailStrategy::ShiftInwards);
    xs.vectorize(w, vec, TailStrategy::GuardWithIf);
  }

  return NnKernel{{y},
                  "gemm_1x1: matmul's packed GEMM over the flattened pixels (" +
                      std::to_string(t.rm) + "x" + std::to_string(t.rn) +
                      " register block), one parallel task per tile of whole output rows "
                      "(about " +
                      std::to_string(t.nt) + " pixels) x output channels (up to " +
                      std::to_string(t.mt) +
                      "); outputs of <= 64 pixels: tiles of up to 4 whole images, one weight "
                      "panel per K chunk" +
                      (in_place ? std::string()
                                : "; every other pixel of every other row copied into a "
                                  "dense slab per input channel before the B pack"),
                  {{"rn", t.rn}, {"rm", t.rm}, {"kc", t.kc}, {"nt", t.nt}, {"mt", t.mt}}};
}

}  // namespace

NnKernel build_gemm_1x1(const ConvInputs& in) {
  return gemm_1x1(in, 1);
}
NnKernel build_gemm_1x1_s2(const ConvInputs& in) {
  return gemm_1x1(in, 2);
}

}  // namespace opforge::generators::conv
