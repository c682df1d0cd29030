// conv2d, Winograd F(4x4, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2016), for 3x3 stride 1 dilation 1 groups 1 and any padding.
//
// Output tile (tx, ty) of 4x4 pixels reads a 6x6 input window d; with e = (e1, e2) one of the
// 36 transform-domain points:
//   V[e](t, c) = (B^T d B)[e]            input transform, per tile and input channel
//   U[e](c, o) = (G g G^T)[e]            filter transform, per call (weights are inputs)
//   M[e](t, o) = sum_c V[e](t, c) U[e](c, o)   36 independent GEMMs: the hot loop
//   y tile     = A^T M A                 output transform, + bias, ReLU when fused
// 4x4 outputs cost 36 multiply-adds per input channel instead of 144 (direct): 4x fewer.
// Tiles are indexed (tx, tyn) with tyn = ty + TH * n, so a vector of tiles runs along one row
// of tiles (dense loads in every stage).
#include "generators/nn_conv2d.h"

namespace opforge::generators::conv {

using namespace Halide;
using dsl::NnKernel;

namespace {

const float kBT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                         {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
const float kG[6][3] = {{1.f / 4, 0, 0},
                        {-1.f / 6, -1.f / 6, -1.f / 6},
                        {-1.f / 6, 1.f / 6, -1.f / 6},
                        {1.f / 24, 1.f / 12, 1.f / 6},
                        {1.f / 24, -1.f / 12, 1.f / 6},
                        {0, 0, 1}};
const float kAT[4][6] = {
    {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

// sum_k coef[k] * term(k), zero coefficients skipped, +-1 without a multiply.
template <typename F>
Expr combine(const float* coef, int n, F term) {
  Expr s;
  for (int k = 0; k < n; k++) {
    if (coef[k] == 0) continue;
    Expr t = term(k);
    if (coef[k] == -1)
      t = -t;
    else if (coef[k] != 1)
      t = coef[k] * t;
    s = s.defined() ? s + t : t;
  }
  return s;
}

}  // namespace

NnKernel build_winograd(const ConvInputs& in) {
  Var tx("tx"), tyn("tyn"), c("c"), o("o"), e("e"), e1("e1"), b("b"), j("j");
  Var ow("ow"), oh("oh"), n("n");
  Expr TW = (in.OW() + 3) / 4, TH = (in.OH() + 3) / 4;
  Expr C = in.C(), O = in.O();

  // ---- algorithm ----
  Func xp = zero_padded(in);
  Expr ty = tyn % TH, tn = min(tyn / TH, in.N() - 1);  // tyn is rounded up in the GEMM
  auto d = [&](Expr a, Expr bb) {
    return xp(4 * tx + a - in.pad_w, 4 * ty + bb - in.pad_h, c, tn);
  };
  // Input transform, rows then columns: Bx = B^T d (along w), V = Bx B (along h).
  Func bx("wino_bx"), v("wino_v");
  std::vector<Expr> rows;
  for (int k = 0; k < 6; k++) rows.push_back(combine(kBT[k], 6, [&](int a) { return d(a, b); }));
  bx(tx, tyn, c, e1, b) = mux(e1, rows);
  std::vector<Expr> pts;
  for (int k2 = 0; k2 < 6; k2++)
    for (int k1 = 0; k1 < 6; k1++)
      pts.push_back(combine(kBT[k2], 6, [&](int bb) { return bx(tx, tyn, c, k1, bb); }));
  v(tx, tyn, c, e) = mux(e, pts);

  // Filter transform U[e](c, o) = G g G^T, rows (kw) then columns (kh); o clamped (the
  // GEMM rounds its blocks up).
  Func gw("wino_gw"), u("wino_u");
  Var k("k");
  Expr oc = min(o, O - 1);
  std::vector<Expr> grows;
  for (int k1 = 0; k1 < 6; k1++)
    grows.push_back(combine(kG[k1], 3, [&](int kw) { return in.weight(kw, k, c, oc); }));
  gw(c, o, e1, k) = mux(e1, grows);
  std::vector<Expr> upts;
  for (int k2 = 0; k2 < 6; k2++)
    for (int k1 = 0; k1 < 6; k1++)
      upts.push_back(combine(kG[k2], 3, [&](int kh) { return gw(c, o, k1, kh); }));
  u(c, o, e) = mux(e, upts);

  // The 36 GEMMs.
  Func mf("wino_mf"), m("wino_m");
  RDom r(0, C, "r");
  mf(tx, tyn, o, e) = 0.0f;
  mf(tx, tyn, o, e) += v(tx, tyn, r, e) * u(r, o, e);
  m(tx, tyn, o, e) = mf(tx, tyn, o, e);

  // Output transform: columns (along h) then rows (along w).
  Func am("wino_am");
  Func y = dsl::output_func("y");
  std::vector<Expr> cols;
  for (int k = 0; k < 4; k++)
    cols.push_back(combine(kAT[k], 6, [&](int k2) { return m(tx, tyn, o, e1 + 6 * k2); }));
  am(tx, tyn, o, e1, j) = mux(j, cols);
  Expr otx = ow / 4, otyn = oh / 4 + TH * n;
  std::vector<Expr> outs;
  for (int k = 0; k < 4; k++)
    outs.push_back(combine(kAT[k], 6, [&](int k1) { return am(otx, otyn, o, k1, oh % 4); }));
  y(ow, oh, o, n) = output_stage(in, mux(ow % 4, outs), o);

  // ---- schedule ----
  // Measured (2 threads, shared 2-vCPU Zen 4 host, load 5-10, interleaved medians, ratio to
  // oneDNN 2.6 brgconv with its own blocked layout and no reorders, same run):
  //   1x320x64x64 -> 320: 69-81 ms, 1.9-2.0x oneDNN. 1x640x32x32 -> 640: 96-105 ms,
  //   1.3-1.5x (0.87x before the 8-lane narrow version).
  // Tried: U, V and M all at root (36 GEMMs parallel over points): 101 ms (1.36x): 38 MB of
  // fresh intermediates per call, a third of the time in page faults and free. Now only V is
  // at root; U is per block of OBO output channels and M per TB tile rows (L2-sized).
  // Micro-kernel: 16 tiles x TB=2 tile rows x OB=10 channels = 20 zmm accumulators; per input
  // channel 2 vector loads, 10 broadcasts, 20 FMAs.
  // Double buffering: async() on the staged padded input plane (xp) and on the per-block
  // filter transform (u): 1.91x / 1.78x vs sync 1.93x / 1.29x (and 1.99x / 1.51x in another
  // sync run) at load ~10: within noise on 320x64x64, unclear on 640x32x32; kept sync.
  // Two versions, chosen at run time: rows of more than 8 tiles (W > 32) take 16-lane
  // vectors of tiles; narrower images 8-lane ones (a 16-lane vector would be half padding).
  const int TB = 2, OB = 10, OBO = 20;
  Var txo("txo"), txi("txi"), tyo("tyo"), tyi("tyi"), oo("oo"), oi("oi"), p("p");
  Var i("i"), owo("owo"), owr("owr"), oho("oho"), ohj("ohj"), ohb("ohb"), ob("ob");
  Expr narrow = TW <= 8;
  // Exactly TB tile rows per block (bounds inference alone over-estimates the rounded split).
  am.compute_at(y, owo);
  m.compute_at(y, ohb).bound_extent(tyn, TB);
  mf.compute_at(m, txo);
  u.compute_at(y, p);
  gw.compute_at(u, o);
  v.compute_root();
  bx.compute_at(v, txo);
  xp.compute_at(v, c);
  auto schedule = [&](bool narrow_branch) {
    const int VW = narrow_branch ? 8 : 16;
    auto sp = [&](Func f) { return narrow_branch ? f.specialize(narrow) : Stage(f); };
    auto spu = [&](Func f) { return narrow_branch ? f.update().specialize(narrow) : f.update(); };
    // y: per block of OBO output channels (parallel): its filter transform; per 4*TB output
    // rows: the GEMMs of those tile rows (all 36 points); per VW tiles: the output transform.
    sp(y)
        .split(o, ob, o, OBO, TailStrategy::GuardWithIf)
        .split(oh, ohb, oh, 4 * TB, TailStrategy::GuardWithIf)
        .split(ow, owo, owr, 4 * VW, TailStrategy::GuardWithIf)
        .split(owr, txi, i, 4)
        .split(oh, oho, ohj, 4)
        .reorder(txi, i, ohj, owo, oho, o, ohb, ob, n)
        .vectorize(txi)
        .unroll(i)
        .unroll(ohj)
        .fuse(ob, n, p)
        .parallel(p);
    sp(am).vectorize(tx, VW, TailStrategy::RoundUp).unroll(e1).unroll(j);
    sp(m)
        .split(tx, txo, txi, VW, TailStrategy::RoundUp)
        .split(tyn, tyo, tyi, TB)
        .split(o, oo, oi, OB, TailStrategy::RoundUp)
        .reorder(txi, tyi, oi, txo, tyo, oo, e)
        .vectorize(txi)
        .unroll(tyi)
        .unroll(oi);
    sp(mf).vectorize(tx).unroll(tyn).unroll(o);
    spu(mf).reorder(tx, tyn, o, r).vectorize(tx).unroll(tyn).unroll(o);
    sp(v)
        .split(tx, txo, txi, VW, TailStrategy::RoundUp)
        .reorder(txi, e, txo, tyn, c)
        .vectorize(txi)
        .unroll(e)
        .parallel(c);
    sp(bx).vectorize(tx).unroll(e1).unroll(b);
  };
  schedule(true);
  schedule(false);
  u.vectorize(c, 16, TailStrategy::GuardWithIf).unroll(e).reorder(c, e, o);
  gw.vectorize(c, 16, TailStrategy::GuardWithIf).unroll(e1).unroll(k);
  xp.vectorize(xp.args()[0], 16);

  return NnKernel{{y},
                  "winograd F(4x4,3x3): 36 GEMMs (16 tiles x 2 tile rows x 10 channels)",
                  {{"tile_rows", TB}, {"o_block", OB}, {"o_outer_block", OBO}}};
}

}  // namespace opforge::generators::conv
