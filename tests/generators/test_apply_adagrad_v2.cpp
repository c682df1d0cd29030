// Reference: TensorFlow ApplyAdagradV2 (training_ops.cc, tf_formulas.md 2.5):
//   update_slots: accum += grad^2
//   var -= grad * lr / (sqrt(accum) + epsilon)      (epsilon outside the root; a true divide)
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

void apply_adagrad_v2_reference(const Attrs& a, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), eps = s.at("epsilon");
  const bool update_slots = a.at("update_slots") == "true";
  std::vector<double>&var = t["var"], &accum = t["accum"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    if (update_slots) accum[i] += g * g;
    var[i] -= g * lr / (std::sqrt(accum[i]) + eps);
  }
}

// accum in [0.1, 2] (TensorFlow's initial_accumulator_value is 0.1), so a step is at most
// lr * |grad| / sqrt(0.1): a smaller accum makes steps of order |var|, and var - step then
// cancels to a result whose fp32 error is an ulp of var, not of the result (an artifact of the
// domain, not of the kernel). Every 17th accum is exactly 0 (Keras allows an initial 0), where
// epsilon alone is the denominator without update_slots (a step of grad * lr / epsilon: large,
// exact in relative terms) or the denominator is |grad| + epsilon with update_slots; every
// 34th grad is also 0 there (0 / epsilon: var unchanged).
void apply_adagrad_v2_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["accum"] = uniform(rng, n, 0.1, 2);
  t["grad"] = uniform(rng, n, -1, 1);
  for (size_t i = 0; i < n; i += 17) t["accum"][i] = 0;
  for (size_t i = 0; i < n; i += 34) t["grad"][i] = 0;
  s["lr"] = uniform(rng, 1, 1e-3, 0.1)[0];
  s["epsilon"] = static_cast<float>(1e-7);
}

const RegisterReference reg("apply_adagrad_v2",
                            {apply_adagrad_v2_inputs, apply_adagrad_v2_reference});

}  // namespace
}  // namespace opforge::testing

#include <doctest/doctest.h>

#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

TEST_CASE("apply_adagrad_v2: update_slots=false leaves accum bit-identical; accum == 0 is finite") {
  const size_t n = 37;  // vector body and tail
  std::mt19937 rng(11);
  Tensors in = {{"var", uniform(rng, n, -1, 1)},
                {"accum", uniform(rng, n, 0.1, 2)},
                {"grad", uniform(rng, n, -1, 1)}};
  in["accum"][5] = 0;  // denominator epsilon alone (no update_slots) or |grad| + epsilon
  in["accum"][6] = 0;
  in["grad"][6] = 0;  // 0 / epsilon: var unchanged
  const Scalars s = {{"lr", 0.01}, {"epsilon", static_cast<float>(1e-7)}};
  for (const std::string slots : {"false", "true"}) {
    CAPTURE(slots);
    for (const auto& got : check_kernel("apply_adagrad_v2", {{"update_slots", slots}}, in, s,
                                        apply_adagrad_v2_reference)) {
      CHECK(got.at("var")[6] == static_cast<float>(in.at("var")[6]));
      if (slots == "false") {
        for (size_t i = 0; i < n; ++i) {
          CAPTURE(i);
          CHECK(got.at("accum")[i] == static_cast<float>(in.at("accum")[i]));
        }
      }
    }
  }
}

}  // namespace
}  // namespace opforge::testing
