// Reference: TensorFlow Addons LAMB (tfa.optimizers.LAMB._resource_apply_dense), one variable,
// weight decay and layer adaptation on:
//   m = beta1 * m + (1 - beta1) * grad;  v = beta2 * v + (1 - beta2) * grad^2
//   m_hat = m / (1 - beta1^step);  v_hat = v / (1 - beta2^step)
//   u = m_hat / (sqrt(v_hat) + epsilon) + weight_decay * var_old
//   w = ||var_old||_2, n = ||u||_2 over the whole tensor
//   ratio = (w > 0 and n > 0) ? w / n : 1
//   var -= ratio * lr * u
#include <doctest/doctest.h>

#include <cmath>

#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

void lamb_update(const Attrs&, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), b1 = s.at("beta1"), b2 = s.at("beta2"), eps = s.at("epsilon"),
               wd = s.at("weight_decay"), step = s.at("step");
  const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
  std::vector<double>& var = t.at("var");
  std::vector<double>& m = t.at("m");
  std::vector<double>& v = t.at("v");
  const std::vector<double>& grad = t.at("grad");
  std::vector<double> u(var.size());
  double w2 = 0, n2 = 0;
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    m[i] = b1 * m[i] + (1 - b1) * g;
    v[i] = b2 * v[i] + (1 - b2) * g * g;
    u[i] = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps) + wd * var[i];
    w2 += var[i] * var[i];
    n2 += u[i] * u[i];
  }
  const double w = std::sqrt(w2), n = std::sqrt(n2);
  const double ratio = w > 0 && n > 0 ? w / n : 1.0;
  for (size_t i = 0; i < var.size(); ++i) var[i] -= ratio * lr * u[i];
}

const RegisterReference reg("apply_lamb",
                            {[](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
                               t["var"] = uniform(rng, n, -1, 1);
                               t["m"] = uniform(rng, n, -0.1, 0.1);
                               t["v"] = uniform(rng, n, 0, 0.01);
                               t["grad"] = uniform(rng, n, -1, 1);
                               s["lr"] = uniform(rng, 1, 1e-4, 1e-2)[0];
                               s["beta1"] = uniform(rng, 1, 0.8, 0.95)[0];
                               s["beta2"] = uniform(rng, 1, 0.99, 0.999)[0];
                               s["epsilon"] = static_cast<float>(1e-6);
                               s["weight_decay"] = uniform(rng, 1, 0, 0.1)[0];
                               s["step"] = std::uniform_int_distribution<int>(1, 1000)(rng);
                             },
                             lamb_update});

struct LambCase {
  std::vector<float> var, m, v, grad;
};

// Runs the kernel on `c` (in place) and returns the fp64 reference for it.
Tensors run_lamb(Kernel& k, LambCase& c, const Scalars& s) {
  Tensors ref;
  ref["var"].assign(c.var.begin(), c.var.end());
  ref["m"].assign(c.m.begin(), c.m.end());
  ref["v"].assign(c.v.begin(), c.v.end());
  ref["grad"].assign(c.grad.begin(), c.grad.end());
  lamb_update({}, s, ref);
  const int64_t n = static_cast<int64_t>(c.var.size());
  k.call({{"var", c.var.data(), registry::DType::f32, {n}},
          {"m", c.m.data(), registry::DType::f32, {n}},
          {"v", c.v.data(), registry::DType::f32, {n}},
          {"grad", c.grad.data(), registry::DType::f32, {n}}},
         s);
  return ref;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want,
                 const registry::Tolerance& tol) {
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(got[i] - want[i]) <= tol.atol + tol.rtol * std::fabs(want[i]));
  }
}

// The trust ratio's where-zero rules: ||var|| == 0 or ||update|| == 0 gives ratio 1.
TEST_CASE("apply_lamb: trust ratio is 1 where a norm is zero") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    CAPTURE(isa);
    Kernel& k = reg->select("apply_lamb", {}, isa);
    const registry::Tolerance tol = k.descriptor().tolerance;
    for (const int64_t n : {1, 37, 1000}) {
      CAPTURE(n);
      const Scalars s = {{"lr", 0.01},      {"beta1", 0.9}, {"beta2", 0.999},
                         {"epsilon", 1e-6}, {"step", 3},    {"weight_decay", 0.01}};
      SUBCASE("var all zeros: ratio 1, var = -lr * u") {
        LambCase c{std::vector<float>(n, 0.0f), std::vector<float>(n), std::vector<float>(n),
                   std::vector<float>(n)};
        for (int64_t i = 0; i < n; ++i) {
          c.m[i] = 0.01f * static_cast<float>(i % 7 - 3);
          c.v[i] = 1e-4f * static_cast<float>(i % 5);
          c.grad[i] = 0.1f * static_cast<float>(i % 11 - 5);
        }
        const Tensors ref = run_lamb(k, c, s);
        // With ratio 1, var becomes -lr * u (ratio 0 or NaN would leave 0 or NaN).
        bool moved = false;
        for (float x : c.var) moved = moved || x != 0.0f;
        CHECK(moved);
        check_close(c.var, ref.at("var"), tol);
        check_close(c.m, ref.at("m"), tol);
        check_close(c.v, ref.at("v"), tol);
      }
      SUBCASE("update all zeros: ratio 1, var unchanged") {
        Scalars s0 = s;
        s0["weight_decay"] = 0;
        LambCase c{std::vector<float>(n), std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f),
                   std::vector<float>(n, 0.0f)};
        for (int64_t i = 0; i < n; ++i) c.var[i] = 0.25f * static_cast<float>(i % 9 - 4) + 0.5f;
        const std::vector<float> before = c.var;
        run_lamb(k, c, s0);
        CHECK(c.var == before);
        for (int64_t i = 0; i < n; ++i) {
          CHECK(c.m[i] == 0.0f);
          CHECK(c.v[i] == 0.0f);
        }
      }
      SUBCASE("both norms zero") {
        LambCase c{std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f),
                   std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f)};
        run_lamb(k, c, s);
        for (int64_t i = 0; i < n; ++i) {
          CHECK(c.var[i] == 0.0f);  // not NaN (0/0 must not reach var)
          CHECK(c.m[i] == 0.0f);
          CHECK(c.v[i] == 0.0f);
        }
      }
    }
  }
}

}  // namespace
}  // namespace opforge::testing
