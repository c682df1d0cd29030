// The Adam family. TensorFlow: ApplyAdam(var, m, v, beta1_power, beta2_power, lr, beta1,
// beta2, epsilon, grad; use_nesterov), ResourceApplyAdamWithAmsgrad (+vhat). Beyond TF:
// apply_adamw (torch.optim.AdamW, or CANN's ApplyAdamW inputs) and the lazy sparse_adam.
//
// epsilon_mode: "tf" adds epsilon to sqrt(v) with the bias correction folded into lr_t;
// "torch" adds it to sqrt(v_hat) = sqrt(v)/sqrt(1 - beta2^t).
//
// Schedule: the elementwise recipe every dense optimizer op shares (dsl/elementwise_schedule.cpp;
// `opforge inspect apply_adam` prints its loop nest), with the op table's per-row overrides
// (op_table.cpp); the Adams2019 twin's is schedules/apply_adam__...__auto.schedule.h.
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

namespace {

// atol: m = m + (grad - m)*(1 - beta1) cancels near m = 0 with |grad|, |m| up to 1: the
// rounding of (grad - m) and of the product cost up to ~2 ulp(1) = 2.4e-7 absolute however
// small the result (seen: 1.5e-7 with beta1 = 0.1, `opforge check`'s default scalars).
constexpr double kAdamAtol = 2.5e-7;

const std::vector<std::string> kEpsilonModes = {"tf", "torch"};
const char* const kEpsilonModeDoc =
    "where epsilon goes: tf = lr_t*m/(sqrt(v)+eps) with lr_t = lr*sqrt(1-b2^t)/(1-b1^t); torch "
    "= lr/(1-b1^t) * m/(sqrt(v)/sqrt(1-b2^t) + eps)";

// var's step for moment m (or the Nesterov numerator) and second moment vv, given the bias
// corrections bc1 = 1 - beta1^t and bc2 = 1 - beta2^t. The divide goes through
// dsl::reciprocal (see dsl/math.h).
Expr adam_step(const dsl::UpdateContext& c, const Expr& lr, const Expr& num, const Expr& vv,
               const Expr& bc1, const Expr& bc2) {
  if (c.attr_string("epsilon_mode") == "torch") {
    // sqrt(v_hat) as sqrt(v) times a per-call scalar 1/sqrt(bc2), not a divide per element:
    // the divider (shared by sqrt and div) bounds Adam at cache-resident sizes; this is one of
    // three divider ops per element instead of four (AVX2, 1e5 elements on an AMD EPYC: see
    // scripts/BENCHMARKS.md). At most one ulp from torch's divide, inside the tolerance.
    Expr denom = Halide::sqrt(vv) * (1.f / Halide::sqrt(bc2)) + c["epsilon"];
    return lr / bc1 * num * dsl::reciprocal(denom);
  }
  Expr lr_t = lr * Halide::sqrt(bc2) / bc1;
  return lr_t * num * dsl::reciprocal(Halide::sqrt(vv) + c["epsilon"]);
}

dsl::Updates tf_adam(const dsl::UpdateContext& c, const char* vmax, bool nesterov) {
  Expr g = c["grad"], b1 = c["beta1"];
  Expr m = c["m"] + (g - c["m"]) * (1.f - b1);
  Expr v = c["v"] + (g * g - c["v"]) * (1.f - c["beta2"]);
  Expr num = nesterov ? g * (1.f - b1) + b1 * m : m;
  Expr vv = vmax ? dsl::maximum(c[vmax], v) : v;
  Expr step = adam_step(c, c["lr"], num, vv, 1.f - c["beta1_power"], 1.f - c["beta2_power"]);
  dsl::Updates u = {{"var", c["var"] - step}, {"m", m}, {"v", v}};
  if (vmax) u.push_back({vmax, vv});
  return u;
}

const char* const kAdamFormula =
    "lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power); m += (grad - m) * (1 - beta1); "
    "v += (grad*grad - v) * (1 - beta2); var -= lr_t * m / (sqrt(v) + epsilon); use_nesterov: "
    "numerator grad * (1 - beta1) + beta1 * m; epsilon_mode=torch: var -= lr / (1 - "
    "beta1_power) * m / (sqrt(v) / sqrt(1 - beta2_power) + epsilon)";

dsl::OptimizerDecl tf_adam_decl(const std::string& name) {
  return dsl::OptimizerDecl(name)
      .state("var", "Variable to update, in place")
      .state("m", "First moment estimate, in place")
      .state("v", "Second moment estimate, in place");
}

}  // namespace

