// gelu, elementwise, as torch.nn.functional.gelu(x, approximate=...):
//   none: y = 0.5 x (1 + erf(x / sqrt(2)))
//   tanh: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//
// Declared 1-D, x[N]: the op is elementwise, so any dense tensor is the same N elements
// flattened (free for row-major data), and one flat loop parallelizes and vectorizes without
// a per-row tail (a [R, C] form would run a masked tail on every row when C % 16 != 0, e.g.
// C = 1 or 17).
//
// erf: Halide 14's Halide::erf (fp32 only; "accurate up to the last three bits of the
// mantissa", vectorizes). tanh: Halide 14 lowers tanh to a scalar libm call per lane, so the
// tanh form uses the identity 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)) with Halide's vectorized
// exp: y = x / (1 + exp(-2u)). It has no cancellation for u > 0; for u -> -inf, exp overflows
// to inf and y -> -0, as the exact value (which underflows to 0 near x = -10).
#include "dsl/elementwise_schedule.h"
#include "generators/nn_ops.h"

namespace opforge::generators {

using dsl::NnArgs;
using dsl::NnKernel;
using Halide::Expr;
using Halide::Func;
using Halide::Var;

namespace {

NnKernel build_gelu(const NnArgs& a) {
  Func x = a.f32("x");
  const bool tanh_form = a.attr_string("approximate") == "tanh";
  Var i("i");
  Func y = dsl::output_func("y");
  const Expr v = x(i);
  if (tanh_form) {
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    const Expr u = k * (v + 0.044715f * v * v * v);
    y(i) = a.store("y", v / (1.0f + Halide::exp(-2.0f * u)));
  } else {
    y(i) = a.store("y", 0.5f * v * (1.0f + Halide::erf(v * 0.7071067811865476f)));
  }
  // Schedule: the shared 1-D elementwise recipe (run-time parallel chunks, serial below 16K
  // elements, GuardWithIf tails), 16-wide on AVX-512.
  // Tried and dropped (N = 131072, 1 thread, L2-resident, alternating runs, model 207):
  // - erf rearranged as (1 + erf) / 2 = P^-16 / 2 for z < -1 (no cancellation), 1 - P^-16 / 2
  //   for z > 1, the halves folded into the polynomials: with the rcpps estimate and a Newton
  //   step for P^-16, 1.0-1.7x Halide::erf's time (the divide runs on its own unit beside the
  //   polynomials); with the divide, no faster (AVX2 116-120 us against 94-115 us).
  // - tanh form on exp_bounded (as silu): AVX2 108 -> 95 us, AVX-512 75-81 -> 80-86 us.
  const auto p = dsl::ElementwiseSchedule::resolve(a.schedule, a.target);
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
        // erf within a few ulp and exp within ~1 ulp: relative error ~1e-6 away from 0;
        // where 1 + erf cancels (x < -3) the absolute error stays below ~1e-7.
        .tolerance(1e-5, 1e-6);
    return d;
  }();
  return d;
}

}  // namespace opforge::generators
