// Reference: TensorFlow ApplyPowerSign (training_ops.cc, tf_formulas.md 2.19):
//   m = m * beta + grad * (1 - beta)
//   s = sign(grad) * sign(m)                       (the new m; sign(0) = 0)
//   var -= lr * exp(logbase * sign_decay * s) * grad
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

double sign(double x) {
  return (x > 0) - (x < 0);
}

void apply_power_sign_reference(const Attrs&, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), logbase = s.at("logbase"), sign_decay = s.at("sign_decay"),
               beta = s.at("beta");
  std::vector<double>&var = t["var"], &m = t["m"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    m[i] = m[i] * beta + g * (1 - beta);
    const double sgm = sign(g) * sign(m[i]);
    var[i] -= lr * std::exp(logbase * sign_decay * sgm) * g;
  }
}

// logbase around ln(e) = 1 (TensorFlow's default base e).
void apply_power_sign_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
  double beta;
  sign_inputs(rng, n, t, beta);
  s["beta"] = beta;
  s["lr"] = uniform(rng, 1, 1e-3, 0.1)[0];
  s["logbase"] = uniform(rng, 1, 0.5, 2)[0];
  s["sign_decay"] = uniform(rng, 1, 0, 1)[0];
}

const RegisterReference reg("apply_power_sign",
                            {apply_power_sign_inputs, apply_power_sign_reference});

}  // namespace
}  // namespace opforge::testing

#include <doctest/doctest.h>

#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

// beta = 0.5: new m = (m + grad) / 2, exact. Elements: new m == 0 with grad != 0 (sign(0) = 0:
// the step is lr * exp(0) * grad = lr * grad, not lr * exp(+-logbase * sign_decay) * grad),
// m == 0, grad == 0 (var unchanged), both 0, and sign(grad) * sign(m) = -1 and +1.
TEST_CASE("apply_power_sign: sign(0) == 0 for grad == 0 and for m == 0") {
  const std::vector<double> m = {-0.5, 0, 0.5, 0, 0.5, -0.25};
  const std::vector<double> grad = {0.5, 0.5, 0, 0, -0.25, -0.5};
  const std::vector<double> var = {0.25, -0.5, 0.75, 1, -1, 0.5};
  const Scalars s = {{"lr", 0.5}, {"logbase", 1}, {"sign_decay", 0.5}, {"beta", 0.5}};
  const Tensors in = {{"var", tile(var)}, {"m", tile(m)}, {"grad", tile(grad)}};
  for (const auto& got : check_kernel("apply_power_sign", {}, in, s, apply_power_sign_reference)) {
    for (size_t i = 0; i < got.at("var").size(); ++i) {
      CAPTURE(i);
      const size_t k = i % var.size();
      if (k == 0) CHECK(got.at("m")[i] == 0.0f);  // var: 0.25 - 0.5 * 1 * 0.5, within tolerance
      if (k == 2 || k == 3) CHECK(got.at("var")[i] == static_cast<float>(var[k]));
    }
  }
}

}  // namespace
}  // namespace opforge::testing
