// conv2d as matmul's packed GEMM over whole images (nn_matmul.cpp), y = weight . B with B's
// columns an image's output pixels:
// - gemm_1x1_images and gemm_1x1_s2_images: gemm_1x1 (nn_conv2d_gemm.cpp) on outputs of 64
//   pixels or fewer at a batch divisible by 4, with the columns running across images. A tile
//   is 4 whole images x up to mt output channels, its columns the images' output pixels one
//   after another (column i * P + p: image i of the tile, pixel p of its P output pixels), so
//   4 images of 49 pixels cost 196 columns (224 computed on AVX-512, 208 on AVX2), not 4 x 64
//   (a 49-pixel tile is two 32-column register blocks, or four of 16).
// - gemm_3x3: a 3x3 stride-1 convolution on outputs of 65-256 pixels, one image a tile, K =
//   9 C (an implicit GEMM: the rows of B are x's (channel, tap) windows).
// Per K chunk the tile's rows of B are first copied into a dense slab, which the B pack then
// reads as it reads x in gemm_1x1: 1x1 stride 1, one vector copy per image (x's planes are
// dense); stride 2, one stride-2 copy per output row; 3x3, per (channel, tap) its window of a
// zero-padded copy of x, row by row.
#include "generators/nn_conv2d.h"
#include "generators/nn_matmul.h"

