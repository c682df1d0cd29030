// Reference: TensorFlow ApplyAdagradDA (training_ops.cc, tf_formulas.md 2.7). The old var is
// not read (closed form); gs = float(global_step) (int64 -> float in TensorFlow, exact here):
//   gradient_accumulator += grad;  gradient_squared_accumulator += grad^2
//   l1 > 0:  var = ((lr * -1) * sign(ga)) * max(|ga| - gs * l1, 0) / (l2 * (gs * lr) + sqrt(gga))
//   else:    var = ((lr * ga) * -1) / (l2 * (gs * lr) + sqrt(gga))
// with ga, gga the NEW accumulators. The branch is on the scalar l1 (strict >); sign(0) = 0.
#include <algorithm>
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

double sign(double x) {
  return (x > 0) - (x < 0);
}

void apply_adagrad_da_reference(const Attrs&, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), l1 = s.at("l1"), l2 = s.at("l2");
  const double gs = static_cast<float>(s.at("global_step"));
  std::vector<double>&var = t["var"], &ga = t["gradient_accumulator"],
  &gga = t["gradient_squared_accumulator"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    ga[i] += g;
    gga[i] += g * g;
    const double denom = l2 * (gs * lr) + std::sqrt(gga[i]);
    if (l1 > 0) {
      var[i] = lr * -1 * sign(ga[i]) * std::max(std::fabs(ga[i]) - gs * l1, 0.0) / denom;
    } else {
      var[i] = lr * ga[i] * -1 / denom;
    }
  }
}

// State as after global_step steps of gradients in [-1, 1]: |ga| up to 2 * gs * l1 + sqrt(gs)
// (so with l1 > 0 about half the elements are below the threshold gs * l1 and shrink to 0),
// gga = 0.1 (the initial accumulator) + gs * mean(g^2). That keeps sqrt(gga) growing with gs
// like |ga|: var near the threshold is lr * (|ga| - gs * l1) / sqrt(gga), whose absolute fp32
// error, lr * ulp(ga) / sqrt(gga), then stays far below the tolerance; an unrealistic gga of 0.1
// at gs = 1000 would make it ~1e-6. l1 is 0 for half the sizes.
void apply_adagrad_da_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
  const int gs = std::uniform_int_distribution<int>(1, 1000)(rng);
  // l1 == 0 for the sizes 5, 17 and 1 << 20 (n % 7 is 5, 3, 4); l1 > 0 for 1, 1000 and 65543.
  const size_t h = n % 7;
  const double l1 = h == 5 || h == 3 || h == 4 ? 0.0 : uniform(rng, 1, 1e-3, 1e-2)[0];
  const double a = 2 * gs * l1 + std::sqrt(gs);
  t["var"] = uniform(rng, n, -1, 1);
  t["gradient_accumulator"] = uniform(rng, n, -a, a);
  t["gradient_squared_accumulator"] = uniform(rng, n, 0.1 + 0.05 * gs, 0.1 + 0.5 * gs);
  t["grad"] = uniform(rng, n, -1, 1);
  s["global_step"] = gs;
  s["lr"] = uniform(rng, 1, 1e-3, 0.1)[0];
  s["l1"] = l1;
  s["l2"] = rng() % 3 == 0 ? 0.0 : uniform(rng, 1, 1e-3, 0.1)[0];
}

const RegisterReference reg("apply_adagrad_da",
                            {apply_adagrad_da_inputs, apply_adagrad_da_reference});

}  // namespace
}  // namespace opforge::testing

#include <doctest/doctest.h>

#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

// global_step 10, l1 0.25: threshold gs * l1 = 2.5. New ga: 1.5 (below: 0 with l1 > 0), -4
// (above), 0 (sign(0) = 0: 0 in both branches), 2.5 (on the threshold), 5 (above).
TEST_CASE("apply_adagrad_da: l1 == 0 and l1 > 0 branches, int64 global_step") {
  const std::vector<double> ga = {1, -3, 0, 2.5, 4.5};
  const std::vector<double> grad = {0.5, -1, 0, 0, 0.5};
  const std::vector<double> gga = {0.75, 3, 0.5, 1, 8.75};
  for (double l1 : {0.0, 0.25}) {
    CAPTURE(l1);
    const Scalars s = {{"lr", 0.5}, {"l1", l1}, {"l2", 0.125}, {"global_step", 10}};
    const Tensors in = {{"var", tile({0.5, -0.25, 1, -1, 0.125})},
                        {"gradient_accumulator", tile(ga)},
                        {"gradient_squared_accumulator", tile(gga)},
                        {"grad", tile(grad)}};
    for (const auto& got :
         check_kernel("apply_adagrad_da", {}, in, s, apply_adagrad_da_reference)) {
      for (size_t i = 0; i < got.at("var").size(); ++i) {
        CAPTURE(i);
        const size_t k = i % ga.size();
        if (k == 2 || (l1 > 0 && k == 0)) CHECK(got.at("var")[i] == 0.0f);
        if (k == 1) CHECK(got.at("var")[i] > 0.0f);  // var has the sign of -ga
        if (k == 4) CHECK(got.at("var")[i] < 0.0f);
      }
    }
  }
}

}  // namespace
}  // namespace opforge::testing
