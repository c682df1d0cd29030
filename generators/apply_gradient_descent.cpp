// TensorFlow ApplyGradientDescent(var, alpha, delta): var -= alpha * delta.
#include "generators/ops.h"

namespace opforge::generators {

const dsl::OptimizerDecl& apply_gradient_descent() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_gradient_descent")
          .summary("Plain gradient descent, in place")
          .reference("TensorFlow ApplyGradientDescent (tensorflow/core/kernels/training_ops.cc)")
          .formula("var -= alpha * delta")
          .state("var", "Variable to update, in place")
          .scalar("alpha", "Scaling factor (learning rate)")
          .typical("alpha", 0.01)
          .grad("delta", "The change (gradient)")
          .tolerance(2e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            return dsl::Updates{{"var", c["var"] - c["alpha"] * c["delta"]}};
          })
          .grad_scaling();
  return d;
}

}  // namespace opforge::generators
