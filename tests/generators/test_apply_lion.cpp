// Reference: Lion (Chen et al. 2023; google/automl lion_tf2.py / lion_pytorch.py):
//   c = beta1 * m + (1 - beta1) * grad
//   var -= lr * (sign(c) + weight_decay * var_old)          (sign(0) = 0)
//   m = beta2 * m + (1 - beta2) * grad
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

double sign(double x) {
  return (x > 0) - (x < 0);
}

const RegisterReference reg("apply_lion",
                            {[](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
                               t["var"] = uniform(rng, n, -1, 1);
                               std::vector<double> m = uniform(rng, n, -0.1, 0.1),
                                                   g = uniform(rng, n, -1, 1);
                               const double beta1 = uniform(rng, 1, 0.8, 0.95)[0];
                               for (size_t i = 0; i < n; ++i) {
                                 // Exact zeros: c == 0 (sign 0), and c from one term only.
                                 if (i % 7 == 3) m[i] = g[i] = 0;
                                 if (i % 11 == 5) g[i] = 0;
                                 if (i % 13 == 6) m[i] = 0;
                                 // Keep c's sign unambiguous in fp32: away from cancellation unless
                                 // exactly 0.
                                 const double a = beta1 * m[i], b = (1 - beta1) * g[i];
                                 if ((a != 0 || b != 0) &&
                                     std::fabs(a + b) < 1e-3 * (std::fabs(a) + std::fabs(b))) {
                                   g[i] = static_cast<float>(g[i] + (g[i] >= 0 ? 0.25 : -0.25));
                                 }
                               }
                               t["m"] = m;
                               t["grad"] = g;
                               s["lr"] = uniform(rng, 1, 1e-4, 1e-2)[0];
                               s["beta1"] = beta1;
                               s["beta2"] = uniform(rng, 1, 0.9, 0.999)[0];
                               s["weight_decay"] = uniform(rng, 1, 0, 0.1)[0];
                             },
                             [](const Attrs&, const Scalars& s, Tensors& t) {
                               const double lr = s.at("lr"), b1 = s.at("beta1"), b2 = s.at("beta2"),
                                            wd = s.at("weight_decay");
                               std::vector<double>& var = t.at("var");
                               std::vector<double>& m = t.at("m");
                               const std::vector<double>& grad = t.at("grad");
                               for (size_t i = 0; i < var.size(); ++i) {
                                 const double c = b1 * m[i] + (1 - b1) * grad[i];
                                 var[i] -= lr * (sign(c) + wd * var[i]);
                                 m[i] = b2 * m[i] + (1 - b2) * grad[i];
                               }
                             }});

}  // namespace
}  // namespace opforge::testing
