// group_norm, as torch.nn.GroupNorm(groups, C, eps, affine=True) on NCHW x [N, C, H, W]
// (Halide sees x(w, h, c, n)): the C channels split into `groups` groups of CG = C / groups
// consecutive channels; per (n, group), mean and biased variance over its CG * H * W
// elements, then y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c].
//
// In NCHW a group is one contiguous block of CG * H * W elements (160 KB at Stable Diffusion's
// C = 320, groups = 32, 64 x 64: in L2, not in L1 as a layer_norm row is).
//
// Algorithm: one statistics pass, in the frame shifted by the group's first element x0 (as
// layer_norm, nn_norms.cpp's numerics comment: rounding relative to the spread, not to
// |mean|): per column w, Welford's recurrence over the group's R = CG * H rows of d = x - x0
// (mean_w += delta / k, M2_w += delta * (d - mean_w)), vectorized along w, contiguous in
// memory (a GuardWithIf tail when W is not a multiple of the vector), whatever H and C are.
// Every column holds R values, so the group's mean is the columns' mean and M2 = sum M2_w +
// R * sum (mean_w - mean)^2 (Chan et al.'s pairwise combination, exact); var = M2 / M (biased,
// as torch), M = CG * H * W; never E[x^2] - E[x]^2. (The group is not one flat run in
// Halide's 4-D indexing, so a layer_norm-style flat reduction would need a division per
// element.) Then the output pass.
#include "dsl/schedule_params.h"
#include "generators/nn_ops.h"

