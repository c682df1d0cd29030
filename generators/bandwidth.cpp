// Bandwidth kernels: s_k += g_0 + ... + g_{G-1} for every state s_k, in place. Same bytes
// read and written per element as an optimizer with S states and G gradients, next to no
// arithmetic: the ceiling an in-place update of that shape can reach on this machine.
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "generators/ops.h"

namespace opforge::generators {

const dsl::OptimizerDecl& bandwidth(int states, int grads) {
  if (states < 1 || states > 8 || grads < 0 || grads > 4) {
    throw std::invalid_argument("bandwidth kernel: states must be 1..8 and grads 0..4");
  }
  static std::mutex mu;
  static std::map<std::pair<int, int>, std::unique_ptr<dsl::OptimizerDecl>> made;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = made[{states, grads}];
  if (!slot) {
    const std::string name = "bandwidth_s" + std::to_string(states) + "_g" + std::to_string(grads);
    auto d = std::make_unique<dsl::OptimizerDecl>(name);
    d->kind("bandwidth")
        .summary("Read-modify-write bandwidth kernel (states=" + std::to_string(states) +
                 ", gradients=" + std::to_string(grads) + ")")
        .reference("opforge benchmark ceiling")
        .formula("s_k += sum_j g_j for every state s_k")
        .tolerance(2e-7, 1e-7);
    for (int s = 0; s < states; ++s) d->state("s" + std::to_string(s), "state, in place");
    for (int g = 0; g < grads; ++g) d->grad("g" + std::to_string(g), "input");
    d->update([states, grads](const dsl::UpdateContext& c) {
      dsl::Expr sum = 0.0f;
      for (int g = 0; g < grads; ++g) sum = sum + c["g" + std::to_string(g)];
      dsl::Updates u;
      for (int s = 0; s < states; ++s) {
        const std::string n = "s" + std::to_string(s);
        u.push_back({n, grads ? c[n] + sum : c[n] + 1.0f});
      }
      return u;
    });
    slot = std::move(d);
  }
  return *slot;
}

}  // namespace opforge::generators
