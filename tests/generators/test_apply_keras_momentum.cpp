// Reference: TensorFlow ResourceApplyKerasMomentum (training_ops.cc, tf_formulas.md 2.12):
//   accum = accum * momentum - grad * lr
//   var += accum                                   (use_nesterov = false)
//   var += accum * momentum - grad * lr            (use_nesterov = true; the new accum)
#include "generators/reference.h"

namespace opforge::testing {
namespace {

void apply_keras_momentum_reference(const Attrs& a, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), mom = s.at("momentum");
  const bool nesterov = a.at("use_nesterov") == "true";
  std::vector<double>&var = t["var"], &accum = t["accum"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    accum[i] = accum[i] * mom - g * lr;
    var[i] += nesterov ? accum[i] * mom - g * lr : accum[i];
  }
}

// accum is a velocity in var's units (lr * grad / (1 - momentum) at most).
void apply_keras_momentum_inputs(std::mt19937& rng, size_t n, const Attrs&, Tensors& t,
                                 Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["accum"] = uniform(rng, n, -0.1, 0.1);
  t["grad"] = uniform(rng, n, -1, 1);
  s["lr"] = uniform(rng, 1, 1e-3, 0.1)[0];
  s["momentum"] = uniform(rng, 1, 0.5, 0.99)[0];
}

const RegisterReference reg("apply_keras_momentum",
                            {apply_keras_momentum_inputs, apply_keras_momentum_reference});

}  // namespace
}  // namespace opforge::testing
