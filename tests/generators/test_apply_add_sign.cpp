// Reference: TensorFlow ApplyAddSign (training_ops.cc, tf_formulas.md 2.18):
//   m = m * beta + grad * (1 - beta)
//   s = sign(grad) * sign(m)                       (the new m; sign(0) = 0)
//   var -= lr * (alpha + sign_decay * s) * grad
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

double sign(double x) {
  return (x > 0) - (x < 0);
}

void apply_add_sign_reference(const Attrs&, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), alpha = s.at("alpha"), sign_decay = s.at("sign_decay"),
               beta = s.at("beta");
  std::vector<double>&var = t["var"], &m = t["m"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    m[i] = m[i] * beta + g * (1 - beta);
    const double sgm = sign(g) * sign(m[i]);
    var[i] -= lr * (alpha + sign_decay * sgm) * g;
  }
}

// grad and m in [-1, 1] with exact zeros (grad, m, both). sign(new m) jumps at 0: where grad and
// m have opposite signs and the new m would be within 1e-4 of 0 (fp32 rounding of
// m * beta + grad * (1 - beta) could flip its sign there), m is drawn again. Exact zeros of the
// new m with grad != 0, where sign(0) = 0 decides the step: for beta = 1 - 2^-k (0.875, 0.9375,
// a third of the seeds each), every 10th element has m = q, grad = -(2^k - 1) * q with q a
// multiple of 2^-14 (few bits), so both products and their sum are exact in fp32.
void sign_inputs(std::mt19937& rng, size_t n, Tensors& t, double& beta) {
  const int k = static_cast<int>(rng() % 3) + 2;  // 2: random beta, 3: 0.875, 4: 0.9375
  beta = k == 2 ? uniform(rng, 1, 0.8, 0.99)[0] : 1 - std::ldexp(1.0, -k);
  t["var"] = uniform(rng, n, -1, 1);
  t["m"] = uniform(rng, n, -1, 1);
  t["grad"] = uniform(rng, n, -1, 1);
  std::uniform_int_distribution<int> q(-1024, 1024);
  for (size_t i = 0; i < n; ++i) {
    double &m = t["m"][i], &g = t["grad"][i];
    switch (i % 10) {
      case 0:
        g = 0;
        break;
      case 1:
        m = 0;
        break;
      case 2:
        m = g = 0;
        break;
      case 3:
        if (k != 2) {
          m = std::ldexp(q(rng), -14);
          g = -(std::ldexp(1.0, k) - 1) * m;
          break;
        }
        [[fallthrough]];
      default:
        while (m * g < 0 && std::fabs(m * beta + g * (1 - beta)) < 1e-4)
          m = uniform(rng, 1, -1, 1)[0];
    }
  }
}

void apply_add_sign_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
  double beta;
  sign_inputs(rng, n, t, beta);
  s["beta"] = beta;
  s["lr"] = uniform(rng, 1, 1e-3, 0.1)[0];
  s["alpha"] = uniform(rng, 1, 0.5, 2)[0];
  s["sign_decay"] = uniform(rng, 1, 0, 1)[0];
}

const RegisterReference reg("apply_add_sign", {apply_add_sign_inputs, apply_add_sign_reference});

}  // namespace
}  // namespace opforge::testing

#include <doctest/doctest.h>

#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

// beta = 0.5: new m = (m + grad) / 2, exact. Elements: new m == 0 with grad != 0 (sign(0) = 0:
// the step is lr * alpha * grad, not lr * (alpha +- sign_decay) * grad), m == 0, grad == 0
// (var unchanged), both 0, and sign(grad) * sign(m) = -1 and +1.
TEST_CASE("apply_add_sign: sign(0) == 0 for grad == 0 and for m == 0") {
  const std::vector<double> m = {-0.5, 0, 0.5, 0, 0.5, -0.25};
  const std::vector<double> grad = {0.5, 0.5, 0, 0, -0.25, -0.5};
  const std::vector<double> var = {0.25, -0.5, 0.75, 1, -1, 0.5};
  const Scalars s = {{"lr", 0.5}, {"alpha", 1}, {"sign_decay", 0.5}, {"beta", 0.5}};
  const Tensors in = {{"var", tile(var)}, {"m", tile(m)}, {"grad", tile(grad)}};
  for (const auto& got : check_kernel("apply_add_sign", {}, in, s, apply_add_sign_reference)) {
    for (size_t i = 0; i < got.at("var").size(); ++i) {
      CAPTURE(i);
      const size_t k = i % var.size();
      if (k == 0) {
        CHECK(got.at("m")[i] == 0.0f);
        CHECK(got.at("var")[i] == 0.0f);  // 0.25 - 0.5 * 1 * 0.5, exact
      }
      if (k == 2 || k == 3) CHECK(got.at("var")[i] == static_cast<float>(var[k]));
    }
  }
}

}  // namespace
}  // namespace opforge::testing
