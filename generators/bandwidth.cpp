// Bandwidth kernels: s_k += g_0 + ... + g_{G-1} for every state s_k, in place. Same bytes
// read and written per element as an optimizer with S states and G gradients, next to no
// arithmetic: the ceiling an in-place update of that shape can reach on this machine. With
// R > 0 a read pass over R of the tensors comes first, as for ops with whole-tensor norms.
// With B > 0 the last B states are bytes (uint8, s_k += 1 where the gradient sum is positive):
// the traffic of an op with B states in 8 bits (dsl/quant8.h; their absmaxes, 4 bytes per
// block, are left out).
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>

#include "generators/ops.h"

namespace opforge::generators {

const dsl::OptimizerDecl& bandwidth(int states, int grads, int reduce_reads, int byte_states) {
  // states 0: a read pass only (the ceiling of a results-only op such as global_norm), whose
  // sum goes to a one-element result `total`.
  if (states < 0 || states > 8 || grads < 0 || grads > 4 || reduce_reads < 0 ||
      reduce_reads > states + grads || (states == 0 && reduce_reads == 0) || byte_states < 0 ||
      byte_states >= std::max(states, 1)) {
    throw std::invalid_argument(
        "bandwidth kernel: states must be 0..8 (0 only with a read pass), grads 0..4, "
        "reduce_reads 0..states+grads, byte states fewer than the states");
  }
  static std::mutex mu;
  static std::map<std::tuple<int, int, int, int>, std::unique_ptr<dsl::OptimizerDecl>> made;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = made[{states, grads, reduce_reads, byte_states}];
  if (!slot) {
    std::string name = "bandwidth_s" + std::to_string(states) + "_g" + std::to_string(grads);
    if (reduce_reads > 0) name += "_r" + std::to_string(reduce_reads);
    if (byte_states > 0) name += "_b" + std::to_string(byte_states);
    auto d = std::make_unique<dsl::OptimizerDecl>(name);
    d->kind("bandwidth")
        .summary("Read-modify-write bandwidth kernel (states=" + std::to_string(states) +
                 ", gradients=" + std::to_string(grads) +
                 (reduce_reads
                      ? ", after a read pass over " + std::to_string(reduce_reads) + " tensors)"
                      : std::string(")")))
        .reference("opforge benchmark ceiling")
        .formula(reduce_reads
                     ? "total = sum over the tensor of its first " + std::to_string(reduce_reads) +
                           " arguments (a read pass); s_k += sum_j g_j + total*1e-30"
                     : std::string("s_k += sum_j g_j for every state s_k"))
        .tolerance(2e-7, 1e-7);
    const int first_byte = states - byte_states;
    for (int s = 0; s < states; ++s) {
      d->state("s" + std::to_string(s), "state, in place", {},
               s >= first_byte && byte_states ? registry::DType::u8 : registry::DType::f32);
    }
    for (int g = 0; g < grads; ++g) d->grad("g" + std::to_string(g), "input");
    if (states == 0) d->result("total", "sum of the read pass");
    d->update([states, grads, reduce_reads, first_byte](const dsl::UpdateContext& c) {
      if (states == 0) {  // the read pass alone, summed over the whole call
        dsl::Expr read = 0.0f;
        for (int k = 0; k < reduce_reads; ++k) read = read + c["g" + std::to_string(k)];
        return dsl::Updates{{"total", c.sum_all(read)}};
      }
      dsl::Expr sum = 0.0f;
      for (int g = 0; g < grads; ++g) sum = sum + c["g" + std::to_string(g)];
      if (reduce_reads > 0) {
        // A read pass over the tensors, as a LAMB/LARS norm pass reads them; scaled so the
        // states do not grow over a benchmark's thousands of calls.
        dsl::Expr read = 0.0f;
        for (int k = 0; k < reduce_reads; ++k) {
          read = read +
                 (k < states ? c["s" + std::to_string(k)] : c["g" + std::to_string(k - states)]);
        }
        sum = sum + c.sum(read) * 1e-30f;
      }
      dsl::Updates u;
      for (int s = 0; s < states; ++s) {
        const std::string n = "s" + std::to_string(s);
        if (s >= first_byte && grads) {
          u.push_back({n, c[n] + Halide::cast<uint8_t>(dsl::select(sum > 0.f, 1.f, 0.f))});
          continue;
        }
        u.push_back({n, grads ? c[n] + sum : c[n] + 1.0f});
      }
      return u;
    });
    slot = std::move(d);
  }
  return *slot;
}

}  // namespace opforge::generators