const dsl::OptimizerDecl& apply_adam() {
  static const dsl::OptimizerDecl d =
      tf_adam_decl("apply_adam")
          .quantizable("m", true)
          .quantizable("v", false)
          .summary(
              "Adam, TensorFlow convention (bias correction folded into lr_t), in place; the "
              "divide by sqrt(v) + epsilon uses a refined reciprocal (within 2 ulp)")
          .reference("TensorFlow ApplyAdam (tensorflow/core/kernels/training_ops.cc)")
          .formula(kAdamFormula)
          .scalar("beta1_power", "beta1 ** t")
          .typical("beta1_power", 0.3486784401)
          .domain("beta1_power", "[0, 1)")
          .scalar("beta2_power", "beta2 ** t")
          .typical("beta2_power", 0.990044880209)
          .domain("beta2_power", "[0, 1)")
          .scalar("lr", "Learning rate")
          .typical("lr", 0.001)
          .scalar("beta1", "First moment decay")
          .typical("beta1", 0.9)
          .domain("beta1", "[0, 1)")
          .scalar("beta2", "Second moment decay")
          .typical("beta2", 0.999)
          .domain("beta2", "[0, 1)")
          .scalar("epsilon", "Ridge term, added to sqrt(v)")
          .typical("epsilon", 1e-07)
          .domain("epsilon", "[0, inf)")
          .grad("grad", "The gradient")
          .attr_bool("use_nesterov", false, "Nesterov momentum in the numerator")
          .attr_string("epsilon_mode", "tf", kEpsilonModes, kEpsilonModeDoc)
          .tolerance(4e-7, kAdamAtol)
          .update([](const dsl::UpdateContext& c) {
            return tf_adam(c, nullptr, c.attr_bool("use_nesterov"));
          })
          .grad_scaling();
  return d;
}

const dsl::OptimizerDecl& apply_adam_with_amsgrad() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_adam_with_amsgrad")
          .summary("Adam with AMSGrad (max of raw second moments), TensorFlow convention")
          .reference("TensorFlow ResourceApplyAdamWithAmsgrad (training_ops.cc)")
          .formula(std::string(kAdamFormula) +
                   "; vhat = max(vhat, v) replaces v in the denominator")
          .state("var", "Variable to update, in place")
          .state("m", "First moment estimate, in place")
          .state("v", "Second moment estimate, in place")
          .state("vhat", "Running maximum of v, in place")
          .scalar("beta1_power", "beta1 ** t")
          .typical("beta1_power", 0.3486784401)
          .domain("beta1_power", "[0, 1)")
          .scalar("beta2_power", "beta2 ** t")
          .typical("beta2_power", 0.990044880209)
          .domain("beta2_power", "[0, 1)")
          .scalar("lr", "Learning rate")
          .typical("lr", 0.001)
          .scalar("beta1", "First moment decay")
          .typical("beta1", 0.9)
          .domain("beta1", "[0, 1)")
          .scalar("beta2", "Second moment decay")
          .typical("beta2", 0.999)
          .domain("beta2", "[0, 1)")
          .scalar("epsilon", "Ridge term")
          .typical("epsilon", 1e-07)
          .domain("epsilon", "[0, inf)")
          .grad("grad", "The gradient")
          .attr_string("epsilon_mode", "tf", kEpsilonModes, kEpsilonModeDoc)
          .tolerance(4e-7, kAdamAtol)
          .update([](const dsl::UpdateContext& c) { return tf_adam(c, "vhat", false); })
          .grad_scaling();
  return d;
}

