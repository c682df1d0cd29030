// Reference: TensorFlow ApplyFtrl (training_ops.cc, tf_formulas.md 2.8, 2.10). With n = accum
// (old), n' = n + grad^2, pw(x) = sqrt(x) when lr_power == -0.5 exactly, else x^(-lr_power),
// and var_old the var before this step:
//   multiply_linear_by_lr = false:
//     linear += grad - (pw(n') - pw(n)) / lr * var_old
//     x = l1 * sign(linear) - linear;  y = pw(n') / lr + 2 * l2
//     var = |linear| > l1 ? x / y : 0
//   multiply_linear_by_lr = true:
//     linear += grad * lr - (pw(n') - pw(n)) * var_old
//     x = (l1 * lr) * sign(linear) - linear;  y = pw(n') + 2 * l2 * lr
//     var = |linear| > l1 * lr ? x / y : 0
//   accum = n'
// (the NEW linear in x, y and the select; strict >; sign(0) = 0).
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

double sign(double x) {
  return (x > 0) - (x < 0);
}

// var as the FTRL closed form of (linear, accum): what the previous step left.
double ftrl_closed_form(double linear, double accum, double lr, double l1, double l2,
                        double lr_power, bool multiply_linear_by_lr) {
  const double pw = lr_power == -0.5 ? std::sqrt(accum) : std::pow(accum, -lr_power);
  const double l1e = multiply_linear_by_lr ? l1 * lr : l1;
  const double y = multiply_linear_by_lr ? pw + 2 * l2 * lr : pw / lr + 2 * l2;
  return std::fabs(linear) > l1e ? (l1e * sign(linear) - linear) / y : 0.0;
}

void apply_ftrl_reference(const Attrs& a, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), l1 = s.at("l1"), l2 = s.at("l2"), lr_power = s.at("lr_power");
  const bool mult = a.at("multiply_linear_by_lr") == "true";
  auto pw = [&](double x) { return lr_power == -0.5 ? std::sqrt(x) : std::pow(x, -lr_power); };
  std::vector<double>&var = t["var"], &accum = t["accum"], &linear = t["linear"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i], n = accum[i], n1 = n + g * g;
    if (mult) {
      linear[i] += g * lr - (pw(n1) - pw(n)) * var[i];
    } else {
      linear[i] += g - (pw(n1) - pw(n)) / lr * var[i];
    }
    var[i] = ftrl_closed_form(linear[i], n1, lr, l1, l2, lr_power, mult);
    accum[i] = n1;
  }
}

// Scalars: lr_power is exactly -0.5 (the sqrt path) or another value in [-0.9, -0.1] (the pow
// path), l1 is 0 or in [0.1, 2], chosen from the size so that the test sizes cover all four
// combinations, each lr_power path and each l1 branch also at a parallel size (65543: pow,
// l1 > 0; 1 << 20: sqrt, l1 == 0). l2 is 0 for about a third of the seeds.
// State as FTRL leaves it: accum >= 0.1 (the initial accumulator), linear in [-3, 3] (times lr
// with multiply_linear_by_lr), so |linear| falls on both sides of l1 in [0.1, 2], and var the
// closed form of (linear, accum) - except every 4th element, a fresh slot (accum 0.1, linear 0)
// holding an initial var in [-0.05, 0.05]. A var unrelated to linear and accum would make
// linear += grad - (pw(n') - pw(n)) / lr * var cancel catastrophically in fp32
// (pw(n') - pw(n) loses ~log2(n / grad^2) bits, then is scaled by var / lr): an error no fp32
// kernel can avoid, in a state FTRL itself does not produce.
void apply_ftrl_inputs(std::mt19937& rng, size_t n, const Attrs& a, Tensors& t, Scalars& s) {
  const bool mult = a.at("multiply_linear_by_lr") == "true";
  const double lr = uniform(rng, 1, 0.01, 0.5)[0];
  const size_t h = n % 7;  // 1, 5, 3, 6, 2, 4 for the sizes 1, 5, 17, 1000, 65543, 1 << 20
  const bool pow_path = h == 1 || h == 3 || h == 2, l1_zero = h == 5 || h == 3 || h == 4;
  const double lr_power = pow_path ? uniform(rng, 1, -0.9, -0.1)[0] : -0.5;
  const double l1 = l1_zero ? 0.0 : uniform(rng, 1, 0.1, 2)[0];
  const double l2 = rng() % 3 == 0 ? 0.0 : uniform(rng, 1, 0.01, 1)[0];
  s["lr"] = lr;
  s["lr_power"] = lr_power;
  s["l1"] = l1;
  s["l2"] = l2;
  t["accum"] = uniform(rng, n, 0.1, 2);
  t["linear"] = uniform(rng, n, -3, 3);
  t["var"] = uniform(rng, n, -0.05, 0.05);
  t["grad"] = uniform(rng, n, -1, 1);
  for (size_t i = 0; i < n; ++i) {
    double& linear = t["linear"][i];
    if (i % 4 == 3) {
      t["accum"][i] = static_cast<float>(0.1);
      linear = 0;
      continue;
    }
    if (mult) linear = static_cast<float>(linear * lr);
    t["var"][i] =
        static_cast<float>(ftrl_closed_form(linear, t["accum"][i], lr, l1, l2, lr_power, mult));
  }
}

