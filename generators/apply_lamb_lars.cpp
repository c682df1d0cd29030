// Layer-wise adaptive ops: apply_lamb (TensorFlow Addons LAMB) and apply_lars (TensorFlow
// contrib LARSOptimizer). Their trust ratios need whole-tensor norms, written in the DSL as
// reductions: a fused fp64 reduction pass over the tensor, then the elementwise update.
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

namespace {

// ratio = a/b where both are > 0, else 1 (the where-zero rules of LAMB and LARS).
Expr trust_ratio(const Expr& w_norm, const Expr& other, const Expr& value) {
  return dsl::select(w_norm > 0.f && other > 0.f, value, 1.f);
}

}  // namespace

const dsl::OptimizerDecl& apply_lamb() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_lamb")
          .summary("LAMB: Adam update scaled by the per-tensor trust ratio ||var||/||update||")
          .reference("TensorFlow Addons tfa.optimizers.LAMB (_resource_apply_dense)")
          .formula(
              "m = beta1*m + (1-beta1)*grad; v = beta2*v + (1-beta2)*grad^2; u = "
              "(m/(1-beta1^step)) "
              "/ (sqrt(v/(1-beta2^step)) + epsilon) + weight_decay*var; ratio = ||var|| > 0 and "
              "||u|| > 0 ? ||var||/||u|| : 1 (norms over the whole tensor); var -= ratio*lr*u")
          .state("var", "Variable to update, in place")
          .state("m", "First moment, in place")
          .state("v", "Second moment, in place")
          .grad("grad", "The gradient")
          .scalar("lr", "Learning rate")
          .typical("lr", 0.001)
          .scalar("beta1", "First moment decay")
          .typical("beta1", 0.9)
          .domain("beta1", "[0, 1)")
          .scalar("beta2", "Second moment decay")
          .typical("beta2", 0.999)
          .domain("beta2", "[0, 1)")
          .scalar("epsilon", "Added to sqrt(v_hat)")
          .typical("epsilon", 1e-06)
          .domain("epsilon", "[0, inf)")
          .scalar("weight_decay", "Weight decay rate, added to the update")
          .typical("weight_decay", 0.01)
          .scalar("step", "1-based step count for bias correction")
          .typical("step", 10)
          .tolerance(1e-6, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c["grad"], b1 = c["beta1"], b2 = c["beta2"];
            Expr m = b1 * c["m"] + (1.f - b1) * g;
            Expr v = b2 * c["v"] + (1.f - b2) * g * g;
            // Divisions by the per-call bias corrections become multiplications by their
            // reciprocals (computed once), and the per-element divide goes through
            // dsl::reciprocal: both passes (norms, update) evaluate u, and with three divides
            // per element LAMB ran at 85% of the bandwidth kernel at 1e7.
            Expr m_hat = m * (1.f / (1.f - Halide::pow(b1, c["step"])));
            Expr v_hat = v * (1.f / (1.f - Halide::pow(b2, c["step"])));
            Expr u = m_hat * dsl::reciprocal(Halide::sqrt(v_hat) + c["epsilon"]) +
                     c["weight_decay"] * c["var"];
            Expr w_norm = c.norm2(c["var"]), u_norm = c.norm2(u);
            Expr ratio = trust_ratio(w_norm, u_norm, w_norm / u_norm);
            return dsl::Updates{{"var", c["var"] - ratio * c["lr"] * u}, {"m", m}, {"v", v}};
          })
          .grad_scaling();
  return d;
}

const dsl::OptimizerDecl& apply_lars() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_lars")
          .summary("LARS: momentum SGD with the layer-wise trust ratio scaling lr")
          .reference(
              "TensorFlow contrib LARSOptimizer (r1.15 lars_optimizer.py: compute_lr, then "
              "ApplyMomentum with lr 1 and grad*scaled_lr)")
          .formula(
              "w = ||var||, g = ||grad|| (whole tensor, raw grad); ratio = w > 0 and g > 0 ? "
              "eta*w/(g + weight_decay*w + epsilon) : 1; lr_s = lr*ratio; u = lr_s*(grad + "
              "weight_decay*var); m = m*momentum + u; var -= m; use_nesterov: var -= u + "
              "m*momentum (m holds lr_s-scaled steps, as TF's momentum slot)")
          .state("var", "Variable to update, in place")
          .state("m", "Momentum accumulator (TF's momentum slot, lr included), in place")
          .grad("grad", "The gradient")
          .scalar("lr", "Learning rate")
          .typical("lr", 0.1)
          .scalar("momentum", "Momentum factor")
          .typical("momentum", 0.9)
          .scalar("weight_decay",
                  "Weight decay: in the trust-ratio denominator and as the L2 term added to grad")
          .typical("weight_decay", 0.0001)
          .scalar("eta", "Trust coefficient")
          .typical("eta", 0.001)
          .scalar("epsilon", "Added to the trust-ratio denominator")
          .typical("epsilon", 1e-08)
          .domain("epsilon", "[0, inf)")
          .attr_bool("use_nesterov", false, "Nesterov momentum")
          .tolerance(1e-6, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            // The ratio uses the raw gradient's norm; the step the decayed gradient.
            Expr w = c.norm2(c["var"]), gn = c.norm2(c["grad"]);
            Expr wd = c["weight_decay"];
            Expr ratio = trust_ratio(w, gn, c["eta"] * w / (gn + wd * w + c["epsilon"]));
            // TF passes ApplyMomentum lr = 1 and grad*scaled_lr: the slot accumulates scaled
            // steps, so a ratio (or lr) that changes between steps weighs only new gradients.
            Expr u = c["lr"] * ratio * (c["grad"] + wd * c["var"]);
            Expr m = c["m"] * c["momentum"] + u;
            Expr step = c.attr_bool("use_nesterov") ? u + m * c["momentum"] : m;
            return dsl::Updates{{"var", c["var"] - step}, {"m", m}};
          })
          // m reads var (the L2 term) and var reads m: no store order is safe in place.
          .new_values_first();
  return d;
}

// Whole models in one call: LAMB and LARS over flat buffers of many tensors, with the trust
// ratio of each tensor from its own norms (segmented reductions, OptimizerDecl::multi_tensor).
const dsl::OptimizerDecl& multi_tensor_apply_lamb() {
  static const dsl::OptimizerDecl d =
      apply_lamb()
          .renamed("multi_tensor_apply_lamb")
          .summary(
              "LAMB over many tensors in one call (flat buffers, chunk table): per-tensor "
              "trust ratios from segmented norms")
          .reference("TensorFlow Addons LAMB per tensor; NVIDIA apex FusedLAMB (multi-tensor)")
          .multi_tensor();
  return d;
}

const dsl::OptimizerDecl& multi_tensor_apply_lars() {
  static const dsl::OptimizerDecl d =
      apply_lars()
          .renamed("multi_tensor_apply_lars")
          .summary(
              "LARS over many tensors in one call (flat buffers, chunk table): per-tensor "
              "trust ratios from segmented norms")
          .reference("TensorFlow contrib LARSOptimizer (r1.15) per tensor")
          .multi_tensor();
  return d;
}

}  // namespace opforge::generators