namespace opforge::generators::conv {

using namespace Halide;
using dsl::NnKernel;

namespace {

// ks: the filter's size, 1 (pad 0) or 3 (stride 1, any padding, dilation 1): the algorithms'
// conditions. NB: images per tile.
NnKernel gemm_images(const ConvInputs& in, int stride, int ks, int NB) {
  const Expr W = in.OW(), H = in.OH();
  const Expr P = W * H, O = in.O(), C = in.C(), K = C * ks * ks, N = in.N();
  const Var w("w"), h("h"), o("o"), n("n"), c("c"), k("k"), m("m"), bt("bt");
  const MatmulTiles t = matmul_tiles(in.target);
  const int vec = t.rn / 2;

  // ---- algorithm ----
  // Images per tile (1x1: 4, the condition N % 4 == 0; 3x3: 1, up to 256 columns). A
  // constant, so that bounds inference sees tile n / NB and column (n % NB) * P + pixel of y's
  // image n exactly. (5 images and a short last tile at batch 8 computed 10 images' columns,
  // the GuardWithIf tail not narrowing prod's bounds, and ran no faster than a tile per image.)
  // slab(c, k, bt): tile bt's column c (image c / P of the tile, output pixel c % P), input
  // channel k, written image by image (stride 2: row by row) by the RDom, so that each copy
  // is dense. Columns past the tile's images are never written and only feed products that
  // are never stored; images past N (a call outside the condition) are skipped.
  // A 3x3 filter: K runs over (c, kh, kw) in weight's OIHW order, so a weight row is one
  // contiguous run of K (the A pack copies each channel's 9 taps from one run: a_k_group), and
  // the slab copies each k's shifted window from a zero-padded copy of x (xp: its loads then
  // need no select).
  Func slab("slab"), xp("gi_xp");
  slab(c, k, bt) = undef<float>();
  // k's input channel and tap; past K (the last chunk's overhang) the last channel. Only the
  // channel is clamped (K = 9 C: a tap group never straddles K), so that with k = 9 g + j the
  // A pack's j-th copy folds to channel g, tap j.
  const Expr ch = clamp(k / (ks * ks), 0, C - 1);
  const Expr kw = ks == 1 ? Expr(0) : k % ks, kh = ks == 1 ? Expr(0) : k / ks % ks;
  RDom ri = stride == 1 && ks == 1 ? RDom(0, NB, 0, P, "ri") : RDom(0, NB, 0, W, 0, H, "ri");
  ri.where(bt * NB + ri.x < N);
  const Expr img = min(bt * NB + ri.x, N - 1);
  if (ks == 1 && stride == 1) {
    slab(ri.x * P + ri.y, k, bt) = in.x(ri.y % W, ri.y / W, ch, img);
  } else if (ks == 1) {
    slab(ri.x * P + ri.z * W + ri.y, k, bt) = in.x(ri.y * stride, ri.z * stride, ch, img);
  } else {
    xp(c, h, k, n) = zero_padded(in)(c, h, k, n);
    slab(ri.x * P + ri.z * W + ri.y, k, bt) =
        xp(ri.y * stride + kw - in.pad_w, ri.z * stride + kh - in.pad_h, ch, img);
  }
  Func opa("opa"), opb("opb");
  // weight(kw, kh, c, o) at K index k: dense (the strides below), so the address is k's.
  opa(k, m, bt) = in.weight(kw, kh, ch, clamp(m, 0, O - 1));
  opb(c, k, bt) = slab(c, k, bt);
  PackedGemm g = define_packed_gemm(opa, opb, K, in.target, false);
  g.a_k_group = ks > 1 ? ks * ks : 0;
  Func y = dsl::output_func("y");
  y(w, h, o, n) = output_stage(in, g.prod((n % NB) * P + h * W + w, o, n / NB), o);

  // ---- schedule ----
  // Dense x and y planes at 0 (as in gemm_1x1): the slab's loads and y's stores are vectors.
  in.x.dim(0).set_min(0);
  in.x.dim(1).set_min(0).set_stride(in.W());
  if (ks > 1) {
    in.weight.dim(0).set_min(0).set_stride(1);
    in.weight.dim(1).set_min(0).set_stride(ks);
    in.weight.dim(2).set_min(0).set_stride(ks * ks);
    // The padded copy: one pass over x (2 x 2560 x 18 x 18 floats: 6.6 MB).
    xp.compute_root().vectorize(c, vec, TailStrategy::GuardWithIf).parallel(k);
  }
  OutputImageParam yb = y.output_buffer();
  yb.dim(0).set_min(0).set_extent(W);
  yb.dim(1).set_min(0).set_extent(H).set_stride(W);
  yb.dim(2).set_min(0).set_extent(O);
  yb.dim(3).set_min(0).set_extent(N);

  // One parallel task per tile: NB images x a tile row of output channels.
  const Expr mt = packed_gemm_tile_height(g, O);
  Var mo("mo"), mi("mi"), nbo("nbo"), nbi("nbi"), tile("tile");
  y.split(n, nbo, nbi, NB, TailStrategy::GuardWithIf)
      .split(o, mo, mi, mt, TailStrategy::GuardWithIf)
      .reorder(w, h, mi, nbi, mo, nbo)
      .fuse(mo, nbo, tile)
      .parallel(tile)
      .vectorize(w, vec, TailStrategy::GuardWithIf);
  // The tile's columns start at 0; aligned, bounds inference knows it, and a register
  // block's n % rn is its own index (without it the B panel's loads were gathers and the
  // kernel 2.5x slower).
  g.prod.align_bounds(g.n, t.rn);
  schedule_packed_gemm(g, LoopLevel(y, tile), true, false, false);
  // Per K chunk, before the B pack: kc channels x the tile's columns (L2). Along the vectors
  // one image's pixels (stride 2: one output row's); each (image, pixel) writes its own
  // column, which Halide cannot prove through the RDom.
  slab.compute_at(g.prod, g.rko);
  slab.update().allow_race_conditions().vectorize(ri.y, vec, TailStrategy::GuardWithIf);

  const std::string name =
      ks > 1 ? "gemm_3x3" : (stride == 1 ? "gemm_1x1_images" : "gemm_1x1_s2_images");
  return NnKernel{
      {y},
      name + ": matmul's packed GEMM (" + std::to_string(t.rm) + "x" + std::to_string(t.rn) +
          " register block), one parallel task per tile of " + std::to_string(NB) +
          (NB > 1 ? " whole images (their output pixels as consecutive columns)" : " whole image") +
          " x output channels (up to " + std::to_string(t.mt) +
          "); per K chunk the tile's pixels copied into a " +
          (ks > 1        ? "dense slab, each (channel, tap) its window of a "
                           "zero-padded copy of x"
           : stride == 1 ? "dense slab"
                         : "dense slab, every other pixel of every other row"),
      {{"rn", t.rn}, {"rm", t.rm}, {"kc", t.kc}, {"mt", t.mt}, {"images", NB}}};
}

}  // namespace

NnKernel build_gemm_1x1_images(const ConvInputs& in) {
  return gemm_images(in, 1, 1, 4);
}
NnKernel build_gemm_1x1_s2_images(const ConvInputs& in) {
  return gemm_images(in, 2, 1, 4);
}
NnKernel build_gemm_3x3(const ConvInputs& in) {
  return gemm_images(in, 1, 3, 1);
}

}  // namespace opforge::generators::conv
