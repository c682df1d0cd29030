// conv2d, gemm_1x1_images and gemm_1x1_s2_images: gemm_1x1 (nn_conv2d_gemm.cpp) on outputs
// of 64 pixels or fewer at a batch divisible by 4, with the product's columns running across
// images. A tile is 4 whole images x up to mt output channels, and its columns are the
// images' output pixels one after another (column i * P + p: image i of the tile, pixel p of
// its P output pixels), so 4 images of 49 pixels cost 196 columns (224 computed on AVX-512,
// 208 on AVX2), not 4 x 64 (a 49-pixel tile is two 32-column register blocks, or four of 16).
// Per K chunk the tile's input channels of its images are first copied into a dense slab in
// that order, which the B pack then reads as it reads x in gemm_1x1: at stride 1 one vector
// copy per image (x's planes are dense), at stride 2 one stride-2 copy per output row.
#include "generators/nn_conv2d.h"
#include "generators/nn_matmul.h"

namespace opforge::generators::conv {

using namespace Halide;
using dsl::NnKernel;

namespace {

NnKernel gemm_1x1_images(const ConvInputs& in, int stride) {
  // Output extents (pad 0, a 1x1 filter).
  const Expr W = stride == 1 ? in.W() : (in.W() - 1) / stride + 1;
  const Expr H = stride == 1 ? in.H() : (in.H() - 1) / stride + 1;
  const Expr P = W * H, O = in.O(), K = in.C(), N = in.N();
  const Var w("w"), h("h"), o("o"), n("n"), c("c"), k("k"), m("m"), bt("bt");
  const MatmulTiles t = matmul_tiles(in.target);
  const int vec = t.rn / 2;

  // ---- algorithm ----
  // Images per tile: 4 (the algorithm's condition: N % 4 == 0). A constant, so that bounds
  // inference sees tile n / NB and column (n % NB) * P + pixel of y's image n exactly. (5
  // images and a short last tile at batch 8 computed 10 images' columns, the GuardWithIf tail
  // not narrowing prod's bounds, and ran no faster than a tile per image.)
  const int NB = 4;
  // slab(c, k, bt): tile bt's column c (image c / P of the tile, output pixel c % P), input
  // channel k, written image by image (stride 2: row by row) by the RDom, so that each copy
  // is dense. Columns past the tile's images are never written and only feed products that
  // are never stored; images past N (a call outside the condition) are skipped.
  Func slab("slab");
  slab(c, k, bt) = undef<float>();
  const Expr kc = clamp(k, 0, K - 1);
  RDom ri = stride == 1 ? RDom(0, NB, 0, P, "ri") : RDom(0, NB, 0, W, 0, H, "ri");
  ri.where(bt * NB + ri.x < N);
  const Expr img = min(bt * NB + ri.x, N - 1);
  if (stride == 1) {
    slab(ri.x * P + ri.y, k, bt) = in.x(ri.y % W, ri.y / W, kc, img);
  } else {
    slab(ri.x * P + ri.z * W + ri.y, k, bt) = in.x(ri.y * stride, ri.z * stride, kc, img);
  }
  Func opa("opa"), opb("opb");
  opa(k, m, bt) = in.weight(0, 0, kc, clamp(m, 0, O - 1));
  opb(c, k, bt) = slab(c, k, bt);
  PackedGemm g = define_packed_gemm(opa, opb, K, in.target, false);
  Func y = dsl::output_func("y");
  y(w, h, o, n) = output_stage(in, g.prod((n % NB) * P + h * W + w, o, n / NB), o);

  // ---- schedule ----
  // Dense x and y planes at 0 (as in gemm_1x1): the slab's loads and y's stores are vectors.
  in.x.dim(0).set_min(0);
  in.x.dim(1).set_min(0).set_stride(in.W());
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

  return NnKernel{{y},
                  std::string(stride == 1 ? "gemm_1x1_images" : "gemm_1x1_s2_images") +
                      ": matmul's packed GEMM (" + std::to_string(t.rm) + "x" +
                      std::to_string(t.rn) +
                      " register block), one parallel task per tile of 4 whole images (their "
                      "output pixels as consecutive columns) x output channels (up to " +
                      std::to_string(t.mt) + "); per K chunk the tile's pixels copied into a " +
                      (stride == 1 ? "dense slab"
                                   : "dense slab, every other pixel of every "
                                     "other row"),
                  {{"rn", t.rn}, {"rm", t.rm}, {"kc", t.kc}, {"mt", t.mt}, {"images", NB}}};
}

}  // namespace

NnKernel build_gemm_1x1_images(const ConvInputs& in) {
  return gemm_1x1_images(in, 1);
}
NnKernel build_gemm_1x1_s2_images(const ConvInputs& in) {
  return gemm_1x1_images(in, 2);
}

}  // namespace opforge::generators::conv
