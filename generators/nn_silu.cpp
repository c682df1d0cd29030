// silu and silu_mul, elementwise, as torch.nn.functional.silu:
//   silu(x)        y = x * sigmoid(x) = x / (1 + exp(-x))
//   silu_mul(a, b) y = silu(a) * b   (LLaMA's SwiGLU after its two projections:
//                                     silu(x W_gate) * (x W_up))
//
// Declared 1-D, like gelu (nn_gelu.cpp): any dense tensor is its N elements flattened, one
// flat loop parallelizes and vectorizes without a per-row tail.
//
// Numerics: x / (1 + exp(-x)) with exp_bounded (nn_ops.h; about 1 ulp) has no cancellation
// anywhere: 1 + exp(-x) >= 1, so y keeps a relative error of a few ulp over the whole range.
// Below x = -88.4 exp(-x) is inf and y = -0 (the exact value is below 3e-37 there); above
// x = 17, exp(-x) < ulp(1) and y = x exactly. x = -inf gives NaN and +inf gives +inf, as
// torch's x * sigmoid(x); NaN stays NaN.
//
// Schedule: the shared 1-D elementwise recipe, as gelu's and the copy's. Measured with
// `opforge bench` (N = 4194304, 2 threads, cold caches, medians of 180-260 interleaved calls;
// Intel Xeon family 6 model 207 (Emerald Rapids class), 2 vCPUs, shared host), % of the
// same-run same-traffic kernel (bandwidth_copy for silu, bandwidth_add for silu_mul):
//            AVX-512   AVX2     oneDNN 2.6 eltwise_swish time / opforge's
//   silu       88%     79%      1.16x (AVX-512), 1.03x (AVX2)
//   silu_mul   85%     84%      - (no two-tensor eltwise in oneDNN 2.6)
// Below the 90% goal by about the exp's cost: Halide's full-range exp (overflow selects,
// about 20 vector instructions per vector) runs while no DRAM request of that core is in
// flight, as gelu's erf (78% on the AVX2 host, scripts/BENCHMARKS.md).
// Then exp_bounded instead of Halide::exp (clamped argument, one-FMA reduction, no selects,
// and no -inf select in silu_of: its overflow gives the NaN): silu at N = 131072, 1 thread,
// L2-resident, three alternating runs: AVX2 81 / 94 / 132 us -> 60 / 60 / 87 us, AVX-512
// 53-66 us both (within noise); N = 4194304, 2 threads, cold, host at load 8-9: AVX2 74 / 66
// / 84% -> 91 / 92 / 83% of the copy, AVX-512 85 / 56 / 90% -> 91 / 93 / 71% (noise).
// Dropped: 1 / (1 + exp(-x)) as the rcpps estimate and a Newton step instead of the divide:
// 0.90x main's time L2-resident on AVX2 where the divide form took 0.68x (the divider runs
// beside the other ports; the estimate, its step and their selects are more instructions).
// bf16 activations (same runs, N = 131072, L2-resident): AVX2 121 / 121 / 140 us -> 91 / 89
// / 90 us, AVX-512 within noise (97 / 94 / 74 -> 92 / 92 / 93 us) once exp_bounded's clamp
// bounds were made non-bf16 values (see there; before that, AVX-512 bf16 took 1.2x).
#include "dsl/elementwise_schedule.h"
#include "generators/nn_ops.h"

