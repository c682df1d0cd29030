// TensorFlow ApplyAdadelta(var, accum, accum_update, lr, rho, epsilon, grad).
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

const dsl::OptimizerDecl& apply_adadelta() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_adadelta")
          .summary("Adadelta, in place")
          .reference("TensorFlow ApplyAdadelta (training_ops.cc)")
          .formula(
              "accum = accum*rho + grad^2*(1-rho); update = sqrt(accum_update + eps) * "
              "rsqrt(accum + eps) * grad; var -= update*lr; accum_update = accum_update*rho + "
              "update^2*(1-rho)")
          .state("var", "Variable to update, in place")
          .state("accum", "Running average of squared gradients, in place")
          .state("accum_update", "Running average of squared updates, in place")
          .scalar("lr", "Scaling factor")
          .typical("lr", 1.0)
          .scalar("rho", "Decay factor")
          .typical("rho", 0.95)
          .scalar("epsilon", "Constant added inside both square roots")
          .typical("epsilon", 1e-06)
          .domain("epsilon", "[0, inf)")
          .grad("grad", "The gradient")
          .tolerance(1e-6, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"], rho = c["rho"], eps = c["epsilon"];
            Expr accum = c["accum"] * rho + g * g * (1.f - rho);
            Expr update = Halide::sqrt(c["accum_update"] + eps) / Halide::sqrt(accum + eps) * g;
            Expr accum_update = c["accum_update"] * rho + update * update * (1.f - rho);
            return dsl::Updates{{"var", c["var"] - update * c["lr"]},
                                {"accum", accum},
                                {"accum_update", accum_update}};
          });
  return d;
}

}  // namespace opforge::generators
