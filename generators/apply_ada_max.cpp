// TensorFlow ApplyAdaMax(var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad).
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

const dsl::OptimizerDecl& apply_ada_max() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_ada_max")
          .summary("AdaMax (infinity-norm Adam), in place")
          .reference("TensorFlow ApplyAdaMax (training_ops.cc)")
          .formula(
              "m += (grad - m)*(1 - beta1); v = max(beta2*v, |grad|); var -= lr/(1 - "
              "beta1_power) * m/(v + epsilon)")
          .state("var", "Variable to update, in place")
          .state("m", "First moment, in place")
          .state("v", "Infinity-norm moment, in place")
          .scalar("beta1_power", "beta1 ** t")
          .scalar("lr", "Learning rate")
          .scalar("beta1", "First moment decay")
          .scalar("beta2", "Infinity-norm decay")
          .scalar("epsilon", "Added to v")
          .grad("grad", "The gradient")
          .tolerance(4e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"];
            Expr m = c["m"] + (g - c["m"]) * (1.f - c["beta1"]);
            Expr v = Halide::max(c["beta2"] * c["v"], Halide::abs(g));
            Expr step = c["lr"] / (1.f - c["beta1_power"]);
            return dsl::Updates{
                {"var", c["var"] - step * (m / (v + c["epsilon"]))}, {"m", m}, {"v", v}};
          });
  return d;
}

}  // namespace opforge::generators
