// Reference: TensorFlow ApplyMomentum:
//   accum = accum * momentum + grad
//   var -= lr * accum                                  (use_nesterov = false)
//   var -= grad * lr + accum * momentum * lr           (use_nesterov = true)
#include "generators/reference.h"

namespace opforge::testing {
namespace {

const RegisterReference reg("apply_momentum",
                            {[](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
                               t["var"] = uniform(rng, n, -1, 1);
                               t["accum"] = uniform(rng, n, -1, 1);
                               t["grad"] = uniform(rng, n, -1, 1);
                               s["lr"] = uniform(rng, 1, 1e-3, 0.1)[0];
                               s["momentum"] = uniform(rng, 1, 0.5, 0.99)[0];
                             },
                             [](const Attrs& a, const Scalars& s, Tensors& t) {
                               const double lr = s.at("lr"), mom = s.at("momentum");
                               const bool nesterov = a.at("use_nesterov") == "true";
                               for (size_t i = 0; i < t["var"].size(); ++i) {
                                 double& accum = t["accum"][i];
                                 const double g = t["grad"][i];
                                 accum = accum * mom + g;
                                 t["var"][i] -= nesterov ? g * lr + accum * mom * lr : lr * accum;
                               }
                             }});

}  // namespace
}  // namespace opforge::testing
