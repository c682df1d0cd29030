// Reference, epsilon_mode=tf: TensorFlow ApplyRMSProp (training_ops.cc, tf_formulas.md 2.16):
//   ms += (grad^2 - ms) * (1 - rho)
//   mom = mom * momentum + (grad * lr) / sqrt(ms + epsilon)      (the new ms; eps inside sqrt)
//   var -= mom                                                    (the new mom)
// epsilon_mode=torch: torch.optim.RMSprop (1.13, _single_tensor_rmsprop, alpha = rho), with mom
// its momentum_buffer (momentum = 0: torch's p.addcdiv_(grad, avg, value=-lr) is the same):
//   square_avg = alpha * square_avg + (1 - alpha) * grad^2
//   avg = sqrt(square_avg) + eps                                  (eps outside sqrt)
//   buf = momentum * buf + grad / avg
//   p -= lr * buf
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "generators/op_table.h"
#include "generators/reference.h"

namespace opforge::testing {
namespace {

void apply_rms_prop_reference(const Attrs& a, const Scalars& s, Tensors& t) {
  const double lr = s.at("lr"), rho = s.at("rho"), momentum = s.at("momentum"),
               eps = s.at("epsilon");
  const bool torch = a.at("epsilon_mode") == "torch";
  std::vector<double>&var = t["var"], &ms = t["ms"], &mom = t["mom"];
  const std::vector<double>& grad = t["grad"];
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = grad[i];
    if (torch) {
      ms[i] = rho * ms[i] + (1 - rho) * g * g;
      mom[i] = momentum * mom[i] + g / (std::sqrt(ms[i]) + eps);
      var[i] -= lr * mom[i];
      continue;
    }
    ms[i] += (g * g - ms[i]) * (1 - rho);
    mom[i] = mom[i] * momentum + g * lr / std::sqrt(ms[i] + eps);
    var[i] -= mom[i];
  }
}

// ms >= 0 (a mean square); tf: mom is a step in var's units, torch: a buffer of grad/avg,
// O(1) when ms is the mean square of the same gradients (here ms >= 0.25: |grad/avg| <= 2).
// momentum is 0 (the default of both) for a third of the seeds. torch's epsilon is large enough
// (1e-3..1e-2) that putting it inside the sqrt instead would fail.
void apply_rms_prop_inputs(std::mt19937& rng, size_t n, const Attrs& a, Tensors& t, Scalars& s) {
  const bool torch = a.at("epsilon_mode") == "torch";
  t["var"] = uniform(rng, n, -1, 1);
  t["ms"] = uniform(rng, n, torch ? 0.25 : 0, 1);
  t["mom"] = torch ? uniform(rng, n, -1, 1) : uniform(rng, n, -0.01, 0.01);
  t["grad"] = uniform(rng, n, -1, 1);
  s["lr"] = uniform(rng, 1, 1e-4, 1e-2)[0];
  s["rho"] = uniform(rng, 1, 0.8, 0.99)[0];
  s["momentum"] = rng() % 3 == 0 ? 0.0 : uniform(rng, 1, 0.5, 0.95)[0];
  s["epsilon"] =
      torch ? static_cast<float>(uniform(rng, 1, 1e-3, 1e-2)[0]) : static_cast<float>(1e-7);
}

const RegisterReference reg("apply_rms_prop", {apply_rms_prop_inputs, apply_rms_prop_reference});

// epsilon_mode came after these ops shipped: the tf variants keep their ids (and
// apply_rms_prop's Adams2019 schedule file its name); only torch is named.
TEST_CASE("epsilon_mode is named in variant ids only off its default (tf)") {
  for (const std::string op : {"apply_rms_prop", "apply_centered_rms_prop", "apply_ada_max"}) {
    const dsl::OpDecl& d = generators::find_decl(op);
    CHECK(dsl::resolve(d).variant_id("avx2") == op + "__f32__avx2");
    CHECK(dsl::resolve(d, {{"epsilon_mode", "torch"}}).variant_id("avx2") ==
          op + "__epsilon_mode_torch__f32__avx2");
  }
  CHECK_THROWS_WITH_AS(dsl::OptimizerDecl("x").named_in_id_off_default("nope"),
                       "op 'x': named_in_id_off_default: no attr 'nope' (declare it first)",
                       std::invalid_argument);
}

}  // namespace
}  // namespace opforge::testing
