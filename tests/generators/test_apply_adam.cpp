// Reference: TensorFlow ApplyAdam:
//   lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
//   m += (grad - m) * (1 - beta1);  v += (grad^2 - v) * (1 - beta2)
//   var -= lr_t * m / (sqrt(v) + epsilon)
//   use_nesterov: var -= lr_t * (grad * (1 - beta1) + beta1 * m) / (sqrt(v) + epsilon)
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

const RegisterReference reg("apply_adam",
                            {[](std::mt19937& rng, size_t n, Tensors& t, Scalars& s) {
                               t["var"] = uniform(rng, n, -1, 1);
                               t["m"] = uniform(rng, n, -0.1, 0.1);
                               t["v"] = uniform(rng, n, 0, 0.01);
                               t["grad"] = uniform(rng, n, -1, 1);
                               const double beta1 = uniform(rng, 1, 0.8, 0.95)[0],
                                            beta2 = uniform(rng, 1, 0.99, 0.9999)[0];
                               const int step = std::uniform_int_distribution<int>(1, 1000)(rng);
                               s["beta1"] = beta1;
                               s["beta2"] = beta2;
                               s["beta1_power"] = static_cast<float>(std::pow(beta1, step));
                               s["beta2_power"] = static_cast<float>(std::pow(beta2, step));
                               s["lr"] = uniform(rng, 1, 1e-4, 1e-2)[0];
                               s["epsilon"] = static_cast<float>(1e-7);
                             },
                             [](const Attrs& a, const Scalars& s, Tensors& t) {
                               const double b1 = s.at("beta1"), b2 = s.at("beta2"),
                                            eps = s.at("epsilon");
                               const double lr_t = s.at("lr") * std::sqrt(1 - s.at("beta2_power")) /
                                                   (1 - s.at("beta1_power"));
                               const bool nesterov = a.at("use_nesterov") == "true";
                               for (size_t i = 0; i < t["var"].size(); ++i) {
                                 const double g = t["grad"][i];
                                 double& m = t["m"][i];
                                 double& v = t["v"][i];
                                 m += (g - m) * (1 - b1);
                                 v += (g * g - v) * (1 - b2);
                                 const double num = nesterov ? g * (1 - b1) + b1 * m : m;
                                 t["var"][i] -= lr_t * num / (std::sqrt(v) + eps);
                               }
                             }});

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
  for (const char* isa : {"avx2", "avx512"}) {
    if (std::string(isa) == "avx512" && !cpu_supports("avx512f")) continue;
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
