// TensorFlow ApplyProximalAdagrad(var, accum, lr, l1, l2, grad) and SparseApplyProximalAdagrad.
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

const dsl::OptimizerDecl& apply_proximal_adagrad() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_proximal_adagrad")
          .summary("Proximal Adagrad (FOBOS with Adagrad learning rate), in place")
          .reference("TensorFlow ApplyProximalAdagrad (training_ops.cc)")
          .formula(
              "accum += grad^2; lr_t = lr*rsqrt(accum); prox = var - grad*lr_t; l1 > 0: var = "
              "sign(prox)*max(|prox| - lr_t*l1, 0)/(1 + l2*lr_t); else var = prox/(1 + l2*lr_t)")
          .state("var", "Variable to update, in place")
          .state("accum", "Sum of squared gradients, in place")
          .scalar("lr", "Scaling factor, > 0")
          .typical("lr", 0.01)
          .scalar("l1", "L1 regularization, >= 0")
          .typical("l1", 0.001)
          .scalar("l2", "L2 regularization, >= 0")
          .typical("l2", 0.001)
          .grad("grad", "The gradient")
          .tolerance(3e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"], l1 = c["l1"];
            Expr accum = c["accum"] + g * g;
            Expr lr_t = c["lr"] / Halide::sqrt(accum);
            Expr prox = c["var"] - g * lr_t;
            Expr shrunk = dsl::sign(prox) * Halide::max(Halide::abs(prox) - lr_t * l1, 0.f);
            Expr var = dsl::select(l1 > 0.f, shrunk, prox) / (1.f + c["l2"] * lr_t);
            return dsl::Updates{{"var", var}, {"accum", accum}};
          });
  return d;
}

const dsl::OptimizerDecl& sparse_apply_proximal_adagrad() {
  static const dsl::OptimizerDecl d =
      apply_proximal_adagrad()
          .renamed("sparse_apply_proximal_adagrad")
          .summary("Proximal Adagrad on the rows named by indices, in order")
          .reference("TensorFlow SparseApplyProximalAdagrad (training_ops.cc)")
          .sparse_rows();
  return d;
}

}  // namespace opforge::generators
