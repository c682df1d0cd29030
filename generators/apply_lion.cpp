// Lion (Chen et al. 2023, google/automl): sign of an interpolated momentum, decoupled decay.
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

const dsl::OptimizerDecl& apply_lion() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_lion")
          .summary("Lion: sign of interpolated momentum with decoupled weight decay, in place")
          .reference("google/automl Lion (lion_tf2.py, lion_pytorch.py)")
          .formula(
              "c = beta1*m + (1-beta1)*grad; var -= lr*(sign(c) + weight_decay*var); "
              "m = beta2*m + (1-beta2)*grad")
          .state("var", "Variable to update, in place")
          .state("m", "Momentum, in place")
          .quantizable("m", true)
          .grad("grad", "The gradient")
          .scalar("lr", "Learning rate")
          .typical("lr", 0.0001)
          .scalar("beta1", "Interpolation factor for the update")
          .typical("beta1", 0.9)
          .domain("beta1", "[0, 1]")
          .scalar("beta2", "Momentum decay")
          .typical("beta2", 0.99)
          .domain("beta2", "[0, 1]")
          .scalar("weight_decay", "Decoupled weight decay")
          .typical("weight_decay", 0.01)
          .tolerance(3e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"], m = c["m"];
            Expr interp = c["beta1"] * m + (1.f - c["beta1"]) * g;
            Expr var = c["var"] - c["lr"] * (dsl::sign(interp) + c["weight_decay"] * c["var"]);
            return dsl::Updates{{"var", var}, {"m", c["beta2"] * m + (1.f - c["beta2"]) * g}};
          });
  return d;
}

}  // namespace opforge::generators
