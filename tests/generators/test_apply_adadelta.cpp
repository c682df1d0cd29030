// Reference: TensorFlow ApplyAdadelta (training_ops.cc, tf_formulas.md 2.3). accum is updated
// first; both evaluations of `update` read the NEW accum and the OLD accum_update:
//   accum = accum * rho + grad^2 * (1 - rho)
//   update = sqrt(accum_update + epsilon) * rsqrt(accum + epsilon) * grad
//   var -= update * lr
//   accum_update = accum_update * rho + update^2 * (1 - rho)
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

void apply_adadelta_reference(const Attrs&, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), rho = s.at("rho"), eps = s.at("epsilon");
  std::vector<double>&var = t["var"], &accum = t["accum"], &accum_update = t["accum_update"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    accum[i] = accum[i] * rho + g * g * (1 - rho);
    const double update = std::sqrt(accum_update[i] + eps) * (1 / std::sqrt(accum[i] + eps)) * g;
    var[i] -= update * lr;
    accum_update[i] = accum_update[i] * rho + update * update * (1 - rho);
  }
}

// Accumulators are non-negative (they are decayed sums of squares); epsilon keeps both roots
// away from 0. lr up to 1 (Adadelta's customary lr is 1.0).
void apply_adadelta_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["accum"] = uniform(rng, n, 0, 1);
  t["accum_update"] = uniform(rng, n, 0, 0.1);
  t["grad"] = uniform(rng, n, -1, 1);
  s["lr"] = uniform(rng, 1, 1e-3, 1)[0];
  s["rho"] = uniform(rng, 1, 0.9, 0.99)[0];
  s["epsilon"] = static_cast<float>(1e-6);
}

const RegisterReference reg("apply_adadelta", {apply_adadelta_inputs, apply_adadelta_reference});

}  // namespace
}  // namespace opforge::testing