namespace opforge::generators {

using dsl::NnArgs;
using dsl::NnKernel;
using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::RDom;
using Halide::RVar;
using Halide::TailStrategy;
using Halide::Tuple;
using Halide::Var;

namespace {

// Tunables (`--set` previews, descriptor schedule params), declared once.
const std::vector<dsl::ScheduleParamDecl>& group_param_decls() {
  static const std::vector<dsl::ScheduleParamDecl> d = {
      {"rows_unroll", 2, 1, 16,
       "rows of the statistics pass per iteration of the column loop (the column vectors' "
       "Welford state stays in registers across them)"},
  };
  return d;
}

struct GroupParams {
  int vector;        // fp32 lanes of the target (16 on AVX-512, 8 on AVX2)
  int serial_below;  // N * C * H * W below which one serial loop runs
  int rows_unroll;
  std::map<std::string, int64_t> as_map() const {
    return {{"vector", vector}, {"serial_below", serial_below}, {"rows_unroll", rows_unroll}};
  }
  std::string summary() const {
    return "(n, group) pairs in parallel; per group: one statistics pass (Welford per column, " +
           std::to_string(rows_unroll) + " rows per step), then the output in " +
           std::to_string(vector) +
           "-wide vectors along w; serial below N*C*H*W = " + std::to_string(serial_below);
  }
};

NnKernel build_group_norm(const NnArgs& a) {
  ImageParam x_in = a.tensors.at("x"), weight = a.tensors.at("weight"), bias = a.tensors.at("bias");
  Func x = a.f32("x");
  const Expr groups = a.scalars.at("groups"), eps = a.scalars.at("eps");
  GroupParams p;
  p.vector = a.target.natural_vector_size(Halide::Float(32));
  p.serial_below = 1 << 15;
  p.rows_unroll = static_cast<int>(
      dsl::resolve_declared(group_param_decls(), a.schedule, "group_norm").at("rows_unroll"));
  const Expr W = x_in.dim(0).extent(), H = x_in.dim(1).extent(), C = x_in.dim(2).extent();
  const Expr CG = C / groups;  // channels per group (the descriptor checks C % groups == 0)
  const Expr R = CG * H;       // rows of W per group
  const Expr M = Halide::cast<float>(R * W);
  Var w("w"), h("h"), c("c"), n("n"), g("g");
  RDom k(0, H, 0, CG, "k");  // a group's rows: h inner, its channels outer (memory order)
  RDom rw(0, W, "rw");

  // x0: the group's first element (the shift).
  Func x0("x0");
  x0(g, n) = x(0, 0, g * CG, n);
  // Per column: (mean, M2) of d = x - x0 over the rows, Welford's update for row number
  // k.y * H + k.x (the count before it).
  Func col("col");
  col(w, g, n) = Tuple(0.0f, 0.0f);
  {
    const Expr d = x(w, k.x, g * CG + k.y, n) - x0(g, n);
    const Expr mean = col(w, g, n)[0];
    const Expr delta = d - mean;
    const Expr mean_new = mean + delta * (1.0f / Halide::cast<float>(k.y * H + k.x + 1));
    col(w, g, n) = Tuple(mean_new, col(w, g, n)[1] + delta * (d - mean_new));
  }
  // The columns combined: mean_d = mean(x) - x0, then M2.
  Func col_sum("col_sum");
  col_sum(g, n) = 0.0f;
  col_sum(g, n) += col(rw, g, n)[0];
  Func mean_d("mean_d");
  mean_d(g, n) = col_sum(g, n) / Halide::cast<float>(W);
  Func m2("m2");
  m2(g, n) = 0.0f;
  {
    const Expr dm = col(rw, g, n)[0] - mean_d(g, n);
    m2(g, n) += col(rw, g, n)[1] + Halide::cast<float>(R) * (dm * dm);
  }
  Func rstd("rstd");
  rstd(g, n) = 1.0f / Halide::sqrt(m2(g, n) / M + eps);
  // strict_float keeps the shift (see layer_norm).
  Func dev("dev");
  dev(w, h, c, n) = Halide::strict_float(x(w, h, c, n) - x0(c / CG, n) - mean_d(c / CG, n));
  Func y = dsl::output_func("y");
  y(w, h, c, n) = a.store("y", dev(w, h, c, n) * rstd(c / CG, n) * weight(c) + bias(c));

  // Schedule: (n, group) pairs in parallel (N * groups tasks of equal size: 32-64 at Stable
  // Diffusion's shapes, split evenly over the threads); per group, the statistics pass streams
  // the group from DRAM and the output pass finds it in L2 (160 KB of a 1-2 MB L2). The
  // statistics (column states, folded totals, x0, mean, rstd) are computed at the group loop.
  // Small tensors run one serial loop (a thread-pool wake costs 3-47 us), as the row-wise ops.
  // Measured (`opforge bench group_norm`: N = 2, C = 320, 64 x 64, groups = 32, 2 threads,
  // cold caches; a memory-bound op, so the % of the same-run copy is what counts; oneDNN 2.6
  // has no group normalization):
  // - The two-pass statistics this replaces (sum of d, then sum of (d - mean_d)^2, each in
  //   W per-column partials): 64% / 61% of the copy (AVX-512 / AVX2) on an Intel Xeon family 6
  //   model 207, 84% / 84% on an AMD EPYC family 25 model 17 (Zen 4). Its second pass (L2
  //   reads, no memory traffic) took 13% of the kernel at one thread (perf).
  // - The one pass, 2026-12-06 on the Zen 4 EPYC: see scripts/BENCHMARKS.md "group_norm:
  //   one statistics pass".
  // A C model of these passes (scripts/BENCHMARKS.md "group_norm's two phases", 2026-12-07,
  // Zen 5) reached 94-98% of its copy while memory was slow and 57-81% while it was fast,
  // where the output pass of one group fused with the statistics pass of the next reached 88%.
  // Below the 90% goal still: a group is 160 KB, so its read-only statistics pass (DRAM) and
  // its output pass (L2 reads, DRAM writes) are two long phases per core, where a copy keeps
  // reads and writes in flight together.
  // Tried and dropped: group g + 1 loaded during group g's output pass (y's value and x at the
  // same place of the next pair in a Tuple scratch row per h, pairs in 2 or 8 contiguous
  // blocks so the next pair is the thread's own). 1 thread, thread CPU time, load 9-13, model
  // 207, four same-run rounds per ISA, cold: 0.91-1.00x this schedule's time on AVX-512,
  // 0.95-0.99x on AVX2 (AVX-512: 69-73% of the copy against 65-71%); but the scratch row's stores
  // cost 1.5-1.6x the time warm, 1.25x cold at 1 x 1280 x 16 x 16 (AVX-512, W = 16).
  // Tried (2 threads, cold, AVX-512, model 207, three alternating runs on the shared host
  // at load 7-10, where copy ratios moved +-15%): the pairs in 8 (or 2) contiguous blocks per
  // thread, the variance pass also loading the next pair's element at the same place (a
  // Tuple max nothing reads, so pass 1 of the next pair finds it in L2): 8 blocks 29-34%, 2
  // blocks 61-70%, the blocks alone 43-76%, against 43-60% for this schedule. Not kept:
  // unproven on that host.
  // Tried (2026-12-06, Zen 4 EPYC, 2 threads, cold, with the two-pass statistics), preview
  // over that schedule's time: the output pass prefetching y 256, 1024 or 4096 elements ahead
  // (dsl/output_prefetch.h): AVX2 0.98, 0.98, 1.03; AVX-512 1.03, 1.02, 1.10; the variance
  // pass prefetching each y line it passes (the softmax trick): 1.00 / 1.01-1.04; the output
  // pass prefetching the next group's x at the same place: 1.03-1.12 (prefetchnta; in the C
  // model above prefetcht0, t1 and t2 were no better); the sums' partials kept in registers
  // over 4 or 8 rows: 1.01-1.09 (the passes were not bound by the partials' store-to-load
  // latency).
  Var ci("ci"), gn("gn");
  auto schedule = [&](Halide::Stage s, bool parallel) {
    s.split(c, g, ci, CG, TailStrategy::GuardWithIf)
        .fuse(g, n, gn)
        .vectorize(w, p.vector, TailStrategy::GuardWithIf);
    if (parallel) s.parallel(gn);
  };
  const Expr total = W * H * C * y.output_buffers()[0].dim(3).extent();
  schedule(y.specialize(total >= p.serial_below), true);
  schedule(y, false);
  // The column vectors innermost, rows_unroll rows (unrolled) around them, then the row's
  // vectors, then the rows: Halide's default order for an update puts the RDom inside w (a
  // strided pass per column). Each column's Welford steps run in row order either way.
  Var wo("wo"), wi("wi");
  RVar kxo("kxo"), kxi("kxi");
  col.compute_at(y, gn).vectorize(w, p.vector, TailStrategy::GuardWithIf);
  col.update()
      .split(w, wo, wi, p.vector, TailStrategy::GuardWithIf)
      .split(k.x, kxo, kxi, p.rows_unroll, TailStrategy::GuardWithIf)
      .reorder(wi, kxi, wo, kxo, k.y)
      .vectorize(wi)
      .unroll(kxi);
  // The group's scalars once per group: inlined, the output's row loop recomputed c / CG, a
  // sqrt and a divide per row of W = 64 elements.
  for (Func f : {x0, col_sum, mean_d, m2, rstd}) f.compute_at(y, gn);
  return NnKernel{{y}, "group_norm: " + p.summary(), p.as_map()};
}

}  // namespace

const dsl::NnOpDecl& group_norm() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl d("group_norm");
    d.input("x", {"N", "C", "H", "W"}, "Input, NCHW")
        .input("weight", {"C"}, "Per-channel scale (affine weight)")
        .input("bias", {"C"}, "Per-channel shift (affine bias)")
        .scalar("groups", "Channel groups (C divisible by it)", registry::DType::i32)
        .scalar("eps", "Added to the variance (torch default 1e-5)")
        .domain("eps", "[0, inf)")
        .output("y", {"N", "C", "H", "W"}, "Normalized, NCHW")
        .activations({"x", "y"})
        .check("groups >= 1", "groups must be >= 1")
        .check("C % groups == 0", "x has C channels, not divisible by groups")
        .algorithm("", "", 0,
                   "one-pass mean and biased variance per (n, group) (Welford per column, columns "
                   "combined "
                   "exactly), then the output",
                   build_group_norm)
        .estimate("N", 2)
        .estimate("C", 320)
        .estimate("H", 64)
        .estimate("W", 64)
        .cost("8*N*C*H*W", "(bytes_x + bytes_y)*N*C*H*W + 4*2*C")
        .example("x=2,320,64,64 weight=320 bias=320 groups=32 eps=1e-05")
        .bandwidth_op("bandwidth_copy")
        .summary("Group normalization over (C / groups) x H x W per sample, NCHW")
        .formula(
            "y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c]; mean, biased var over each "
            "(n, group) of C / groups channels x H x W")
        .reference("torch.nn.functional.group_norm(x, groups, weight, bias, eps)")
        // fp32 sums of up to CG*H column terms per partial, W partials folded: as layer_norm's
        // (a few ulp on y plus the statistics' rounding scaled by |x - mean| / std).
        .tolerance(1e-5, 1e-5);
    return d;
  }();
  return d;
}

}  // namespace opforge::generators
