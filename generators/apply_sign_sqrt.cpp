// The shortest user-written optimizer, and the template to copy for a new one:
//   var -= lr * sign(grad) * sqrt(abs(grad))
// Declare the arguments in call order, then the update as Halide Exprs over them; add the op to
// ops.h and a row to op_table.cpp, and a reference in tests/generators/.
#include "generators/ops.h"

namespace opforge::generators {

const dsl::OptimizerDecl& apply_sign_sqrt() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_sign_sqrt")
          .summary("var -= lr * sign(grad) * sqrt(|grad|), in place")
          .reference("opforge example rule")
          .formula("var -= lr * sign(grad) * sqrt(abs(grad))")
          .state("var", "Variable to update, in place")
          .grad("grad", "The gradient")
          .scalar("lr", "Learning rate")
          .typical("lr", 0.01)
          .tolerance(3e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            return dsl::Updates{{"var", c["var"] - c["lr"] * dsl::sign(c["grad"]) *
                                                       Halide::sqrt(Halide::abs(c["grad"]))}};
          });
  return d;
}

}  // namespace opforge::generators
