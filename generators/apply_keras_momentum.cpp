// TensorFlow ResourceApplyKerasMomentum(var, accum, lr, grad, momentum; use_nesterov): the
// Keras convention, lr applied inside the accumulator.
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

const dsl::OptimizerDecl& apply_keras_momentum() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_keras_momentum")
          .summary("Momentum SGD, Keras convention (lr inside the accumulator), in place")
          .reference("TensorFlow ResourceApplyKerasMomentum (training_ops.cc)")
          .formula(
              "accum = accum*momentum - grad*lr; var += accum; use_nesterov: var += "
              "accum*momentum - grad*lr")
          .state("var", "Variable to update, in place")
          .state("accum", "Momentum accumulator, in place")
          .scalar("lr", "Learning rate")
          .typical("lr", 0.01)
          .grad("grad", "The gradient")
          .scalar("momentum", "Momentum factor")
          .typical("momentum", 0.9)
          .attr_bool("use_nesterov", false, "Nesterov momentum: var += accum*momentum - grad*lr")
          .tolerance(3e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr step = c["grad"] * c["lr"];
            Expr accum = c["accum"] * c["momentum"] - step;
            Expr delta = c.attr_bool("use_nesterov") ? accum * c["momentum"] - step : accum;
            return dsl::Updates{{"var", c["var"] + delta}, {"accum", accum}};
          });
  return d;
}

}  // namespace opforge::generators
