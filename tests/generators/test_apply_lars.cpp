// Reference: TensorFlow contrib LARSOptimizer, r1.15 lars_optimizer.py, one variable:
// compute_lr(grad, var):
//   w = ||var_old||_2, g = ||grad||_2 over the whole tensor (the raw gradient)
//   trust = (w > 0 and g > 0) ? eta * w / (g + weight_decay * w + epsilon) : 1
//   scaled_lr = lr * trust;  grad = grad + weight_decay * var     ("weight regularization")
// then ApplyMomentum(var, m, lr = 1.0, grad * scaled_lr, momentum, use_nesterov):
//   m = m * momentum + grad * scaled_lr
//   var -= m                                                  (use_nesterov = false)
//   var -= grad * scaled_lr + m * momentum                    (use_nesterov = true)
#include <doctest/doctest.h>

#include <cmath>

#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

void lars_update(const Attrs& a, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), mom = s.at("momentum"), wd = s.at("weight_decay"),
               eta = s.at("eta"), eps = s.at("epsilon");
  const bool nesterov = a.at("use_nesterov") == "true";
  std::vector<double>& var = t.at("var");
  std::vector<double>& m = t.at("m");
  const std::vector<double>& grad = t.at("grad");
  double w2 = 0, g2 = 0;
  for (size_t i = 0; i < var.size(); ++i) {
    w2 += var[i] * var[i];
    g2 += grad[i] * grad[i];
  }
  const double w = std::sqrt(w2), g = std::sqrt(g2);
  const double trust = w > 0 && g > 0 ? eta * w / (g + wd * w + eps) : 1.0;
  const double scaled_lr = lr * trust;
  for (size_t i = 0; i < var.size(); ++i) {
    const double step = (grad[i] + wd * var[i]) * scaled_lr;  // the decayed gradient
    m[i] = m[i] * mom + step;
    var[i] -= nesterov ? step + m[i] * mom : m[i];
  }
}

// weight_decay >= 1e-3 and scaled_lr >~ 1e-3: scaled_lr * weight_decay * var, the L2 term's share
// of the step, is far above the tolerance (a kernel without it fails). m is a step in var's
// units (TF's slot holds scaled_lr * gradients).
const RegisterReference reg("apply_lars",
                            {[](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
                               t["var"] = uniform(rng, n, -1, 1);
                               t["m"] = uniform(rng, n, -0.01, 0.01);
                               t["grad"] = uniform(rng, n, -1, 1);
                               s["lr"] = uniform(rng, 1, 0.1, 1)[0];
                               s["momentum"] = uniform(rng, 1, 0.5, 0.99)[0];
                               s["weight_decay"] = uniform(rng, 1, 1e-3, 0.1)[0];
                               s["eta"] = uniform(rng, 1, 0.01, 0.1)[0];
                               s["epsilon"] = static_cast<float>(1e-9);
                             },
                             lars_update});

// The trust ratio's where-zero rules: ||var|| == 0 or ||grad|| == 0 gives trust 1.
TEST_CASE("apply_lars: trust ratio is 1 where a norm is zero") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    for (const char* nesterov : {"false", "true"}) {
      CAPTURE(isa);
      CAPTURE(nesterov);
      Kernel& k = reg->select("apply_lars", {{"use_nesterov", nesterov}}, isa);
      const registry::Tolerance tol = k.descriptor().tolerance;
      for (const int64_t n : {1, 37, 1000}) {
        CAPTURE(n);
        // A ratio computed despite a zero norm would be 0 (var) or eta / weight_decay = 10 (grad).
        const Scalars s = {{"lr", 0.5},
                           {"momentum", 0.9},
                           {"weight_decay", 0.001},
                           {"eta", 0.01},
                           {"epsilon", 0.0}};
        for (const bool zero_var : {true, false}) {
          CAPTURE(zero_var);
          std::vector<float> var(n), m(n), grad(n);
          for (int64_t i = 0; i < n; ++i) {
            var[i] = zero_var ? 0.0f : 0.25f * static_cast<float>(i % 9 - 4) + 0.125f;
            m[i] = 0.125f * static_cast<float>(i % 5 - 2) + 0.0625f;
            grad[i] = zero_var ? 0.5f * static_cast<float>(i % 7 - 3) + 0.25f : 0.0f;
          }
          Tensors ref;
          ref["var"].assign(var.begin(), var.end());
          ref["m"].assign(m.begin(), m.end());
          ref["grad"].assign(grad.begin(), grad.end());
          lars_update({{"use_nesterov", nesterov}}, s, ref);
          k.call({{"var", var.data(), registry::DType::f32, {n}},
                  {"m", m.data(), registry::DType::f32, {n}},
                  {"grad", grad.data(), registry::DType::f32, {n}}},
                 s);
          for (int64_t i = 0; i < n; ++i) {
            CAPTURE(i);
            // trust 1: the momentum step with the plain lr.
            CHECK(std::fabs(var[i] - ref["var"][i]) <=
                  tol.atol + tol.rtol * std::fabs(ref["var"][i]));
            CHECK(std::fabs(m[i] - ref["m"][i]) <= tol.atol + tol.rtol * std::fabs(ref["m"][i]));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace opforge::testing
