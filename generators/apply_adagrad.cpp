// TensorFlow ApplyAdagrad(var, accum, lr, grad; update_slots) and ApplyAdagradV2(var, accum,
// lr, epsilon, grad; update_slots), and SparseApplyAdagrad.
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

namespace {

// accum + grad^2, or accum unchanged when update_slots is false (both Adagrad ops).
Expr adagrad_accum(const dsl::UpdateContext& c) {
  return c.attr_bool("update_slots") ? c["accum"] + c["grad"] * c["grad"] : c["accum"];
}

const char* const kUpdateSlotsDoc = "accumulate grad^2 into accum (false: accum is read only)";

}  // namespace

const dsl::OptimizerDecl& apply_adagrad() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_adagrad")
          .summary("Adagrad (no epsilon), in place")
          .reference("TensorFlow ApplyAdagrad (training_ops.cc)")
          .formula("update_slots: accum += grad^2; var -= lr * grad * rsqrt(accum)")
          .state("var", "Variable to update, in place")
          .state("accum", "Sum of squared gradients, in place")
          .scalar("lr", "Scaling factor")
          .typical("lr", 0.01)
          .grad("grad", "The gradient")
          .attr_bool("update_slots", true, kUpdateSlotsDoc)
          .tolerance(3e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr accum = adagrad_accum(c);
            return dsl::Updates{{"var", c["var"] - c["grad"] * c["lr"] / Halide::sqrt(accum)},
                                {"accum", accum}};
          });
  return d;
}

const dsl::OptimizerDecl& apply_adagrad_v2() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_adagrad_v2")
          .summary("Adagrad with epsilon outside the square root, in place")
          .reference("TensorFlow ApplyAdagradV2 (training_ops.cc)")
          .formula("update_slots: accum += grad^2; var -= lr * grad / (sqrt(accum) + epsilon)")
          .state("var", "Variable to update, in place")
          .state("accum", "Sum of squared gradients, in place")
          .scalar("lr", "Scaling factor")
          .typical("lr", 0.01)
          .scalar("epsilon", "Added to sqrt(accum)")
          .typical("epsilon", 1e-07)
          .domain("epsilon", "[0, inf)")
          .grad("grad", "The gradient")
          .attr_bool("update_slots", true, kUpdateSlotsDoc)
          .tolerance(3e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr accum = adagrad_accum(c);
            return dsl::Updates{
                {"var", c["var"] - c["grad"] * c["lr"] / (Halide::sqrt(accum) + c["epsilon"])},
                {"accum", accum}};
          });
  return d;
}

const dsl::OptimizerDecl& sparse_apply_adagrad() {
  static const dsl::OptimizerDecl d =
      apply_adagrad()
          .renamed("sparse_apply_adagrad")
          .summary("Adagrad on the rows named by indices, in order; other rows untouched")
          .reference("TensorFlow SparseApplyAdagrad (training_ops.cc)")
          .sparse_rows();
  return d;
}

}  // namespace opforge::generators
