// Reference: TensorFlow ApplyProximalAdagrad (training_ops.cc, tf_formulas.md 2.6):
//   accum += grad^2
//   lr_t = lr * rsqrt(accum)                                  (the new accum)
//   v = var - grad * lr_t
//   l1 > 0:  var = sign(v) * max(|v| - lr_t * l1, 0) / (1 + l2 * lr_t)
//   else:    var = v / (1 + l2 * lr_t)
// The branch is on the scalar l1 (strict >); sign(0) = 0.
#include <algorithm>
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

double sign(double x) {
  return (x > 0) - (x < 0);
}

void apply_proximal_adagrad_reference(const Attrs&, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), l1 = s.at("l1"), l2 = s.at("l2");
  std::vector<double>&var = t["var"], &accum = t["accum"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    accum[i] += g * g;
    const double lr_t = lr * (1 / std::sqrt(accum[i]));
    const double v = var[i] - g * lr_t;
    if (l1 > 0) {
      var[i] = sign(v) * std::max(std::fabs(v) - lr_t * l1, 0.0) / (1 + l2 * lr_t);
    } else {
      var[i] = v / (1 + l2 * lr_t);
    }
  }
}

// TensorFlow requires lr > 0, l1 >= 0, l2 >= 0. accum >= 0.1 (initial_accumulator_value): no
// epsilon guards the rsqrt. l1 is 0 for half the sizes; with l1 > 0 the threshold
// lr_t * l1 lies inside the range of |v|, so both sides of the max are hit.
void apply_proximal_adagrad_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t,
                                   Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["accum"] = uniform(rng, n, 0.1, 2);
  t["grad"] = uniform(rng, n, -1, 1);
  s["lr"] = uniform(rng, 1, 1e-2, 0.5)[0];
  // l1 == 0 for the sizes 5, 17 and 1 << 20 (n % 7 is 5, 3, 4); l1 > 0 for 1, 1000 and 65543.
  const size_t h = n % 7;
  s["l1"] = h == 5 || h == 3 || h == 4 ? 0.0 : uniform(rng, 1, 0.1, 2)[0];
  s["l2"] = rng() % 3 == 0 ? 0.0 : uniform(rng, 1, 0.01, 1)[0];
}

const RegisterReference reg("apply_proximal_adagrad",
                            {apply_proximal_adagrad_inputs, apply_proximal_adagrad_reference});

}  // namespace
}  // namespace opforge::testing

#include <doctest/doctest.h>

#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

// accum + grad^2 is 1 or 4 here, so lr_t = lr or lr / 2 and v is exact (with an exact rsqrt):
//   var    accum   grad   lr_t   v = var - grad * lr_t
//   0.75   0.75    0.5    0.5     0.5     (l1 = 1: on the threshold lr_t * l1)
//   0      1       0      0.5     0       (sign(0) = 0)
//  -0.5    3      -1      0.25   -0.25    (l1 = 1: on the threshold)
//   0.125  1       0      0.5     0.125   (l1 = 1: below the threshold)
//  -1      4       0      0.25   -1       (l1 = 1: above the threshold)
//   0.5    0.9375  0.25   0.5     0.375   (l1 = 1: below the threshold)
// Exact zeros are required only with a clear margin: on the threshold an rsqrt within an ulp
// may leave a result within the tolerance of 0.
TEST_CASE("apply_proximal_adagrad: l1 == 0 and l1 > 0 branches, shrinkage to exact 0") {
  const std::vector<double> var = {0.75, 0, -0.5, 0.125, -1, 0.5};
  const std::vector<double> accum = {0.75, 1, 3, 1, 4, 0.9375};
  const std::vector<double> grad = {0.5, 0, -1, 0, 0, 0.25};
  for (double l1 : {0.0, 1.0}) {
    CAPTURE(l1);
    const Scalars s = {{"lr", 0.5}, {"l1", l1}, {"l2", 0.5}};
    const Tensors in = {{"var", tile(var)}, {"accum", tile(accum)}, {"grad", tile(grad)}};
    for (const auto& got :
         check_kernel("apply_proximal_adagrad", {}, in, s, apply_proximal_adagrad_reference)) {
      for (size_t i = 0; i < got.at("var").size(); ++i) {
        CAPTURE(i);
        const size_t k = i % var.size();
        if (k == 1 || (l1 > 0 && (k == 3 || k == 5))) CHECK(got.at("var")[i] == 0.0f);
        if (k == 4) CHECK(got.at("var")[i] < 0.0f);
      }
    }
  }
}

}  // namespace
}  // namespace opforge::testing
