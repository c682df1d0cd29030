// Reference: TensorFlow ApplyAdam:
//   lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
//   m += (grad - m) * (1 - beta1);  v += (grad^2 - v) * (1 - beta2)
//   var -= lr_t * m / (sqrt(v) + epsilon)
//   use_nesterov: var -= lr_t * (grad * (1 - beta1) + beta1 * m) / (sqrt(v) + epsilon)
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

const RegisterReference reg("apply_adam",
                            {[](std::mt19937& rng, size_t n, Tensors& t, Scalars& s) {
                               t["var"] = uniform(rng, n, -1, 1);
                               t["m"] = uniform(rng, n, -0.1, 0.1);
                               t["v"] = uniform(rng, n, 0, 0.01);
                               t["grad"] = uniform(rng, n, -1, 1);
                               const double beta1 = uniform(rng, 1, 0.8, 0.95)[0],
                                            beta2 = uniform(rng, 1, 0.99, 0.9999)[0];
                               const int step = std::uniform_int_distribution<int>(1, 1000)(rng);
                               s["beta1"] = beta1;
                               s["beta2"] = beta2;
                               s["beta1_power"] = static_cast<float>(std::pow(beta1, step));
                               s["beta2_power"] = static_cast<float>(std::pow(beta2, step));
                               s["lr"] = uniform(rng, 1, 1e-4, 1e-2)[0];
                               s["epsilon"] = static_cast<float>(1e-7);
                             },
                             [](const Attrs& a, const Scalars& s, Tensors& t) {
                               const double b1 = s.at("beta1"), b2 = s.at("beta2"),
                                            eps = s.at("epsilon");
                               const double lr_t = s.at("lr") * std::sqrt(1 - s.at("beta2_power")) /
                                                   (1 - s.at("beta1_power"));
                               const bool nesterov = a.at("use_nesterov") == "true";
                               for (size_t i = 0; i < t["var"].size(); ++i) {
                                 const double g = t["grad"][i];
                                 double& m = t["m"][i];
                                 double& v = t["v"][i];
                                 m += (g - m) * (1 - b1);
                                 v += (g * g - v) * (1 - b2);
                                 const double num = nesterov ? g * (1 - b1) + b1 * m : m;
                                 t["var"][i] -= lr_t * num / (std::sqrt(v) + eps);
                               }
                             }});

}  // namespace
}  // namespace opforge::testing