const dsl::OptimizerDecl& apply_adamw() {
  static const dsl::Condition amsgrad{"amsgrad", "true"}, torch{"convention", "torch"},
      cann{"convention", "cann"};
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("apply_adamw")
          .summary("AdamW, decoupled weight decay (torch.optim.AdamW; CANN ApplyAdamW inputs)")
          .reference("torch.optim.AdamW (_single_tensor_adamw); CANN aclnnApplyAdamW")
          .formula(
              "g = maximize ? -grad : grad; var *= 1 - lr*weight_decay; m = beta1*m + (1-beta1)*g; "
              "v = beta2*v + (1-beta2)*g^2; amsgrad: v_max = max(v_max, v) in the denominator; "
              "var -= lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + epsilon); t = step "
              "(convention torch) or beta^t = beta_power*beta (convention cann: inputs are "
              "beta^(t-1)); epsilon_mode tf: epsilon added to sqrt(v) with the bias correction "
              "in lr_t")
          .state("var", "Variable to update, in place")
          .state("m", "First moment (exp_avg), in place")
          .state("v", "Second moment (exp_avg_sq), in place")
          .state("v_max", "Running maximum of v (max_exp_avg_sq), in place", amsgrad)
          .quantizable("m", true)
          .quantizable("v", false)
          .quantizable("v_max", false)
          .grad("grad", "The gradient")
          .scalar("lr", "Learning rate")
          .typical("lr", 0.001)
          .scalar("beta1", "First moment decay")
          .typical("beta1", 0.9)
          .domain("beta1", "[0, 1)")
          .scalar("beta2", "Second moment decay")
          .typical("beta2", 0.999)
          .domain("beta2", "[0, 1)")
          .scalar("epsilon", "Ridge term")
          .typical("epsilon", 1e-08)
          .domain("epsilon", "[0, inf)")
          .scalar("weight_decay", "Decoupled weight decay")
          .typical("weight_decay", 0.01)
          .scalar("step", "1-based step count t, after this update's increment", torch)
          .typical("step", 10)
          .scalar("beta1_power", "beta1 ** (t-1) (CANN convention)", cann)
          .typical("beta1_power", 0.387420489)
          .domain("beta1_power", "[0, 1]")
          .scalar("beta2_power", "beta2 ** (t-1) (CANN convention)", cann)
          .typical("beta2_power", 0.991035916125)
          .domain("beta2_power", "[0, 1]")
          .attr_bool("amsgrad", false, "use the running maximum of v (adds state v_max)")
          .attr_bool("maximize", false, "ascend: negate the gradient")
          .attr_string("convention", "torch", {"torch", "cann"},
                       "bias-correction inputs: torch = step t; cann = beta1_power, beta2_power "
                       "holding beta^(t-1) (CANN ApplyAdamW)")
          .attr_string("epsilon_mode", "torch", kEpsilonModes, kEpsilonModeDoc)
          .tolerance(4e-7, kAdamAtol)
          .update([](const dsl::UpdateContext& c) {
            Expr g = c.attr_bool("maximize") ? -c["grad"] : c["grad"];
            Expr b1 = c["beta1"], b2 = c["beta2"], lr = c["lr"];
            Expr b1t, b2t;
            if (c.attr_string("convention") == "torch") {
              b1t = Halide::pow(b1, c["step"]);
              b2t = Halide::pow(b2, c["step"]);
            } else {
              b1t = c["beta1_power"] * b1;
              b2t = c["beta2_power"] * b2;
            }
            Expr decayed = c["var"] * (1.f - lr * c["weight_decay"]);
            Expr m = b1 * c["m"] + (1.f - b1) * g;
            Expr v = b2 * c["v"] + (1.f - b2) * g * g;
            const bool ams = c.attr_bool("amsgrad");
            Expr vv = ams ? dsl::maximum(c["v_max"], v) : v;
            dsl::Updates u = {{"var", decayed - adam_step(c, lr, m, vv, 1.f - b1t, 1.f - b2t)},
                              {"m", m},
                              {"v", v}};
            if (ams) u.push_back({"v_max", vv});
            return u;
          })
          .grad_scaling();
  return d;
}

const dsl::OptimizerDecl& sparse_adam() {
  static const dsl::OptimizerDecl d =
      apply_adam()
          .renamed("sparse_adam")
          .summary(
              "Lazy Adam: TensorFlow ApplyAdam on the rows named by indices only (m, v and var "
              "of other rows untouched)")
          .reference("TensorFlow ApplyAdam per row (LazyAdam semantics)")
          .sparse_rows();
  return d;
}

}  // namespace opforge::generators
