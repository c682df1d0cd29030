// TensorFlow ApplyFtrl(var, accum, linear, grad, lr, l1, l2, lr_power) and ApplyFtrlV2 (adds
// l2_shrinkage before lr_power), attr multiply_linear_by_lr; SparseApplyFtrl.
//
// TF's dense ApplyFtrlV2 kernel dispatches the two functors swapped relative to the flag;
// opforge follows the attr's documented meaning (as ApplyFtrl and SparseApplyFtrlV2 do). With
// linear starting at 0 and a constant lr both give the same var.
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

namespace {

// pow(x, -lr_power), as sqrt(x) when lr_power is exactly -0.5 (TF's special case). The kernel
// is specialized on lr_power == -0.5, where the per-element pow disappears. dsl::pow, not
// Halide's, whose log(+inf) is 88.7: an accumulator overflowed to +inf gave a finite power.
Expr accum_power(const dsl::UpdateContext& c, const Expr& x) {
  Expr lr_power = c["lr_power"];
  c.fast_path(lr_power == -0.5f);
  return dsl::select(lr_power == -0.5f, Halide::sqrt(x), dsl::pow(x, -lr_power));
}

// new^k - old^k (new = old + g2, k = -lr_power >= 0) in fp32 without the plain difference's
// cancellation, which an fp32 pow's few ulp (dsl::pow: exp(k log x)) turn into errors far
// past the golden's bound: `opforge check apply_ftrl --scalars random` failed linear on every
// seed tried, lr_power from -0.18 to -3.7 (up to 37 elements of 1e5, relative errors to 0.96).
// Written as old^k expm1(k log1p(u)), u = g2 / old: log1p by Goldberg's log(w) u / (w - 1),
// w = 1 + u rounded (w - 1 exact, strict so that fast math keeps it), expm1 by its Taylor
// series to z^7 below 0.35 (truncation under 2e-8 relative) and exp(z) - 1 above. An old
// accumulator of 0 (where old^k is 0 or 1), and u infinite or NaN, take the plain difference,
// as does the fp64 golden.
Expr power_difference(const Expr& old_accum, const Expr& new_accum, const Expr& g2, const Expr& k) {
  const Expr plain = dsl::pow(new_accum, k) - dsl::pow(old_accum, k);
  if (old_accum.type() != Halide::Float(32)) return plain;
  const Expr u = g2 / old_accum;
  const Expr w = Halide::strict_float(1.0f + u);
  const Expr w_minus_1 = Halide::strict_float(w - 1.0f);
  const Expr log1p = dsl::select(w_minus_1 == 0.0f, u, dsl::log(w) * (u / w_minus_1));
  const Expr z = k * log1p;
  Expr taylor = 1.0f / 5040;
  for (float coefficient : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f})
    taylor = taylor * z + coefficient;
  const Expr expm1 = dsl::select(z < 0.35f, taylor * z, dsl::exp(z) - 1.0f);
  return dsl::select(old_accum > 0.0f && dsl::is_finite(u), dsl::pow(old_accum, k) * expm1, plain);
}

// p(accum + grad^2) - p(accum). In the sqrt case as grad^2 / (sqrt(new) + sqrt(old)): the
// plain difference cancels (TF's fp32 kernel loses up to ~10 ulp of linear there). A zero
// grad^2 is a zero difference (the quotient would be 0/0 for a fresh slot, accum == 0).
// Otherwise power_difference.
Expr power_delta(const dsl::UpdateContext& c, const Expr& old_accum, const Expr& new_accum,
                 const Expr& g2) {
  Expr stable = dsl::select(
      g2 > 0.f, g2 * dsl::reciprocal(Halide::sqrt(new_accum) + Halide::sqrt(old_accum)), 0.f);
  Expr general = power_difference(old_accum, new_accum, g2, -c["lr_power"]);
  return dsl::select(c["lr_power"] == -0.5f, stable, general);
}

