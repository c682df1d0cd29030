// TensorFlow ApplyRMSProp(var, ms, mom, lr, rho, momentum, epsilon, grad) and
// ApplyCenteredRMSProp(var, mg, ms, mom, lr, rho, momentum, epsilon, grad): epsilon inside
// the square root (TF convention). epsilon_mode=torch is torch.optim.RMSprop's update instead:
// epsilon added outside the square root, and mom holds torch's momentum_buffer (g/avg, lr
// applied after), so a learning rate that changes between steps gives torch's numbers.
#include <utility>

#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

namespace {

const char* const kEpsilonModeDoc =
    "where epsilon goes: tf = mom = mom*momentum + lr*grad/sqrt(ms + eps), var -= mom; torch "
    "(torch.optim.RMSprop) = mom = mom*momentum + grad/(sqrt(ms) + eps), var -= lr*mom";

// New (var, mom) from the new ms (and mg): `var_ms` is ms, or ms - mg^2 when centered.
std::pair<Expr, Expr> rms_prop_step(const dsl::UpdateContext& c, const Expr& var_ms) {
  Expr g = c["grad"];
  if (c.attr_string("epsilon_mode") == "torch") {
    // torch's buffer is lr-free: lr multiplies it after, whatever lr was at earlier steps.
    Expr mom = c["mom"] * c["momentum"] + g / (Halide::sqrt(var_ms) + c["epsilon"]);
    return {c["var"] - c["lr"] * mom, mom};
  }
  Expr mom = c["mom"] * c["momentum"] + g * c["lr"] / Halide::sqrt(var_ms + c["epsilon"]);
  return {c["var"] - mom, mom};
}

// Running mean of x with decay rho, in each convention's order of operations (TF's
// training_ops.cc, torch's mul_(alpha).add_/addcmul_).
Expr decayed_mean(const dsl::UpdateContext& c, const Expr& old, const Expr& x) {
  Expr rho = c["rho"];
  if (c.attr_string("epsilon_mode") == "torch") return old * rho + (1.f - rho) * x;
  return old + (x - old) * (1.f - rho);
}

}  // namespace

const dsl::OptimizerDecl& apply_rms_prop() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_rms_prop")
          .summary(
              "RMSProp with momentum, TF convention (epsilon inside sqrt) or torch's "
              "(epsilon_mode=torch), in place")
          .reference("TensorFlow ApplyRMSProp (training_ops.cc); torch.optim.RMSprop (1.13)")
          .formula(
              "ms += (grad^2 - ms)*(1 - rho); mom = mom*momentum + grad*lr/sqrt(ms + epsilon); "
              "var -= mom; epsilon_mode=torch: ms = rho*ms + (1 - rho)*grad^2; mom = "
              "mom*momentum + grad/(sqrt(ms) + epsilon) (torch's momentum_buffer, without lr); "
              "var -= lr*mom")
          .state("var", "Variable to update, in place")
          .state("ms", "Mean square, in place")
          .state("mom", "Momentum, in place (epsilon_mode=torch: torch's momentum_buffer)")
          .scalar("lr", "Learning rate")
          .typical("lr", 0.001)
          .scalar("rho", "Decay rate")
          .typical("rho", 0.9)
          .scalar("momentum", "Momentum factor")
          .typical("momentum", 0.9)
          .scalar("epsilon", "Added to ms inside the square root (torch: to the square root)")
          .typical("epsilon", 0.001)
          .domain("epsilon", "[0, inf)")
          .grad("grad", "The gradient")
          .attr_string("epsilon_mode", "tf", {"tf", "torch"}, kEpsilonModeDoc)
          .named_in_id_off_default("epsilon_mode")
          // atol: torch's buffer is O(1) (grad/avg), and mom*momentum + grad/avg cancels near 0
          // with both terms up to ~2: their roundings cost ~2 ulp(1) however small the result
          // (seen: 1.6e-7 at mom = 0.15).
          .tolerance(4e-7, 2.5e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"];
            Expr ms = decayed_mean(c, c["ms"], g * g);
            auto [var, mom] = rms_prop_step(c, ms);
            return dsl::Updates{{"var", var}, {"ms", ms}, {"mom", mom}};
          });
  return d;
}

const dsl::OptimizerDecl& apply_centered_rms_prop() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_centered_rms_prop")
          .summary(
              "Centered RMSProp with momentum, TF convention or torch's (epsilon_mode=torch), "
              "in place")
          .reference(
              "TensorFlow ApplyCenteredRMSProp (training_ops.cc); torch.optim.RMSprop "
              "centered=True (1.13)")
          .formula(
              "ms += (grad^2 - ms)*(1 - rho); mg += (grad - mg)*(1 - rho); mom = mom*momentum + "
              "grad*lr/sqrt(ms - mg^2 + epsilon); var -= mom; epsilon_mode=torch: ms = rho*ms + "
              "(1 - rho)*grad^2; mg = rho*mg + (1 - rho)*grad; mom = mom*momentum + "
              "grad/(sqrt(ms - mg^2) + epsilon) (torch's momentum_buffer, without lr); var -= "
              "lr*mom")
          .state("var", "Variable to update, in place")
          .state("mg", "Mean gradient, in place")
          .state("ms", "Mean square, in place")
          .state("mom", "Momentum, in place (epsilon_mode=torch: torch's momentum_buffer)")
          .scalar("lr", "Learning rate")
          .typical("lr", 0.001)
          .scalar("rho", "Decay rate")
          .typical("rho", 0.9)
          .scalar("momentum", "Momentum factor")
          .typical("momentum", 0.9)
          .scalar("epsilon", "Added inside the square root (torch: to the square root)")
          .typical("epsilon", 0.001)
          .domain("epsilon", "[0, inf)")
          .grad("grad", "The gradient")
          .attr_string("epsilon_mode", "tf", {"tf", "torch"}, kEpsilonModeDoc)
          .named_in_id_off_default("epsilon_mode")
          .tolerance(1e-6, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"];
            Expr ms = decayed_mean(c, c["ms"], g * g);
            Expr mg = decayed_mean(c, c["mg"], g);
            auto [var, mom] = rms_prop_step(c, ms - mg * mg);
            return dsl::Updates{{"var", var}, {"mg", mg}, {"ms", ms}, {"mom", mom}};
          });
  return d;
}

}  // namespace opforge::generators
