// Reference: TensorFlow ApplyAdagrad (training_ops.cc, tf_formulas.md 2.4):
//   update_slots: accum += grad^2
//   var -= grad * lr * rsqrt(accum)       (the new accum; the unchanged one without update_slots)
// No epsilon: accum must stay positive.
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

void apply_adagrad_reference(const Attrs& a, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr");
  const bool update_slots = a.at("update_slots") == "true";
  std::vector<double>&var = t["var"], &accum = t["accum"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    if (update_slots) accum[i] += g * g;
    var[i] -= g * lr * (1 / std::sqrt(accum[i]));
  }
}

// accum >= 0.1, TensorFlow's initial_accumulator_value: there is no epsilon, and rsqrt(accum)
// of a tiny accum is ill-conditioned in fp32 for no benefit to the test.
void apply_adagrad_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["accum"] = uniform(rng, n, 0.1, 2);
  t["grad"] = uniform(rng, n, -1, 1);
  s["lr"] = uniform(rng, 1, 1e-3, 0.1)[0];
}

const RegisterReference reg("apply_adagrad", {apply_adagrad_inputs, apply_adagrad_reference});

}  // namespace
}  // namespace opforge::testing

#include <doctest/doctest.h>

#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

TEST_CASE("apply_adagrad: update_slots=false leaves accum bit-identical and uses it as is") {
  const size_t n = 37;  // vector body and tail
  std::mt19937 rng(7);
  const Tensors in = {{"var", uniform(rng, n, -1, 1)},
                      {"accum", uniform(rng, n, 0.1, 2)},
                      {"grad", uniform(rng, n, -1, 1)}};
  const Scalars s = {{"lr", 0.01}};
  for (const std::string slots : {"false", "true"}) {
    CAPTURE(slots);
    for (const auto& got :
         check_kernel("apply_adagrad", {{"update_slots", slots}}, in, s, apply_adagrad_reference)) {
      for (size_t i = 0; i < n; ++i) {
        CAPTURE(i);
        const float before = static_cast<float>(in.at("accum")[i]);
        if (slots == "false") {
          CHECK(got.at("accum")[i] == before);
        } else if (std::fabs(in.at("grad")[i]) > 1e-2) {
          CHECK(got.at("accum")[i] != before);
        }
      }
    }
  }
}

}  // namespace
}  // namespace opforge::testing
