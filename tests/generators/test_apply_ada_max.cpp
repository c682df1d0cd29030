// Reference: TensorFlow ApplyAdaMax (training_ops.cc, tf_formulas.md 2.15):
//   m += (grad - m) * (1 - beta1)
//   v = max(beta2 * v, |grad|)
//   var -= lr / (1 - beta1_power) * (m / (v + epsilon))          (the new m and v)
// epsilon_mode=torch: torch.optim.Adamax (1.13, _single_tensor_adamax; beta1_power = beta1^t):
//   exp_avg = beta1 * exp_avg + (1 - beta1) * grad
//   exp_inf = max(beta2 * exp_inf, |grad| + eps)                  (eps inside the max)
//   p -= lr / (1 - beta1^t) * exp_avg / exp_inf
#include <algorithm>
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

void apply_ada_max_reference(const Attrs& a, const Scalars& s, Tensors& t) {
  const double b1 = s.at("beta1"), b2 = s.at("beta2"), eps = s.at("epsilon");
  const double step = s.at("lr") / (1 - s.at("beta1_power"));
  std::vector<double>&var = t["var"], &m = t["m"], &v = t["v"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    if (a.at("epsilon_mode") == "torch") {
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = std::max(b2 * v[i], std::fabs(g) + eps);
      var[i] -= step * m[i] / v[i];
      continue;
    }
    m[i] += (g - m[i]) * (1 - b1);
    v[i] = std::max(b2 * v[i], std::fabs(g));
    var[i] -= step * (m[i] / (v[i] + eps));
  }
}

// v is an exponentially weighted infinity norm of past gradients and |m| <= v (m averages
// those gradients), as after some steps; |grad| falls on both sides of beta2 * v, so both
// operands of the max are taken. beta1_power = beta1^t for t in [1, 1000]. torch's epsilon
// (1e-3..1e-2) is large enough that adding it to v instead, or not at all, would fail.
void apply_ada_max_inputs(std::mt19937& rng, size_t n, const Attrs& a, Tensors& t, Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["v"] = uniform(rng, n, 0.01, 1);
  t["m"] = uniform(rng, n, -1, 1);
  for (size_t i = 0; i < n; ++i) t["m"][i] = static_cast<float>(t["m"][i] * t["v"][i]);
  t["grad"] = uniform(rng, n, -1, 1);
  const double beta1 = uniform(rng, 1, 0.8, 0.95)[0];
  const int step = std::uniform_int_distribution<int>(1, 1000)(rng);
  s["beta1"] = beta1;
  s["beta2"] = uniform(rng, 1, 0.99, 0.9999)[0];
  s["beta1_power"] = static_cast<float>(std::pow(beta1, step));
  s["lr"] = uniform(rng, 1, 1e-4, 1e-2)[0];
  s["epsilon"] = a.at("epsilon_mode") == "torch"
                     ? static_cast<float>(uniform(rng, 1, 1e-3, 1e-2)[0])
                     : static_cast<float>(1e-7);
}

const RegisterReference reg("apply_ada_max", {apply_ada_max_inputs, apply_ada_max_reference});

}  // namespace
}  // namespace opforge::testing
