// TensorFlow ApplyProximalGradientDescent(var, alpha, l1, l2, delta).
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

const dsl::OptimizerDecl& apply_proximal_gradient_descent() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_proximal_gradient_descent")
          .summary("FOBOS proximal gradient descent with l1/l2 shrinkage, in place")
          .reference("TensorFlow ApplyProximalGradientDescent (training_ops.cc)")
          .formula(
              "prox = var - alpha*delta; l1 > 0: var = sign(prox)*max(|prox| - alpha*l1, 0) / "
              "(1 + alpha*l2); else var = prox / (1 + alpha*l2)")
          .state("var", "Variable to update, in place")
          .scalar("alpha", "Scaling factor (learning rate)")
          .typical("alpha", 0.01)
          .scalar("l1", "L1 regularization, >= 0")
          .typical("l1", 0.001)
          .scalar("l2", "L2 regularization, >= 0")
          .typical("l2", 0.001)
          .grad("delta", "The change")
          .tolerance(3e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr lr = c["alpha"], l1 = c["l1"], l2 = c["l2"];
            Expr prox = c["var"] - c["delta"] * lr;
            Expr shrunk = dsl::sign(prox) * Halide::max(Halide::abs(prox) - lr * l1, 0.f);
            Expr var = dsl::select(l1 > 0.f, shrunk, prox) / (1.f + l2 * lr);
            return dsl::Updates{{"var", var}};
          });
  return d;
}

}  // namespace opforge::generators
