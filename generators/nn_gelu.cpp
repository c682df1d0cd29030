// gelu, elementwise, as torch.nn.functional.gelu(x, approximate=...):
//   none: y = 0.5 x (1 + erf(x / sqrt(2)))
//   tanh: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//
// Declared 1-D, x[N]: the op is elementwise, so any dense tensor is the same N elements
// flattened (free for row-major data), and one flat loop parallelizes and vectorizes without
// a per-row tail (a [R, C] form would run a masked tail on every row when C % 16 != 0, e.g.
// C = 1 or 17).
//
// erf form: y = x Phi(x), Phi the normal CDF, from e = erfc(a) / 2 at a = |x| / sqrt 2:
// Phi = 1 - e for x >= 0 and e for x < 0 (no 1 + erf to cancel on the negative side; the
// error there is the approximation's, which is absolute). erfc(a) = 1 / P(a)^16, P(a) = 1 +
// a1 a + ... + a6 a^6 (Abramowitz and Stegun 7.1.28, |error| <= 3e-7), the four squarings
// done on s = P - 1 ((1 + s)^2 - 1 = s s + 2 s), which keeps the rounding of small a
// relative to s instead of to 1 (2.2e-6 -> 9e-7 relative error near x = 0). Huge |x|: s
// overflows to inf, e = 0, so y(+inf) = +inf and y(-inf) = -inf * 0 = NaN, as torch's
// formula. Error against the fp64 formula over x in [-15, 15], steps of 1e-4 (an fp32 model
// of the same operations): at most 8.1e-7 absolute (near x = 4), 0.06 of the tolerance;
// relative 9.3e-7 for |x| < 1, 4.1e-7 for x > 0. On `opforge check`'s problems 8.2e-7
// absolute, where Halide::erf (0.5 x (1 + erf), the previous form) gave 3.5e-7. 31
// instructions per 8 elements on AVX2 against Halide::erf's 38, which computes both its
// branches (x < 1, x >= 1) and selects.
//
// tanh form: Halide 14 lowers tanh to a scalar libm call per lane, so it uses the identity
// 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): y = x / (1 + exp(-2u)), no cancellation for u > 0.
// exp is exp_bounded (nn_ops.h; +inf from 88.38 on), so for u -> -inf y -> -0, as the exact
// value (which underflows to 0 near x = -10), and y(-inf) = -inf / inf = NaN, as torch.
// Halide::exp gave exp(+inf) = 0 (its 2^k scale wraps), hence y(-1e30) = -1e30 and y(-inf)
// = -inf before (x^3 overflows there).
#include "dsl/elementwise_schedule.h"
#include "generators/nn_ops.h"

