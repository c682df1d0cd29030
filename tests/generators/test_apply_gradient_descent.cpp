// Reference: TensorFlow ApplyGradientDescent: var -= alpha * delta.
#include "generators/reference.h"

namespace opforge::testing {
namespace {

const RegisterReference reg("apply_gradient_descent",
                            {[](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
                               t["var"] = uniform(rng, n, -1, 1);
                               t["delta"] = uniform(rng, n, -1, 1);
                               s["alpha"] = uniform(rng, 1, 1e-3, 0.5)[0];
                             },
                             [](const Attrs&, const Scalars& s, Tensors& t) {
                               for (size_t i = 0; i < t["var"].size(); ++i)
                                 t["var"][i] -= s.at("alpha") * t["delta"][i];
                             }});

}  // namespace
}  // namespace opforge::testing
