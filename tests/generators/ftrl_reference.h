// The FTRL formulas shared by the ApplyFtrl and ApplyFtrlV2 references (tf_formulas.md 2.8-2.10)
// and their input domain.
#pragma once

#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {

inline double ftrl_sign(double x) {
  return (x > 0) - (x < 0);
}

// var as the FTRL closed form of (linear, accum): what the previous step left.
inline double ftrl_closed_form(double linear, double accum, double lr, double l1, double l2,
                               double lr_power, bool multiply_linear_by_lr) {
  const double pw = lr_power == -0.5 ? std::sqrt(accum) : std::pow(accum, -lr_power);
  const double l1e = multiply_linear_by_lr ? l1 * lr : l1;
  const double y = multiply_linear_by_lr ? pw + 2 * l2 * lr : pw / lr + 2 * l2;
  return std::fabs(linear) > l1e ? (l1e * ftrl_sign(linear) - linear) / y : 0.0;
}

// One FTRL step with l2 shrinkage (0 for ApplyFtrl, where g_s = grad exactly).
inline void ftrl_update(const Attrs& a, const Scalars& s, Tensors& t, double shrinkage) {
  const double lr = s.at("lr"), l1 = s.at("l1"), l2 = s.at("l2"), lr_power = s.at("lr_power");
  const bool mult = a.at("multiply_linear_by_lr") == "true";
  auto pw = [&](double x) { return lr_power == -0.5 ? std::sqrt(x) : std::pow(x, -lr_power); };
  std::vector<double>&var = t["var"], &accum = t["accum"], &linear = t["linear"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i], n = accum[i], n1 = n + g * g;
    const double g_s = g + 2 * shrinkage * var[i];
    if (mult) {
      linear[i] += g_s * lr - (pw(n1) - pw(n)) * var[i];
    } else {
      linear[i] += g_s - (pw(n1) - pw(n)) / lr * var[i];
    }
    var[i] = ftrl_closed_form(linear[i], n1, lr, l1, l2, lr_power, mult);
    accum[i] = n1;
  }
}

// Scalars: lr_power is exactly -0.5 (the sqrt path) or another value in [-0.9, -0.1] (the pow
// path), l1 is 0 or in [0.1, 2], chosen from the size so that the test sizes cover all four
// combinations, each lr_power path and each l1 branch also at a parallel size (65543: pow,
// l1 > 0; 1 << 20: sqrt, l1 == 0). l2 (and l2_shrinkage) are 0 for about a third of the seeds.
// State as FTRL leaves it: accum >= 0.1 (the initial accumulator), linear in [-3, 3] (times lr
// with multiply_linear_by_lr), so |linear| falls on both sides of l1 in [0.1, 2], and var the
// closed form of (linear, accum) - except every 4th element, a fresh slot (accum 0.1, linear 0)
// holding an initial var in [-0.05, 0.05]. A var unrelated to linear and accum would make
// linear += grad - (pw(n') - pw(n)) / lr * var cancel catastrophically in fp32
// (pw(n') - pw(n) loses ~log2(n / grad^2) bits, then is scaled by var / lr): an error no fp32
// kernel can avoid, in a state FTRL itself does not produce.
inline void ftrl_inputs(std::mt19937& rng, size_t n, const Attrs& a, Tensors& t, Scalars& s,
                        bool shrinkage) {
  const bool mult = a.at("multiply_linear_by_lr") == "true";
  const double lr = uniform(rng, 1, 0.01, 0.5)[0];
  const size_t h = n % 7;  // 1, 5, 3, 6, 2, 4 for the sizes 1, 5, 17, 1000, 65543, 1 << 20
  const bool pow_path = h == 1 || h == 3 || h == 2, l1_zero = h == 5 || h == 3 || h == 4;
  const double lr_power = pow_path ? uniform(rng, 1, -0.9, -0.1)[0] : -0.5;
  const double l1 = l1_zero ? 0.0 : uniform(rng, 1, 0.1, 2)[0];
  const double l2 = rng() % 3 == 0 ? 0.0 : uniform(rng, 1, 0.01, 1)[0];
  if (shrinkage) s["l2_shrinkage"] = rng() % 3 == 0 ? 0.0 : uniform(rng, 1, 1e-3, 0.5)[0];
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

}  // namespace opforge::testing
