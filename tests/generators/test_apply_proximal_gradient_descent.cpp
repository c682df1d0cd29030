// Reference: TensorFlow ApplyProximalGradientDescent (training_ops.cc, tf_formulas.md 2.2):
//   v = var - delta * alpha
//   l1 > 0:  var = sign(v) * max(|v| - alpha * l1, 0) / (1 + l2 * alpha)
//   else:    var = v / (1 + l2 * alpha)
// The branch is on the scalar l1 (strict >); sign(0) = 0.
#include <algorithm>
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

double sign(double x) {
  return (x > 0) - (x < 0);
}

void apply_proximal_gradient_descent_reference(const Attrs&, const Scalars& s, Tensors& t) {
  const double alpha = s.at("alpha"), l1 = s.at("l1"), l2 = s.at("l2");
  std::vector<double>& var = t["var"];
  const std::vector<double>& delta = t["delta"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double v = var[i] - delta[i] * alpha;
    if (l1 > 0) {
      var[i] = sign(v) * std::max(std::fabs(v) - alpha * l1, 0.0) / (1 + l2 * alpha);
    } else {
      var[i] = v / (1 + l2 * alpha);
    }
  }
}

// l1 is 0 for half the sizes (the plain branch), l2 for about a third of the seeds; with l1 > 0 the
// threshold alpha * l1 lies inside the range of |v|, so both sides of the max are hit.
void apply_proximal_gradient_descent_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t,
                                            Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["delta"] = uniform(rng, n, -1, 1);
  s["alpha"] = uniform(rng, 1, 1e-3, 0.5)[0];
  // l1 == 0 for the sizes 5, 17 and 1 << 20 (n % 7 is 5, 3, 4); l1 > 0 for 1, 1000 and 65543.
  const size_t h = n % 7;
  s["l1"] = h == 5 || h == 3 || h == 4 ? 0.0 : uniform(rng, 1, 0.01, 1)[0];
  s["l2"] = rng() % 3 == 0 ? 0.0 : uniform(rng, 1, 0.01, 1)[0];
}

const RegisterReference reg("apply_proximal_gradient_descent",
                            {apply_proximal_gradient_descent_inputs,
                             apply_proximal_gradient_descent_reference});

}  // namespace
}  // namespace opforge::testing

#include <doctest/doctest.h>

#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

// v = var - delta * alpha is exact for these values: 0.5, 0.25, -0.25, 0, -0.125, 0.0625. With
// l1 = 0.5 the threshold alpha * l1 is 0.25: v = +-0.25 lie on it (checked within the
// tolerance), v = 0, -0.125 and 0.0625 shrink to exactly 0 with a clear margin.
TEST_CASE("apply_proximal_gradient_descent: l1 == 0 and l1 > 0 branches, shrinkage to exact 0") {
  const std::vector<double> var = {0.75, 0.5, -0.5, 0.25, -0.25, 0.125};
  const std::vector<double> delta = {0.5, 0.5, -0.5, 0.5, -0.25, 0.125};
  for (double l1 : {0.0, 0.5}) {
    CAPTURE(l1);
    const Scalars s = {{"alpha", 0.5}, {"l1", l1}, {"l2", 0.25}};
    const Tensors in = {{"var", tile(var)}, {"delta", tile(delta)}};
    for (const auto& got : check_kernel("apply_proximal_gradient_descent", {}, in, s,
                                        apply_proximal_gradient_descent_reference)) {
      for (size_t i = 0; i < got.at("var").size(); ++i) {
        CAPTURE(i);
        const size_t k = i % var.size();
        if (k == 3 || (l1 > 0 && k >= 4)) CHECK(got.at("var")[i] == 0.0f);  // sign(0) = 0; shrunk
        if (k == 0) CHECK(got.at("var")[i] > 0.0f);
      }
    }
  }
}

}  // namespace
}  // namespace opforge::testing
