// Reference: sign-sqrt descent:
//   var -= lr * sign(grad) * sqrt(|grad|)                    (sign(0) = 0)
#include <cmath>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

const RegisterReference reg("apply_sign_sqrt",
                            {[](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
                               t["var"] = uniform(rng, n, -1, 1);
                               std::vector<double> g = uniform(rng, n, -4, 4);
                               for (size_t i = 0; i < n; ++i) {
                                 if (i % 7 == 3) g[i] = 0;  // sign(0) = 0
                                 if (i % 17 == 9)
                                   g[i] = static_cast<float>(g[i] * 1e-30);  // tiny (normal) values
                               }
                               t["grad"] = g;
                               s["lr"] = uniform(rng, 1, 1e-3, 0.1)[0];
                             },
                             [](const Attrs&, const Scalars& s, Tensors& t) {
                               const double lr = s.at("lr");
                               std::vector<double>& var = t.at("var");
                               const std::vector<double>& grad = t.at("grad");
                               for (size_t i = 0; i < var.size(); ++i) {
                                 const double g = grad[i];
                                 const double sg = (g > 0) - (g < 0);
                                 var[i] -= lr * sg * std::sqrt(std::fabs(g));
                               }
                             }});

}  // namespace
}  // namespace opforge::testing
