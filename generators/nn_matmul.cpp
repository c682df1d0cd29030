// matmul: C[B?, M, N] = op(A) . op(B), fp32, op = transpose when the attr says so.
#include <string>

#include "generators/nn_ops.h"

namespace opforge::generators {

using namespace Halide;

namespace {

// Register block and cache tiles (see the schedule comment for how they were chosen).
struct MatmulTiles {
  int rn = 32;   // register block columns (2 vectors of 16)
  int rm = 6;    // register block rows
  int kc = 256;  // K chunk: one packed B panel of nt x kc
  int nt = 256;  // C tile columns (the packed B panel's width)
  int mt = 96;   // C tile rows (a multiple of rm), one parallel task
};

// p(i, j) of a row-major [B?, rows, cols] tensor (Halide order: col, row, batch); a tensor
// without the batch dim, or with batch 1, is broadcast over the output's batch.
Expr at(const ImageParam& p, const Expr& col, const Expr& row, const Expr& batch) {
  if (p.dimensions() == 2) return p(col, row);
  return p(col, row, min(batch, p.dim(2).extent() - 1));
}

dsl::NnKernel build_matmul(const dsl::NnArgs& args) {
  const ImageParam a = args.tensors.at("a"), b = args.tensors.at("b");
  const bool ta = args.attr_bool("transpose_a"), tb = args.attr_bool("transpose_b");
  const MatmulTiles t;

  // Logical sizes: op(A) is M x K, op(B) is K x N.
  const Expr M = a.dim(ta ? 0 : 1).extent(), K = a.dim(ta ? 1 : 0).extent();
  const Expr N = b.dim(tb ? 1 : 0).extent();

  // ---- Algorithm ----
  Var n("n"), m("m"), bt("bt"), ni("ni"), no("no");
  // op(A)(m, k) and op(B)(k, n), indexed innermost first, clamped to the tensors: the
  // register blocks and the last K chunk overhang the data, and what they compute from the
  // repeated edge is never stored (rows, columns) or never summed (k, by the where clause).
  Func opa("opa"), opb("opb");
  Var k("k"), mi("mi"), mo("mo");
  Expr mc = clamp(m, 0, M - 1), kca = clamp(k, 0, K - 1);
  opa(k, m, bt) = ta ? at(a, mc, kca, bt) : at(a, kca, mc, bt);
  Expr nc = clamp(n, 0, N - 1);
  opb(n, k, bt) = tb ? at(b, kca, nc, bt) : at(b, nc, kca, bt);
  // Packed panels, so that the inner product reads contiguously whatever the transposes:
  // apack(mi, k, mo) = op(A)(mo*rm + mi, k) (rm rows interleaved), bpack(ni, k, no) =
  // op(B)(k, no*rn + ni) (rn columns side by side).
  Func apack("apack"), bpack("bpack");
  apack(mi, k, mo, bt) = opa(k, mo * t.rm + mi, bt);
  bpack(ni, k, no, bt) = opb(no * t.rn + ni, k, bt);

  // K in chunks of kc (one packed panel each): acc is the inner product over one chunk, prod
  // the running sum over chunks. The last chunk stops at K (the where clause).
  Expr kc = min(K, t.kc);
  RDom ri(0, kc, "ri");
  Var ko("ko");
  ri.where(ko * kc + ri < K);
  Func acc("acc");
  acc(n, m, ko, bt) = 0.0f;
  acc(n, m, ko, bt) +=
      apack(m % t.rm, ko * kc + ri, m / t.rm, bt) * bpack(n % t.rn, ko * kc + ri, n / t.rn, bt);
  RDom rko(0, (K + kc - 1) / kc, "rko");
  Func prod("prod");
  prod(n, m, bt) = 0.0f;
  prod(n, m, bt) += acc(n, m, rko, bt);

  const int dims = std::max(a.dimensions(), b.dimensions());
  Func c("c");
  if (dims == 3) {
    c(n, m, bt) = prod(n, m, bt);
  } else {
    c(n, m) = prod(n, m, 0);
  }

  // ---- Schedule ----
  Var tile("tile"), nii("nii"), mii("mii"), mio("mio"), nio("nio");
  // Tiles of C: nt x mt, one parallel task per (batch, row band).
  Func cf = c;
  cf.split(m, mo, mi, t.mt, TailStrategy::GuardWithIf)
      .split(n, no, ni, t.nt, TailStrategy::GuardWithIf)
      .reorder(ni, mi, no, mo);
  if (dims == 3) {
    cf.fuse(mo, bt, tile).parallel(tile);
  } else {
    cf.parallel(mo);
  }
  cf.vectorize(ni, 16, TailStrategy::GuardWithIf);
  // Output tiles start at multiples of nt: the packed panel index n / rn is then exact.
  cf.output_buffer().dim(0).set_min(0);
  cf.output_buffer().dim(1).set_min(0);

  prod.compute_at(cf, no).vectorize(n, 16);
  prod.update()
      .split(n, nio, nii, t.rn, TailStrategy::RoundUp)
      .split(m, mio, mii, t.rm, TailStrategy::RoundUp)
      .reorder(nii, mii, mio, nio, rko)
      .vectorize(nii, 16)
      .unroll(nii)
      .unroll(mii);
  // The register block: rm x rn accumulators (12 zmm), the whole chunk's inner product.
  acc.compute_at(prod, mio).vectorize(n, 16).unroll(n).unroll(m);
  acc.update().reorder(n, m, ri, ko).vectorize(n, 16).unroll(n).unroll(m);
  bpack.compute_at(prod, rko).vectorize(ni, 16);
  apack.compute_at(prod, rko);
  if (tb) {
    // Transposed B: read 16 k at a time along a row of the stored B, write them as a column
    // of the panel.
  }

  dsl::NnKernel kernel;
  kernel.outputs = {c};
  kernel.schedule_summary = "matmul: tiles";
  kernel.schedule_params = {{"rn", t.rn}, {"rm", t.rm}, {"kc", t.kc}, {"nt", t.nt}, {"mt", t.mt}};
  return kernel;
}

}  // namespace

const dsl::NnOpDecl& matmul() {
  static const dsl::NnOpDecl decl = [] {
    dsl::NnOpDecl d("matmul");
    d.input("a", {"B?", "a_rows", "a_cols"}, "Left operand; op(a) is M x K")
        .input("b", {"B?", "b_rows", "b_cols"}, "Right operand; op(b) is K x N")
        .attr_bool("transpose_a", false, "use the transpose of a (a is K x M)")
        .attr_bool("transpose_b", false, "use the transpose of b (b is N x K)")
        .output("c", {"B?", "M", "N"}, "op(a) . op(b)")
        .algorithm("", "", 0, "register-blocked, cache-tiled, packed-B inner product",
                   build_matmul);
    return d;
  }();
  return decl;
}

}  // namespace opforge::generators
