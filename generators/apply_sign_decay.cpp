// TensorFlow ApplyAddSign(var, m, lr, alpha, sign_decay, beta, grad) and
// ApplyPowerSign(var, m, lr, logbase, sign_decay, beta, grad). sign(0) == 0.
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

const dsl::OptimizerDecl& apply_add_sign() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_add_sign")
          .summary("AddSign, in place")
          .reference("TensorFlow ApplyAddSign (training_ops.cc)")
          .formula(
              "m = m*beta + grad*(1 - beta); var -= lr*(alpha + "
              "sign_decay*sign(grad)*sign(m))*grad")
          .state("var", "Variable to update, in place")
          .state("m", "Moving average of the gradient, in place")
          .scalar("lr", "Scaling factor")
          .typical("lr", 0.001)
          .scalar("alpha", "Base step")
          .typical("alpha", 1.0)
          .scalar("sign_decay", "Sign agreement weight")
          .typical("sign_decay", 1.0)
          .scalar("beta", "Moving-average decay")
          .typical("beta", 0.9)
          .grad("grad", "The gradient")
          .tolerance(3e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"];
            Expr m = c["m"] * c["beta"] + g * (1.f - c["beta"]);
            Expr agree = dsl::sign(g) * dsl::sign(m);
            return dsl::Updates{
                {"var", c["var"] - c["lr"] * (c["alpha"] + c["sign_decay"] * agree) * g}, {"m", m}};
          });
  return d;
}

const dsl::OptimizerDecl& apply_power_sign() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_power_sign")
          .summary("PowerSign, in place")
          .reference("TensorFlow ApplyPowerSign (training_ops.cc)")
          .formula(
              "m = m*beta + grad*(1 - beta); var -= lr*exp(logbase*sign_decay*sign(grad)*sign(m))"
              "*grad")
          .state("var", "Variable to update, in place")
          .state("m", "Moving average of the gradient, in place")
          .scalar("lr", "Scaling factor")
          .typical("lr", 0.001)
          .scalar("logbase", "Log of the base")
          .typical("logbase", 1.0)
          .scalar("sign_decay", "Sign agreement weight")
          .typical("sign_decay", 1.0)
          .scalar("beta", "Moving-average decay")
          .typical("beta", 0.9)
          .grad("grad", "The gradient")
          .tolerance(1e-6, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"];
            Expr m = c["m"] * c["beta"] + g * (1.f - c["beta"]);
            Expr agree = dsl::sign(g) * dsl::sign(m);
            // agree is -1, 0 or 1: three scalar exps instead of one per element.
            Expr k = c["logbase"] * c["sign_decay"];
            Expr scale = dsl::select(agree > 0.f, Halide::exp(k),
                                     dsl::select(agree < 0.f, Halide::exp(-k), 1.f));
            return dsl::Updates{{"var", c["var"] - c["lr"] * scale * g}, {"m", m}};
          });
  return d;
}

}  // namespace opforge::generators
