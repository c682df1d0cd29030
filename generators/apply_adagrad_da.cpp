// TensorFlow ApplyAdagradDA(var, gradient_accumulator, gradient_squared_accumulator, grad, lr,
// l1, l2, global_step): the dual-averaging closed form; var's old value is not read.
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

const dsl::OptimizerDecl& apply_adagrad_da() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_adagrad_da")
          .summary("Adagrad dual averaging, in place")
          .reference("TensorFlow ApplyAdagradDA (training_ops.cc)")
          .formula(
              "ga += grad; gsa += grad^2; l1 > 0: var = -lr*sign(ga)*max(|ga| - l1*step, 0) / "
              "(l2*step*lr + sqrt(gsa)); else var = -lr*ga / (l2*step*lr + sqrt(gsa)); "
              "step = float(global_step)")
          .state("var", "Variable to update, in place")
          .state("gradient_accumulator", "Sum of gradients, in place")
          .state("gradient_squared_accumulator", "Sum of squared gradients, in place")
          .grad("grad", "The gradient")
          .scalar("lr", "Scaling factor")
          .typical("lr", 0.01)
          .scalar("l1", "L1 regularization")
          .typical("l1", 0.001)
          .scalar("l2", "L2 regularization")
          .typical("l2", 0.001)
          .scalar_i64("global_step", "Training step number (int64; TF converts it to float)")
          .typical("global_step", 100)
          .tolerance(3e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"], lr = c["lr"], l1 = c["l1"];
            Expr step = Halide::cast<float>(c["global_step"]);
            Expr ga = c["gradient_accumulator"] + g;
            Expr gsa = c["gradient_squared_accumulator"] + g * g;
            Expr denom = c["l2"] * (step * lr) + Halide::sqrt(gsa);
            Expr l1_form = -lr * dsl::sign(ga) * Halide::max(Halide::abs(ga) - step * l1, 0.f);
            Expr var = dsl::select(l1 > 0.f, l1_form, -lr * ga) / denom;
            return dsl::Updates{
                {"var", var}, {"gradient_accumulator", ga}, {"gradient_squared_accumulator", gsa}};
          });
  return d;
}

}  // namespace opforge::generators
