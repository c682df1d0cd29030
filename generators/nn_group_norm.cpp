// group_norm, as torch.nn.GroupNorm(groups, C, eps, affine=True) on NCHW x [N, C, H, W]
// (Halide sees x(w, h, c, n)): the C channels split into `groups` groups of CG = C / groups
// consecutive channels; per (n, group), mean and biased variance over its CG * H * W
// elements, then y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c].
//
// In NCHW a group is one contiguous block of CG * H * W elements (160 KB at Stable Diffusion's
// C = 320, groups = 32, 64 x 64: in L2, not in L1 as a layer_norm row is).
//
// Algorithm: two-pass, in the frame shifted by the group's first element x0, as layer_norm
// (nn_norms.cpp's numerics comment): d = x - x0, mean_d = sum(d) / M, var = sum((d -
// mean_d)^2) / M (biased, as torch), M = CG * H * W; never E[x^2] - E[x]^2.
// Each sum accumulates in W partial sums, one per column w (acc(w, g, n) += over the group's
// rows (h, c)), folded once per group: the inner loop runs along w, contiguous in memory, in
// vectors (a GuardWithIf tail when W is not a multiple of the vector), whatever H and C are;
// W = 64 gives four independent vector accumulators per row, enough to hide the add latency.
// (The group is not one flat run in Halide's 4-D indexing, so a layer_norm-style flat
// reduction in `lanes` partials would need a division per element.)
#include "generators/nn_ops.h"

namespace opforge::generators {

using dsl::NnArgs;
using dsl::NnKernel;
using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::RDom;
using Halide::TailStrategy;
using Halide::Var;

namespace {

struct GroupParams {
  int vector;        // fp32 lanes of the target (16 on AVX-512, 8 on AVX2)
  int serial_below;  // N * C * H * W below which one serial loop runs
  std::map<std::string, int64_t> as_map() const {
    return {{"vector", vector}, {"serial_below", serial_below}};
  }
  std::string summary() const {
    return "(n, group) pairs in parallel; per group: sums in W per-column partials, then the "
           "output in " +
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
  const Expr W = x_in.dim(0).extent(), H = x_in.dim(1).extent(), C = x_in.dim(2).extent();
  const Expr CG = C / groups;  // channels per group (the descriptor checks C % groups == 0)
  const Expr M = Halide::cast<float>(CG * H * W);
  Var w("w"), h("h"), c("c"), n("n"), g("g");
  RDom k(0, H, 0, CG, "k");  // a group's rows: h inner, its channels outer (memory order)

  // x0: the group's first element (the shift).
  Func x0("x0");
  x0(g, n) = x(0, 0, g * CG, n);
  // Pass 1: sum of d = x - x0 per column, then over the columns.
  Func d_acc("d_acc");
  d_acc(w, g, n) = 0.0f;
  d_acc(w, g, n) += x(w, k.x, g * CG + k.y, n) - x0(g, n);
  RDom rw(0, W, "rw");
  Func d_sum("d_sum");
  d_sum(g, n) = 0.0f;
  d_sum(g, n) += d_acc(rw, g, n);
  Func mean_d("mean_d");  // mean(x) - x0
  mean_d(g, n) = d_sum(g, n) / M;
  // Pass 2: sum of (x - mean)^2. strict_float keeps the shift (see layer_norm).
  Func dev("dev");
  dev(w, h, c, n) = Halide::strict_float(x(w, h, c, n) - x0(c / CG, n) - mean_d(c / CG, n));
  Func v_acc("v_acc");
  v_acc(w, g, n) = 0.0f;
  const Expr dv = dev(w, k.x, g * CG + k.y, n);
  v_acc(w, g, n) += dv * dv;
  Func v_sum("v_sum");
  v_sum(g, n) = 0.0f;
  v_sum(g, n) += v_acc(rw, g, n);
  Func rstd("rstd");
  rstd(g, n) = 1.0f / Halide::sqrt(v_sum(g, n) / M + eps);
  Func y = dsl::output_func("y");
  y(w, h, c, n) = a.store("y", dev(w, h, c, n) * rstd(c / CG, n) * weight(c) + bias(c));

  // Schedule: (n, group) pairs in parallel (N * groups tasks of equal size: 32-64 at Stable
  // Diffusion's shapes, split evenly over the threads); per group, pass 1 streams the
  // group from DRAM, pass 2 and the output pass find it in L2 (160 KB of a 2 MB L2).
  // The stats (sums per column, folded totals, x0, mean, rstd) are computed at the group
  // loop. Small tensors run one serial loop (a
  // thread-pool wake costs 3-47 us), as the row-wise ops.
  // Measured (`opforge bench group_norm`: N = 2, C = 320, 64 x 64, groups = 32, 2 threads,
  // cold caches, medians of 300 interleaved calls; Intel Xeon family 6 model 207 (Emerald
  // Rapids class), 2 vCPUs, shared host): 64% of the same-run copy on AVX-512, 61% on AVX2
  // (oneDNN 2.6 has no group normalization). Below the 90% goal: a group is 160 KB, so its
  // read-only statistics pass (DRAM) and its output pass (L2 reads, DRAM writes) are two
  // long phases per core, where a copy, and layer_norm's 4 KB rows (whose next row the L2
  // streamer fetches during the output pass), keep reads and writes in flight together (the likely
  // cause: one core alone draws about half the copy's bandwidth, nn_norms.cpp's softmax note).
  // Not tried: per-channel statistics combined exactly (Chan et al.), an L1-resident pass 2.
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
  // unproven on that host (2 blocks with the loads is worth a quiet-host rerun).
  // Tried (2026-12-06, Zen 4 EPYC, 2 threads, cold, one run each): the output pass
  // prefetching y 256, 1024 or 4096 elements ahead (dsl/output_prefetch.h), preview over this
  // schedule's time: AVX2 0.98, 0.98, 1.03; AVX-512 1.03, 1.02, 1.10. Not kept.
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
  for (Func acc : {d_acc, v_acc}) {
    // The column vectors innermost, then the row's vectors, then the rows: Halide's default
    // order for an update puts the RDom inside w (a strided pass per column).
    Var wo("wo"), wi("wi");
    acc.compute_at(y, gn).vectorize(w, p.vector, TailStrategy::GuardWithIf);
    acc.update()
        .split(w, wo, wi, p.vector, TailStrategy::GuardWithIf)
        .reorder(wi, wo, k.x, k.y)
        .vectorize(wi);
  }
  d_sum.compute_at(y, gn);
  v_sum.compute_at(y, gn);
  // The group's scalars once per group: inlined, the output's row loop recomputed c / CG, a
  // sqrt and a divide per row of W = 64 elements.
  for (Func f : {x0, mean_d, rstd}) f.compute_at(y, gn);
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
        .algorithm("", "", 0, "two-pass mean and biased variance per (n, group), then the output",
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
