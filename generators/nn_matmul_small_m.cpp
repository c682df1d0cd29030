// matmul's small_m algorithm: a few rows of op(a) against a large op(b), the shape of a
// Linear layer in a decode step (one token per sequence: M = batch). Then b is read once and
// each of its elements meets only M rows of a, so the packed algorithm's panels (b copied into
// the B panel, then read again) are all overhead: here b is read in place, once, as a stream.
//   transpose_b (torch's Linear: b = weight [N, K], each row contiguous along k):
//     c[m, n] = dot(op(a) row m, b row n): vectors along k, nr rows of b per register block
//     (nr accumulators, one op(a) load and nr b loads per vector of k), then one horizontal sum
//     per (m, n); the K % vec tail scalar. Per row m the block's nr rows of b are reread from
//     L1 (nr x K floats).
//   b [K, N] (contiguous along n): per block of nv vectors of n, the sums of every row m in
//     L1, k outermost: each of b's row segments is loaded once and serves all M rows (one
//     broadcast of op(a)[m, k] and nv multiply-adds per row).
#include "generators/nn_matmul.h"

namespace opforge::generators {

using namespace Halide;

namespace {

// Parallel tasks and register blocks along n (the schedule comment says how they were chosen).
struct SmallMTiles {
  int vec;                       // fp32 lanes: 16 on AVX-512, 8 on AVX2
  int task = kMatmulSmallMTask;  // n per parallel task (columns, or rows of b with transpose_b)
  int nr = 8;                    // transpose_b: rows of b per register block
  int nv = 8;                    // otherwise: vectors of n per block
};

}  // namespace

dsl::NnKernel build_matmul_small_m(const MatmulInputs& in, const dsl::NnArgs& args) {
  const ImageParam &a = in.a, &b = in.b;
  const bool ta = in.ta, tb = in.tb;
  const auto at = MatmulInputs::at;
  SmallMTiles t;
  t.vec = args.target.natural_vector_size<float>();
  const Expr M = a.dim(ta ? 0 : 1).extent(), K = a.dim(ta ? 1 : 0).extent();
  const Expr N = b.dim(tb ? 1 : 0).extent();

  // ---- Algorithm ----
  Var n("n"), m("m"), bt("bt"), k("k"), lane("lane");
  // op(a)'s rows, k innermost (M x K floats: copied per task, so transpose_a reads its column
  // once per task instead of per register block).
  Func arow("arow");
  arow(k, m, bt) = ta ? a(m, k, bt) : a(k, m, bt);
  Func c = dsl::output_func(in.out);
  Func part("part"), dot("dot"), acc("acc");
  const RDom rv(0, t.vec, "rv");
  const Expr Kv = K / t.vec;  // whole vectors of k
  const RDom rk(0, Kv, "rk"), rt(0, K - Kv * t.vec, "rt"), r(0, K, "r");
  if (tb) {
    // b(k, n, bt) is b's row n: whole vectors of k into lanes, the tail into the first lanes.
    part(lane, n, m, bt) = 0.0f;
    part(lane, n, m, bt) += arow(rk * t.vec + lane, m, bt) * at(b, rk * t.vec + lane, n, bt);
    part(rt, n, m, bt) += arow(Kv * t.vec + rt, m, bt) * at(b, Kv * t.vec + rt, n, bt);
    dot(n, m, bt) = 0.0f;
    dot(n, m, bt) += part(rv, n, m, bt);
    c(n, m, bt) = in.epilogue(dot(n, m, bt), n);
  } else {
    acc(n, m, bt) = 0.0f;
    acc(n, m, bt) += arow(r, m, bt) * at(b, n, r, bt);
    c(n, m, bt) = in.epilogue(acc(n, m, bt), n);
  }

  // ---- Schedule ----
  // One parallel task per `task` values of n (and batch); in a task, per block of n, the sums
  // over the whole K (transpose_b: per row m, in registers; otherwise every row's in L1, k
  // outermost). ShiftInwards on both splits: c is pure (not in place), so a last task or
  // block shifted back over its neighbour's columns recomputes them identically, and every
  // block is whole (no clamps, no tail branches in the stream). It needs N >= task: the
  // algorithm's condition (and the kernel's specialize_fail below).
  //
  // Measured 2026-12-05 on the AMD EPYC (family 26 model 2, 2 vCPUs), 2 threads, cold caches,
  // `opforge bench matmul [--attr transpose_b=true] --shape a=M,K --shape b=...` (small_m,
  // packed and oneDNN 2.6 in one run, interleaved medians of 10-30; ONEDNN_MAX_CPU_ISA=AVX2 for
  // AVX2), ms in two rounds, K = 768, N = 3072 (GPT-2's MLP) unless said:
  //   transpose_b      AVX-512: small_m / packed / oneDNN    AVX2
  //   M = 1            0.28-0.37 / 0.57-0.63 / 0.39-0.47     0.32 / 0.61 / 0.29-0.32
  //   M = 4            0.37-0.41 / 0.58-0.59 / 0.41-0.45     0.43 / 0.60-0.61 / 0.46-0.48
  //   M = 8            0.51-0.52 / 0.61-0.63 / 0.49-0.56     0.52-0.54 / 0.72-0.75 / 0.54-0.55
  //   M = 16           0.67-0.71 / 0.67-0.71 / 0.61-0.65     0.73-0.78 / 0.86-0.91 / 0.69-0.73
  //   M = 1, 4096^2    1.26-1.29 / 2.86-3.14 / 2.01-2.04     1.22-1.29 / 3.74-3.81 / 1.28-1.34
  //   M = 4, 4096^2    1.91 / 3.01-3.10 / 2.02-2.06          1.88-1.95 / 3.77-3.82 / 2.84-2.93
  //   M = 1, 2048x1000 0.28-0.30 / 0.55-0.56 / 0.32-0.36     0.26-0.29 / 0.59-0.60 / 0.24-0.27
  //   b [K, N]
  //   M = 1            0.30-0.31 / 0.46-0.49 / 0.28-0.33     0.33-0.38 / 0.78-0.79 / 0.28-0.31
  //   M = 4            0.36-0.38 / 0.46-0.48 / 0.26-0.28     0.45-0.47 / 0.75-0.79 / 0.45-0.50
  //   M = 8            0.44 / 0.52 / 0.36-0.37               0.50-0.53 / 0.86-0.88 / 0.53-0.54
  //   M = 16           (0.72) / 0.66 / 0.49                  (0.92) / 1.14 / 0.85
  //   M = 1, 4096^2    1.73-1.77 / 2.77-2.81 / 3.51-3.54     2.13-2.22 / 4.92-4.99 / 1.42-1.46
  //   M = 4, 4096^2    2.87-3.00 / 2.79-2.82 / 3.68-3.82     2.89-2.90 / 4.79-4.96 / 2.44-2.45
  //   M = 1, 2048x1000 0.32-0.35 / 0.49 / 0.25-0.26          0.34-0.40 / 0.66-0.85 / 0.27-0.35
  // Hence up to 16 rows with transpose_b (at 16 equal to packed on AVX-512, 0.85x its time on
  // AVX2) and 8 without (at 16 packed is faster on AVX-512; M = 16 above from a first run).
  // Tried, not kept (same runs): b [K, N] with per-row register blocks (b's block reread from
  // L2 per row): M = 4 0.70 ms AVX-512, 0.62-0.76 AVX2 (now 0.36-0.47); the sums of a whole
  // 256-column task in L1 (2 KB contiguous per row of b): 1.3-2x the time at M >= 4; AVX2
  // blocks of 16 vectors (512 B per row of b, as AVX-512's 8): M = 1 at 4096^2 2.03-2.08 ms
  // (vs 2.13-2.22), M = 8 0.79-1.03 (vs 0.50-0.53). Left: b [K, N] at M = 1 on AVX2 reads b
  // at about 30 GB/s (oneDNN 45): its 256 B per row and block, rows 16 KB apart.
  Var task("task"), no("no"), ni("ni"), nb("nb"), nbi("nbi");
  c.split(n, no, ni, t.task, TailStrategy::ShiftInwards)
      .split(ni, nb, nbi, tb ? t.nr : t.nv * t.vec, TailStrategy::ShiftInwards)
      .reorder(nbi, m, nb, no, bt)
      .fuse(no, bt, task)
      .parallel(task);
  arow.compute_at(c, task).vectorize(k, t.vec, TailStrategy::GuardWithIf);
  if (tb) {
    c.unroll(nbi);
    part.compute_at(c, m).bound(lane, 0, t.vec).vectorize(lane).unroll(n);
    part.update(0).reorder(lane, n, rk).vectorize(lane).unroll(n);
    part.update(1).unscheduled();  // the K % vec tail: scalar
    dot.compute_at(c, m).unroll(n);
    dot.update().atomic().reorder(rv, n).vectorize(rv).unroll(n);
  } else {
    c.vectorize(nbi, t.vec);
    acc.compute_at(c, nb).vectorize(n, t.vec).unroll(n);
    acc.update().reorder(n, m, r).vectorize(n, t.vec).unroll(n);
  }
  // Whole tasks only (the shifted splits would write c before n = 0): the condition's N.
  c.specialize(N >= t.task);
  c.specialize_fail("small_m: op(b) has fewer than " + std::to_string(t.task) +
                    " columns (N): the packed algorithm takes those");

  dsl::NnKernel kernel;
  kernel.outputs = {c};
  kernel.schedule_summary =
      std::string("b read in place once; one parallel task per ") + std::to_string(t.task) +
      (tb ? " rows of b; " + std::to_string(t.nr) +
                " rows of b per register block per row of op(a), vectors along k, one horizontal "
                "sum per element"
          : " columns; blocks of " + std::to_string(t.nv) +
                " vectors along n, k outermost, every row of op(a)'s sums in L1");
  kernel.schedule_params = {{"task", t.task}, {tb ? "nr" : "nv", tb ? t.nr : t.nv}};
  return kernel;
}

}  // namespace opforge::generators
