// TensorFlow ApplyAdam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad;
// use_nesterov). Epsilon is added after the bias correction folded into lr_t (TF placement).
#include "generators/ops.h"

namespace opforge::generators {

const dsl::OptimizerDecl& apply_adam() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_adam")
          .summary(
              "Adam, TensorFlow convention (bias correction folded into lr_t), in place; the "
              "divide by sqrt(v) + epsilon uses a refined reciprocal (within 2 ulp)")
          .reference("TensorFlow ApplyAdam (tensorflow/core/kernels/training_ops.cc)")
          .formula(
              "lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power); "
              "m += (grad - m) * (1 - beta1); v += (grad*grad - v) * (1 - beta2); "
              "var -= lr_t * m / (sqrt(v) + epsilon); "
              "use_nesterov: var -= lr_t * (grad * (1 - beta1) + beta1 * m) / (sqrt(v) + epsilon)")
          .state("var", "Variable to update, in place")
          .state("m", "First moment estimate, in place")
          .state("v", "Second moment estimate, in place")
          .scalar("beta1_power", "beta1 ** t")
          .scalar("beta2_power", "beta2 ** t")
          .scalar("lr", "Learning rate")
          .scalar("beta1", "First moment decay")
          .scalar("beta2", "Second moment decay")
          .scalar("epsilon", "Ridge term, added to sqrt(v)")
          .grad("grad", "The gradient")
          .attr_bool("use_nesterov", false, "Nesterov momentum in the numerator")
          .tolerance(4e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            dsl::Expr g = c["grad"];
            dsl::Expr lr_t = c["lr"] * Halide::sqrt(1 - c["beta2_power"]) / (1 - c["beta1_power"]);
            dsl::Expr m = c["m"] + (g - c["m"]) * (1 - c["beta1"]);
            dsl::Expr v = c["v"] + (g * g - c["v"]) * (1 - c["beta2"]);
            dsl::Expr num = c.attr_bool("use_nesterov") ? g * (1 - c["beta1"]) + c["beta1"] * m : m;
            // num / (sqrt(v) + epsilon): the divide through dsl::reciprocal (see dsl/math.h).
            dsl::Expr var = c["var"] - lr_t * num * dsl::reciprocal(Halide::sqrt(v) + c["epsilon"]);
            return dsl::Updates{{"var", var}, {"m", m}, {"v", v}};
          });
  return d;
}

}  // namespace opforge::generators
