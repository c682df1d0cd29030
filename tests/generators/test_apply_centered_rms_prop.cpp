// Reference: TensorFlow ApplyCenteredRMSProp (training_ops.cc, tf_formulas.md 2.17):
//   ms += (grad^2 - ms) * (1 - rho)
//   mg += (grad - mg) * (1 - rho)
//   mom = mom * momentum + (grad * lr) / sqrt((ms - mg^2) + epsilon)     (the new ms, mg)
//   var -= mom                                                           (the new mom)
// epsilon_mode=torch: torch.optim.RMSprop centered=True (1.13, _single_tensor_rmsprop,
// alpha = rho), with mom its momentum_buffer (momentum = 0 is torch's momentum-free update):
//   square_avg = alpha * square_avg + (1 - alpha) * grad^2
//   grad_avg = alpha * grad_avg + (1 - alpha) * grad
//   avg = sqrt(square_avg - grad_avg^2) + eps                            (eps outside sqrt)
//   buf = momentum * buf + grad / avg
//   p -= lr * buf
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

void apply_centered_rms_prop_reference(const Attrs& a, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), rho = s.at("rho"), momentum = s.at("momentum"),
               eps = s.at("epsilon");
  const bool torch = a.at("epsilon_mode") == "torch";
  std::vector<double>&var = t["var"], &mg = t["mg"], &ms = t["ms"], &mom = t["mom"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    if (torch) {
      ms[i] = rho * ms[i] + (1 - rho) * g * g;
      mg[i] = rho * mg[i] + (1 - rho) * g;
      mom[i] = momentum * mom[i] + g / (std::sqrt(ms[i] - mg[i] * mg[i]) + eps);
      var[i] -= lr * mom[i];
      continue;
    }
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
// cancellation harmless. momentum is 0 (the default of both) for a third of the seeds. torch:
// mom is a buffer of grad/avg (avg >= sqrt(0.1) here), and epsilon (1e-3..1e-2) large enough
// that putting it inside the sqrt instead would fail.
void apply_centered_rms_prop_inputs(std::mt19937& rng, size_t n, const Attrs& a, Tensors& t,
                                    Scalars& s) {
  const bool torch = a.at("epsilon_mode") == "torch";
  t["var"] = uniform(rng, n, -1, 1);
  t["mg"] = uniform(rng, n, -0.3, 0.3);
  t["ms"] = uniform(rng, n, 0.1, 1);
  for (size_t i = 0; i < n; ++i) {
    t["ms"][i] = static_cast<float>(t["ms"][i] + t["mg"][i] * t["mg"][i]);
  }
  t["mom"] = torch ? uniform(rng, n, -1, 1) : uniform(rng, n, -0.01, 0.01);
  t["grad"] = uniform(rng, n, -1, 1);
  s["lr"] = uniform(rng, 1, 1e-4, 1e-2)[0];
  s["rho"] = uniform(rng, 1, 0.8, 0.99)[0];
  s["momentum"] = rng() % 3 == 0 ? 0.0 : uniform(rng, 1, 0.5, 0.95)[0];
  s["epsilon"] =
      torch ? static_cast<float>(uniform(rng, 1, 1e-3, 1e-2)[0]) : static_cast<float>(1e-7);
}

const RegisterReference reg("apply_centered_rms_prop",
                            {apply_centered_rms_prop_inputs, apply_centered_rms_prop_reference});

}  // namespace
}  // namespace opforge::testing
