// Reference: TensorFlow ApplyCenteredRMSProp (training_ops.cc, tf_formulas.md 2.17):
//   ms += (grad^2 - ms) * (1 - rho)
//   mg += (grad - mg) * (1 - rho)
//   mom = mom * momentum + (grad * lr) / sqrt((ms - mg^2) + epsilon)     (the new ms, mg)
//   var -= mom                                                           (the new mom)
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

void apply_centered_rms_prop_reference(const Attrs&, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), rho = s.at("rho"), momentum = s.at("momentum"),
               eps = s.at("epsilon");
  std::vector<double>&var = t["var"], &mg = t["mg"], &ms = t["ms"], &mom = t["mom"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    ms[i] += (g * g - ms[i]) * (1 - rho);
    mg[i] += (g - mg[i]) * (1 - rho);
    const double denom = (ms[i] - mg[i] * mg[i]) + eps;
    mom[i] = mom[i] * momentum + g * lr / std::sqrt(denom);
    var[i] -= mom[i];
  }
}

// ms - mg^2 is a variance estimate. If ms >= mg^2 before the step it stays so after it
// (ms' - mg'^2 = rho * (ms - mg^2) + rho * (1 - rho) * (grad - mg)^2), but when ms - mg^2 is
// tiny next to ms, fp32 rounding of ms and mg^2 can make the denominator ~0 or negative (sqrt ->
// NaN) where fp64 does not: an fp32 artifact, not the formula. So ms = mg^2 + s with the
// variance s in [0.1, 1] and |mg| <= 0.3 (mg^2 <= 0.09): ms / (ms - mg^2) <= 2 keeps the
// cancellation harmless. momentum is 0 (TensorFlow's default) for a third of the seeds.
void apply_centered_rms_prop_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t,
                                    Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["mg"] = uniform(rng, n, -0.3, 0.3);
  t["ms"] = uniform(rng, n, 0.1, 1);
  for (size_t i = 0; i < n; ++i) {
    t["ms"][i] = static_cast<float>(t["ms"][i] + t["mg"][i] * t["mg"][i]);
  }
  t["mom"] = uniform(rng, n, -0.01, 0.01);
  t["grad"] = uniform(rng, n, -1, 1);
  s["lr"] = uniform(rng, 1, 1e-4, 1e-2)[0];
  s["rho"] = uniform(rng, 1, 0.8, 0.99)[0];
  s["momentum"] = rng() % 3 == 0 ? 0.0 : uniform(rng, 1, 0.5, 0.95)[0];
  s["epsilon"] = static_cast<float>(1e-7);
}

const RegisterReference reg("apply_centered_rms_prop",
                            {apply_centered_rms_prop_inputs, apply_centered_rms_prop_reference});

}  // namespace
}  // namespace opforge::testing
