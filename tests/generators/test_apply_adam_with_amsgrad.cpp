// Reference: TensorFlow ResourceApplyAdamWithAmsgrad (training_ops.cc, tf_formulas.md 2.14):
//   m += (grad - m) * (1 - beta1);  v += (grad^2 - v) * (1 - beta2)
//   vhat = max(vhat, v)                                          (the new v, not bias-corrected;
//                                                                 NaN kept: nan_max)
//   epsilon_mode "tf":    var -= lr * sqrt(1 - beta2_power) / (1 - beta1_power) * m
//                                / (sqrt(vhat) + epsilon)
//   epsilon_mode "torch": var -= lr / (1 - beta1_power) * m
//                                / (sqrt(vhat) / sqrt(1 - beta2_power) + epsilon)
// (op_specs.md: torch mode is apply_adam's torch mode with vhat in the denominator.)
#include <algorithm>
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

void apply_adam_with_amsgrad_reference(const Attrs& a, const Scalars& s, Tensors& t) {
  const double b1 = s.at("beta1"), b2 = s.at("beta2"), eps = s.at("epsilon"), lr = s.at("lr");
  const double bc1 = 1 - s.at("beta1_power"), bc2 = 1 - s.at("beta2_power");
  const bool torch = a.at("epsilon_mode") == "torch";
  std::vector<double>&var = t["var"], &m = t["m"], &v = t["v"], &vhat = t["vhat"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    m[i] += (g - m[i]) * (1 - b1);
    v[i] += (g * g - v[i]) * (1 - b2);
    vhat[i] = nan_max(vhat[i], v[i]);
    if (torch) {
      var[i] -= lr / bc1 * m[i] / (std::sqrt(vhat[i]) / std::sqrt(bc2) + eps);
    } else {
      var[i] -= lr * std::sqrt(bc2) / bc1 * m[i] / (std::sqrt(vhat[i]) + eps);
    }
  }
}

// As apply_adam's domain, with vhat >= v (vhat is the running max of v): the new v exceeds
// vhat where grad^2 is large, so both operands of the max are taken. beta powers are beta^t
// for t in [1, 1000].
void apply_adam_with_amsgrad_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t,
                                    Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["m"] = uniform(rng, n, -0.1, 0.1);
  t["v"] = uniform(rng, n, 0, 0.01);
  t["vhat"] = uniform(rng, n, 0, 0.005);
  for (size_t i = 0; i < n; ++i) t["vhat"][i] = static_cast<float>(t["vhat"][i] + t["v"][i]);
  t["grad"] = uniform(rng, n, -1, 1);
  const double beta1 = uniform(rng, 1, 0.8, 0.95)[0], beta2 = uniform(rng, 1, 0.99, 0.9999)[0];
  const int step = std::uniform_int_distribution<int>(1, 1000)(rng);
  s["beta1"] = beta1;
  s["beta2"] = beta2;
  s["beta1_power"] = static_cast<float>(std::pow(beta1, step));
  s["beta2_power"] = static_cast<float>(std::pow(beta2, step));
  s["lr"] = uniform(rng, 1, 1e-4, 1e-2)[0];
  s["epsilon"] = static_cast<float>(1e-7);
}

const RegisterReference reg("apply_adam_with_amsgrad",
                            {apply_adam_with_amsgrad_inputs, apply_adam_with_amsgrad_reference});

}  // namespace
}  // namespace opforge::testing