namespace opforge::generators {

using dsl::NnArgs;
using dsl::NnKernel;
using Halide::Expr;
using Halide::Func;
using Halide::Var;

namespace {

// Phi(v) = (1 + erf(v / sqrt 2)) / 2 (the file comment).
Expr normal_cdf(const Expr& v) {
  const Expr a = Halide::abs(v) * 0.7071067811865476f;
  // s = P(a) - 1 = a (a1 + a2 a + ... + a6 a^5), Abramowitz and Stegun 7.1.28's a1..a6.
  Expr s = 0.0000430638f;
  for (float c : {0.0002765672f, 0.0001520143f, 0.0092705272f, 0.0422820123f, 0.0705230784f}) {
    s = s * a + c;
  }
  s = s * a;
  // P^16 - 1 by four squarings of 1 + s kept as s: (1 + s)^2 - 1 = s s + 2 s.
  for (int k = 0; k < 4; ++k) s = s * s + (s + s);
  const Expr e = 0.5f / (1.0f + s);  // erfc(a) / 2
  return Halide::select(v >= 0.0f, 1.0f - e, e);
}

NnKernel build_gelu(const NnArgs& a) {
  Func x = a.f32("x");
  const bool tanh_form = a.attr_string("approximate") == "tanh";
  Var i("i");
  Func y = dsl::output_func("y");
  const Expr v = x(i);
  if (tanh_form) {
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    const Expr u = k * (v + 0.044715f * v * v * v);
    y(i) = a.store("y", v / (1.0f + exp_bounded(-2.0f * u)));
  } else {
    y(i) = a.store("y", v * normal_cdf(v));
  }
  // Schedule: the shared 1-D elementwise recipe (run-time parallel chunks, serial below 16K
  // elements, GuardWithIf tails), 32 lanes per vector on both ISAs (4 ymm / 2 zmm per step):
  // one vector's erf or exp is a long dependency chain, and at the natural width too few
  // iterations fit the out-of-order window to keep the FP pipes busy. Measured (2026-12-06,
  // AMD EPYC family 25 model 17 (Zen 4), one process, the previous kernel as a second
  // algorithm; scripts/BENCHMARKS.md "gelu: erfc without cancellation, 32 lanes"): warm 64K
  // elements, one thread, erf form 0.87x the time on both ISAs; cold 4M, 2 threads, erf AVX2
  // 0.90-0.91x (88-98% of the copy, from 79-89%), AVX-512 at the copy's speed before and
  // after; the tanh form with exp_bounded, warm, against the registry before: 0.78-0.81x
  // (AVX2), 0.86-0.93x (AVX-512). Lanes, warm 64K, one thread (ms): AVX2 erf 8: 0.040, 16:
  // 0.036, 32: 0.034; AVX-512 erf 16: 0.029, 32: 0.027, 64: 0.025; tanh (exp_bounded)
  // AVX-512 16: 0.025, 32: 0.023, 64: 0.024; tanh (Halide::exp) AVX2 8: 0.032, 16: 0.031,
  // 32: 0.027.
  // Tried and dropped before the erfc form above (N = 131072, 1 thread, L2-resident,
  // alternating runs, model 207):
  // - erf rearranged as (1 + erf) / 2 = P^-16 / 2 for z < -1 (no cancellation), 1 - P^-16 / 2
  //   for z > 1, the halves folded into the polynomials: with the rcpps estimate and a Newton
  //   step for P^-16, 1.0-1.7x Halide::erf's time (the divide runs on its own unit beside the
  //   polynomials); with the divide, no faster (AVX2 116-120 us against 94-115 us).
  // - tanh form on exp_bounded (as silu): AVX2 108 -> 95 us, AVX-512 75-81 -> 80-86 us
  //   (kept since, for exp(+inf): at 32 lanes it is also the faster, the file comment).
  auto given = a.schedule;
  if (!given.count("vector")) given["vector"] = 32;
  const auto p = dsl::ElementwiseSchedule::resolve(given, a.target);
  dsl::ElementwiseSchedule::apply(y, i, p, {}, Expr(),
                                  dsl::ElementwiseSchedule::staged_inputs({x}, y, p));
  return NnKernel{{y},
                  std::string("gelu (") + (tanh_form ? "tanh" : "erf") +
                      "): " + dsl::ElementwiseSchedule::summary(p),
                  p};
}

}  // namespace

const dsl::NnOpDecl& gelu() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl d("gelu");
    d.input("x", {"N"}, "Input, any shape flattened to N elements")
        .output("y", {"N"}, "gelu(x), same shape")
        .attr_string("approximate", "none", {"none", "tanh"},
                     "none: exact erf form; tanh: the tanh approximation (as torch)")
        .activations({"x", "y"})
        .algorithm("", "", 0, "elementwise", build_gelu)
        .estimate("N", 4096 * 1024)
        .cost("", "(bytes_x + bytes_y)*N")
        .example("x=4194304")
        .bandwidth_op("bandwidth_copy")
        .summary("Gaussian error linear unit, elementwise")
        .formula(
            "none: 0.5 x (1 + erf(x / sqrt 2)); tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + "
            "0.044715 x^3)))")
        .reference("torch.nn.functional.gelu(x, approximate=...)")
        // erf form: |error| <= 8.1e-7 (the file comment); tanh form: exp within ~1 ulp,
        // relative error ~1e-6 away from 0.
        .tolerance(1e-5, 1e-6);
    return d;
  }();
  return d;
}

}  // namespace opforge::generators