const RegisterReference reg("apply_ftrl", {apply_ftrl_inputs, apply_ftrl_reference});

}  // namespace
}  // namespace opforge::testing

#include <doctest/doctest.h>

#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

// Both pw paths (lr_power -0.5: sqrt; -0.75 and 0: pow), l1 == 0 and l1 > 0, both attrs.
// Elements: |new linear| well above and below the threshold; new linear exactly 0; accum == grad
// == 0, where pw(n') - pw(n) = 0 - 0 leaves linear as it is (no NaN from a 0 / 0 in a rewritten
// form) and, with l2 == 0, y == 0: the select must give 0 (not x / 0) as |linear| <= l1; last, a
// first step from an initial accumulator of 0 (TensorFlow allows it) with grad != 0.
TEST_CASE("apply_ftrl: lr_power == -0.5 and other lr_power, l1 == 0 and l1 > 0, both attrs") {
  const std::vector<double> accum = {0.25, 1, 0.5, 0, 2, 0.1, 0};
  const std::vector<double> linear = {2, -0.25, 0, 0, -3, 0.5, 0.5};
  const std::vector<double> grad = {0.5, 0.25, 0, 0, -1, -0.5, 0.5};
  const std::vector<double> var = {-0.5, 0.125, 0, 0.25, 0.75, 0, 0.25};
  for (const std::string mult : {"false", "true"}) {
    for (double lr_power : {-0.5, -0.75, 0.0}) {
      for (double l1 : {0.0, 0.5}) {
        for (double l2 : {0.0, 0.25}) {
          CAPTURE(mult);
          CAPTURE(lr_power);
          CAPTURE(l1);
          CAPTURE(l2);
          const Scalars s = {{"lr", 0.5}, {"l1", l1}, {"l2", l2}, {"lr_power", lr_power}};
          const Tensors in = {{"var", tile(var)},
                              {"accum", tile(accum)},
                              {"linear", tile(linear)},
                              {"grad", tile(grad)}};
          for (const auto& got : check_kernel("apply_ftrl", {{"multiply_linear_by_lr", mult}}, in,
                                              s, apply_ftrl_reference)) {
            for (size_t i = 0; i < got.at("var").size(); ++i) {
              CAPTURE(i);
              const size_t k = i % var.size();
              // linear stays 0 (grad 0, accum unchanged): var is exactly 0, never NaN, also
              // where y == 0 (k == 3 with l2 == 0 and lr_power != 0).
              if (k == 2 || k == 3) CHECK(got.at("var")[i] == 0.0f);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace opforge::testing
