// Reference: TensorFlow ApplyRMSProp (training_ops.cc, tf_formulas.md 2.16):
//   ms += (grad^2 - ms) * (1 - rho)
//   mom = mom * momentum + (grad * lr) / sqrt(ms + epsilon)      (the new ms; eps inside sqrt)
//   var -= mom                                                    (the new mom)
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

void apply_rms_prop_reference(const Attrs&, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), rho = s.at("rho"), momentum = s.at("momentum"),
               eps = s.at("epsilon");
  std::vector<double>&var = t["var"], &ms = t["ms"], &mom = t["mom"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    ms[i] += (g * g - ms[i]) * (1 - rho);
    mom[i] = mom[i] * momentum + g * lr / std::sqrt(ms[i] + eps);
    var[i] -= mom[i];
  }
}

// ms >= 0 (a mean square); mom is a step in var's units. momentum is 0 (TensorFlow's default)
// for a third of the seeds.
void apply_rms_prop_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["ms"] = uniform(rng, n, 0, 1);
  t["mom"] = uniform(rng, n, -0.01, 0.01);
  t["grad"] = uniform(rng, n, -1, 1);
  s["lr"] = uniform(rng, 1, 1e-4, 1e-2)[0];
  s["rho"] = uniform(rng, 1, 0.8, 0.99)[0];
  s["momentum"] = rng() % 3 == 0 ? 0.0 : uniform(rng, 1, 0.5, 0.95)[0];
  s["epsilon"] = static_cast<float>(1e-7);
}

const RegisterReference reg("apply_rms_prop", {apply_rms_prop_inputs, apply_rms_prop_reference});

}  // namespace
}  // namespace opforge::testing