namespace opforge::generators {

using dsl::NnArgs;
using dsl::NnKernel;
using Halide::Expr;
using Halide::Func;
using Halide::Var;

namespace {

// The elementwise recipe's params. bf16 activations: four natural vectors per loop step (32
// lanes on AVX2, 64 on AVX-512), as gelu: with the conversions on both ends one vector's
// chain is long, and at one vector per step too few overlap. Measured (2026-12-06, AMD EPYC
// family 25 model 17 (Zen 4), `opforge bench --set vector=V`, preview / registered in one
// run, two runs each): cold 4M, 2 threads, AVX2 V = 32: silu 0.82-0.83x the time, silu_mul
// 0.83-0.87x; AVX-512 V = 64: silu 0.93-0.94x, silu_mul 0.93-0.98x (V = 32: 0.94-0.99x);
// warm 64K, 1 thread: AVX2 0.80x / 0.76x, AVX-512 0.87x / 0.83x. fp32 activations stay at
// one vector: at the copy's speed cold, where 32 / 64 lanes took 0.97-1.04x the time.
std::map<std::string, int64_t> elementwise_params(const NnArgs& a) {
  auto given = a.schedule;
  if (a.output_dtypes.at("y") != registry::DType::f32 && !given.count("vector"))
    given["vector"] = 4 * a.target.natural_vector_size(Halide::Float(32));
  return dsl::ElementwiseSchedule::resolve(given, a.target);
}

Expr silu_of(const Expr& v) {
  // exp_bounded (nn_norms.cpp) overflows to +inf from -x = 88.4 on, so x = -inf gives
  // -inf / inf = NaN (torch's -inf * sigmoid(-inf) = -inf * 0) and x <= -88.4 gives -0 (exact:
  // below 2.6e-37) without a select; x = +inf gives +inf / (1 + exp(-87)) = +inf.
  return v / (1.0f + exp_bounded(-v));
}

NnKernel build_silu(const NnArgs& a) {
  Func x = a.f32("x");
  Var i("i");
  Func y = dsl::output_func("y");
  y(i) = a.store("y", silu_of(x(i)));
  // Schedule: the shared 1-D elementwise recipe (run-time parallel chunks, serial below 16K
  // elements, GuardWithIf tails), 16-wide on AVX-512, 8-wide on AVX2 (bf16: four vectors per
  // step, elementwise_params).
  const auto p = elementwise_params(a);
  dsl::ElementwiseSchedule::apply(y, i, p, {}, Expr(),
                                  dsl::ElementwiseSchedule::staged_inputs({x}, y, p));
  return NnKernel{{y}, "silu: " + dsl::ElementwiseSchedule::summary(p), p};
}

NnKernel build_silu_mul(const NnArgs& a) {
  Func ga = a.f32("a"), gb = a.f32("b");
  Var i("i");
  Func y = dsl::output_func("y");
  y(i) = a.store("y", silu_of(ga(i)) * gb(i));
  // Schedule: as silu; two input streams and one output stream per chunk.
  const auto p = elementwise_params(a);
  dsl::ElementwiseSchedule::apply(y, i, p, {}, Expr(),
                                  dsl::ElementwiseSchedule::staged_inputs({ga, gb}, y, p));
  return NnKernel{{y}, "silu_mul: " + dsl::ElementwiseSchedule::summary(p), p};
}

}  // namespace

const dsl::NnOpDecl& silu() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl d("silu");
    d.input("x", {"N"}, "Input, any shape flattened to N elements")
        .output("y", {"N"}, "silu(x), same shape")
        .activations({"x", "y"})
        .algorithm("", "", 0, "elementwise", build_silu)
        .estimate("N", 4096 * 1024)
        .cost("", "(bytes_x + bytes_y)*N")
        .example("x=4194304")
        .bandwidth_op("bandwidth_copy")
        .summary("Sigmoid linear unit (swish), elementwise")
        .formula("y = x * sigmoid(x) = x / (1 + exp(-x))")
        .reference("torch.nn.functional.silu(x)")
        // exp within ~1 ulp, one add and one divide: a few ulp relative everywhere (no
        // cancellation); atol for the underflow region x < -88, where y is -0 for ~1e-36.
        .tolerance(1e-6, 1e-30);
    return d;
  }();
  return d;
}

const dsl::NnOpDecl& silu_mul() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl d("silu_mul");
    d.input("a", {"N"}, "Gate (x W_gate), any shape flattened to N elements")
        .input("b", {"N"}, "Up projection (x W_up), same shape as a")
        .output("y", {"N"}, "silu(a) * b, same shape")
        .activations({"a", "b", "y"})
        .algorithm("", "", 0, "elementwise", build_silu_mul)
        .estimate("N", 4096 * 1024)
        .cost("", "(bytes_a + bytes_b + bytes_y)*N")
        .example("a=4194304 b=4194304")
        .bandwidth_op("bandwidth_add")
        .summary("SwiGLU gating: silu(a) * b, elementwise (LLaMA's MLP)")
        .formula("y = a / (1 + exp(-a)) * b")
        .reference("torch.nn.functional.silu(a) * b")
        // silu's few ulp plus one rounded multiply.
        .tolerance(1e-6, 1e-30);
    return d;
  }();
  return d;
}

}  // namespace opforge::generators
