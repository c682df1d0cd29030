// TensorFlow ApplyRMSProp(var, ms, mom, lr, rho, momentum, epsilon, grad) and
// ApplyCenteredRMSProp(var, mg, ms, mom, lr, rho, momentum, epsilon, grad): epsilon inside
// the square root (TF convention; PyTorch adds it outside).
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

const dsl::OptimizerDecl& apply_rms_prop() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_rms_prop")
          .summary("RMSProp with momentum, TF convention (epsilon inside sqrt), in place")
          .reference("TensorFlow ApplyRMSProp (training_ops.cc)")
          .formula(
              "ms += (grad^2 - ms)*(1 - rho); mom = mom*momentum + grad*lr/sqrt(ms + epsilon); "
              "var -= mom")
          .state("var", "Variable to update, in place")
          .state("ms", "Mean square, in place")
          .state("mom", "Momentum, in place")
          .scalar("lr", "Learning rate")
          .scalar("rho", "Decay rate")
          .scalar("momentum", "Momentum factor")
          .scalar("epsilon", "Added to ms inside the square root")
          .grad("grad", "The gradient")
          .tolerance(4e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"];
            Expr ms = c["ms"] + (g * g - c["ms"]) * (1.f - c["rho"]);
            Expr mom = c["mom"] * c["momentum"] + g * c["lr"] / Halide::sqrt(ms + c["epsilon"]);
            return dsl::Updates{{"var", c["var"] - mom}, {"ms", ms}, {"mom", mom}};
          });
  return d;
}

const dsl::OptimizerDecl& apply_centered_rms_prop() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_centered_rms_prop")
          .summary("Centered RMSProp with momentum, TF convention, in place")
          .reference("TensorFlow ApplyCenteredRMSProp (training_ops.cc)")
          .formula(
              "ms += (grad^2 - ms)*(1 - rho); mg += (grad - mg)*(1 - rho); mom = mom*momentum + "
              "grad*lr/sqrt(ms - mg^2 + epsilon); var -= mom")
          .state("var", "Variable to update, in place")
          .state("mg", "Mean gradient, in place")
          .state("ms", "Mean square, in place")
          .state("mom", "Momentum, in place")
          .scalar("lr", "Learning rate")
          .scalar("rho", "Decay rate")
          .scalar("momentum", "Momentum factor")
          .scalar("epsilon", "Added inside the square root")
          .grad("grad", "The gradient")
          .tolerance(1e-6, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"], rho = c["rho"];
            Expr ms = c["ms"] + (g * g - c["ms"]) * (1.f - rho);
            Expr mg = c["mg"] + (g - c["mg"]) * (1.f - rho);
            Expr denom = (ms - mg * mg) + c["epsilon"];
            Expr mom = c["mom"] * c["momentum"] + g * c["lr"] / Halide::sqrt(denom);
            return dsl::Updates{{"var", c["var"] - mom}, {"mg", mg}, {"ms", ms}, {"mom", mom}};
          });
  return d;
}

}  // namespace opforge::generators
