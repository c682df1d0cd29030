// TensorFlow ApplyAdaMax(var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad), and with
// epsilon_mode=torch torch.optim.Adamax's update (epsilon added to |grad| inside the max).
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

const dsl::OptimizerDecl& apply_ada_max() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_ada_max")
          .summary("AdaMax (infinity-norm Adam), TF convention or torch's (epsilon_mode), in place")
          .reference("TensorFlow ApplyAdaMax (training_ops.cc); torch.optim.Adamax (1.13)")
          .formula(
              "m += (grad - m)*(1 - beta1); v = max(beta2*v, |grad|); var -= lr/(1 - "
              "beta1_power) * m/(v + epsilon); epsilon_mode=torch: m = beta1*m + (1 - "
              "beta1)*grad; v = max(beta2*v, |grad| + epsilon); var -= lr/(1 - beta1_power) * "
              "m/v")
          .state("var", "Variable to update, in place")
          .state("m", "First moment, in place")
          .state("v", "Infinity-norm moment, in place")
          .scalar("beta1_power", "beta1 ** t")
          .typical("beta1_power", 0.3486784401)
          .domain("beta1_power", "[0, 1)")
          .scalar("lr", "Learning rate")
          .typical("lr", 0.002)
          .scalar("beta1", "First moment decay")
          .typical("beta1", 0.9)
          .domain("beta1", "[0, 1)")
          .scalar("beta2", "Infinity-norm decay")
          .typical("beta2", 0.999)
          .domain("beta2", "[0, 1)")
          .scalar("epsilon", "Added to v (epsilon_mode=torch: to |grad| inside the max)")
          .typical("epsilon", 1e-07)
          .domain("epsilon", "[0, inf)")
          .grad("grad", "The gradient")
          .attr_string("epsilon_mode", "tf", {"tf", "torch"},
                       "where epsilon goes: tf = var -= lr_t*m/(v + eps) with v = max(beta2*v, "
                       "|grad|); torch (torch.optim.Adamax) = v = max(beta2*v, |grad| + eps), "
                       "var -= lr_t*m/v; lr_t = lr/(1 - beta1_power)")
          .named_in_id_off_default("epsilon_mode")
          .tolerance(4e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"], b1 = c["beta1"];
            Expr step = c["lr"] / (1.f - c["beta1_power"]);
            if (c.attr_string("epsilon_mode") == "torch") {
              // torch's order: exp_avg.mul_(beta1).add_(grad, alpha=1-beta1).
              Expr m = c["m"] * b1 + (1.f - b1) * g;
              Expr v = Halide::max(c["beta2"] * c["v"], Halide::abs(g) + c["epsilon"]);
              return dsl::Updates{{"var", c["var"] - step * (m / v)}, {"m", m}, {"v", v}};
            }
            Expr m = c["m"] + (g - c["m"]) * (1.f - b1);
            Expr v = Halide::max(c["beta2"] * c["v"], Halide::abs(g));
            return dsl::Updates{
                {"var", c["var"] - step * (m / (v + c["epsilon"]))}, {"m", m}, {"v", v}};
          });
  return d;
}

}  // namespace opforge::generators
