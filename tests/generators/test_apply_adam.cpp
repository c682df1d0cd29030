// Reference: TensorFlow ApplyAdam (training_ops.cc, tf_formulas.md 2.13):
//   m += (grad - m) * (1 - beta1);  v += (grad^2 - v) * (1 - beta2)
//   num = m                                          (use_nesterov = false)
//   num = grad * (1 - beta1) + beta1 * m             (use_nesterov = true; the new m)
//   epsilon_mode "tf":    var -= lr * sqrt(1 - beta2_power) / (1 - beta1_power) * num
//                                / (sqrt(v) + epsilon)
//   epsilon_mode "torch": var -= lr / (1 - beta1_power) * num
//                                / (sqrt(v) / sqrt(1 - beta2_power) + epsilon)
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

void apply_adam_reference(const Attrs& a, const Scalars& s, Tensors& t) {
  const double b1 = s.at("beta1"), b2 = s.at("beta2"), eps = s.at("epsilon"), lr = s.at("lr");
  const double bc1 = 1 - s.at("beta1_power"), bc2 = 1 - s.at("beta2_power");
  const bool nesterov = a.at("use_nesterov") == "true";
  const auto mode = a.find("epsilon_mode");
  const bool torch = mode != a.end() && mode->second == "torch";
  std::vector<double>&var = t["var"], &m = t["m"], &v = t["v"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    m[i] += (g - m[i]) * (1 - b1);
    v[i] += (g * g - v[i]) * (1 - b2);
    const double num = nesterov ? g * (1 - b1) + b1 * m[i] : m[i];
    if (torch) {
      var[i] -= lr / bc1 * num / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    } else {
      var[i] -= lr * std::sqrt(bc2) / bc1 * num / (std::sqrt(v[i]) + eps);
    }
  }
}

// beta powers are beta^t for t in [1, 1000].
void apply_adam_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["m"] = uniform(rng, n, -0.1, 0.1);
  t["v"] = uniform(rng, n, 0, 0.01);
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

const RegisterReference reg("apply_adam", {apply_adam_inputs, apply_adam_reference});

}  // namespace
}  // namespace opforge::testing

#include <doctest/doctest.h>

#include <limits>

#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

// IEEE edge cases of the division, as TensorFlow's Eigen kernel gives them:
//   sqrt(v) + epsilon == 0 with m != 0  ->  var becomes -+inf;
//   grad*grad overflows, v == inf       ->  m / inf == 0, var unchanged.
TEST_CASE("apply_adam: division edge cases match IEEE (TF) semantics on every ISA") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    CAPTURE(isa);
    Kernel& k = reg->select("apply_adam", {}, isa);
    const int64_t n = 37;  // vector body and tail
    std::vector<float> var(n, 1.0f), m(n), v(n, 0.0f), grad(n, 0.0f);
    for (int64_t i = 0; i < n; ++i) m[i] = i % 2 ? 0.5f : -0.5f;
    grad[3] = 1e20f;  // grad^2 overflows: v = inf there
    std::map<std::string, double> s = {{"beta1_power", 0.9}, {"beta2_power", 0.999},
                                       {"lr", 0.01},         {"beta1", 0.9},
                                       {"beta2", 0.999},     {"epsilon", 0.0}};
    k.call({{"var", var.data(), registry::DType::f32, {n}},
            {"m", m.data(), registry::DType::f32, {n}},
            {"v", v.data(), registry::DType::f32, {n}},
            {"grad", grad.data(), registry::DType::f32, {n}}},
           s);
    for (int64_t i = 0; i < n; ++i) {
      CAPTURE(i);
      if (i == 3) {
        CHECK(std::isinf(v[i]));
        CHECK(var[i] == 1.0f);
      } else {
        CHECK(std::isinf(var[i]));
        CHECK((var[i] > 0) == (m[i] < 0));  // var -= lr_t * m / 0
      }
    }
  }
}

}  // namespace
}  // namespace opforge::testing