dsl::Updates ftrl(const dsl::UpdateContext& c, bool shrinkage) {
  Expr g = c["grad"], var = c["var"], lr = c["lr"], l1 = c["l1"], l2 = c["l2"];
  Expr g_s = shrinkage ? g + 2.f * c["l2_shrinkage"] * var : g;
  Expr accum = c["accum"] + g * g;
  Expr delta_power = power_delta(c, c["accum"], accum, g * g);
  // Per-element divides go through dsl::reciprocal and divisions by lr become multiplications
  // by 1/lr (computed once): with three divides and two sqrts per element Ftrl ran at 70% of
  // the bandwidth kernel at 1e7.
  Expr inv_lr = 1.f / lr;
  Expr linear, threshold, quadratic;
  if (c.attr_bool("multiply_linear_by_lr")) {
    linear = c["linear"] + g_s * lr - delta_power * var;
    threshold = l1 * lr;
    quadratic = accum_power(c, accum) + 2.f * l2 * lr;
  } else {
    linear = c["linear"] + g_s - delta_power * inv_lr * var;
    threshold = l1;
    quadratic = accum_power(c, accum) * inv_lr + 2.f * l2;
  }
  Expr new_var =
      dsl::select(Halide::abs(linear) > threshold,
                  (threshold * dsl::sign(linear) - linear) * dsl::reciprocal(quadratic), 0.f);
  return {{"var", new_var}, {"accum", accum}, {"linear", linear}};
}

const char* const kFormula =
    "accum' = accum + grad^2; p(x) = x^-lr_power (sqrt when lr_power == -0.5); linear += g_s - "
    "(p(accum') - p(accum))/lr*var; var = |linear| > l1 ? (l1*sign(linear) - linear) / "
    "(p(accum')/lr + 2*l2) : 0; multiply_linear_by_lr: linear += g_s*lr - (p(accum') - "
    "p(accum))*var, threshold l1*lr, denominator p(accum') + 2*l2*lr";

}  // namespace

namespace {

// ApplyFtrl and ApplyFtrlV2 take the same arguments, V2 with l2_shrinkage before lr_power.
dsl::OptimizerDecl ftrl_decl(const std::string& name, bool shrinkage) {
  dsl::OptimizerDecl d(name);
  d.state("var", "Variable to update, in place")
      .state("accum", "Sum of squared gradients, in place")
      .state("linear", "Linear term, in place")
      .grad("grad", "The gradient")
      .scalar("lr", "Scaling factor")
      .typical("lr", 0.01)
      .scalar("l1", "L1 regularization")
      .typical("l1", 0.001)
      .scalar("l2", "L2 regularization")
      .typical("l2", 0.001);
  if (shrinkage) {
    d.scalar("l2_shrinkage", "L2 shrinkage added to the gradient").typical("l2_shrinkage", 0.001);
  }
  return d.scalar("lr_power", "Learning-rate power (usually -0.5)")
      .typical("lr_power", -0.5)
      .domain("lr_power", "(-inf, 0]")  // TF: lr_power must be <= 0
      .attr_bool("multiply_linear_by_lr", false, "keep linear multiplied by lr")
      // linear is a sum of O(1) terms that cancel: a few fp32 roundings exceed 1e-7.
      .tolerance(1e-6, 3e-7)
      .update([shrinkage](const dsl::UpdateContext& c) { return ftrl(c, shrinkage); });
}

}  // namespace

const dsl::OptimizerDecl& apply_ftrl() {
  static const dsl::OptimizerDecl d = ftrl_decl("apply_ftrl", false)
                                          .summary("FTRL-Proximal, in place")
                                          .reference("TensorFlow ApplyFtrl (training_ops.cc)")
                                          .formula(std::string(kFormula) + "; g_s = grad");
  return d;
}

const dsl::OptimizerDecl& apply_ftrl_v2() {
  static const dsl::OptimizerDecl d =
      ftrl_decl("apply_ftrl_v2", true)
          .summary("FTRL-Proximal with online L2 shrinkage, in place")
          .reference("TensorFlow ApplyFtrlV2 (training_ops.cc); flag semantics as ApplyFtrl")
          .formula(std::string(kFormula) + "; g_s = grad + 2*l2_shrinkage*var");
  return d;
}

const dsl::OptimizerDecl& sparse_apply_ftrl() {
  static const dsl::OptimizerDecl d = apply_ftrl()
                                          .renamed("sparse_apply_ftrl")
                                          .summary("FTRL-Proximal on the rows named by indices")
                                          .reference("TensorFlow SparseApplyFtrl (training_ops.cc)")
                                          .sparse_rows();
  return d;
}

}  // namespace opforge::generators
