// TensorFlow ApplyMomentum(var, accum, lr, grad, momentum; use_nesterov).
#include "generators/ops.h"

namespace opforge::generators {

const dsl::OptimizerDecl& apply_momentum() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_momentum")
          .summary("Momentum SGD (TensorFlow convention: lr applied after accumulation), in place")
          .reference("TensorFlow ApplyMomentum (tensorflow/core/kernels/training_ops.cc)")
          .formula(
              "accum = accum * momentum + grad; var -= lr * accum; "
              "use_nesterov: var -= grad * lr + accum * momentum * lr")
          .state("var", "Variable to update, in place")
          .state("accum", "Momentum accumulator, in place")
          .quantizable("accum", true)
          .scalar("lr", "Learning rate")
          .typical("lr", 0.01)
          .grad("grad", "The gradient")
          .scalar("momentum", "Momentum factor")
          .typical("momentum", 0.9)
          .attr_bool("use_nesterov", false, "Nesterov momentum: var -= grad*lr + accum*momentum*lr")
          .tolerance(3e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            dsl::Expr accum = c["accum"] * c["momentum"] + c["grad"];
            dsl::Expr step = c.attr_bool("use_nesterov")
                                 ? c["grad"] * c["lr"] + accum * c["momentum"] * c["lr"]
                                 : c["lr"] * accum;
            return dsl::Updates{{"var", c["var"] - step}, {"accum", accum}};
          })
          .grad_scaling();
  return d;
}

}  // namespace opforge::generators

namespace opforge::generators {

const dsl::OptimizerDecl& sparse_apply_momentum() {
  static const dsl::OptimizerDecl d =
      apply_momentum()
          .renamed("sparse_apply_momentum")
          .summary("Momentum SGD (TF convention) on the rows named by indices, in order")
          .reference("TensorFlow SparseApplyMomentum (training_ops.cc)")
          .sparse_rows();
  return d;
}

}  // namespace opforge::generators
