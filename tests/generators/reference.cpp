#include "generators/reference.h"

#include <cstdio>

namespace opforge::testing {

std::map<std::string, Reference>& references() {
  static std::map<std::string, Reference> m;
  return m;
}

std::vector<double> uniform(std::mt19937& rng, size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = static_cast<float>(u(rng));  // representable in fp32
  return v;
}

const Reference* find_reference(const std::string& op) {
  auto it = references().find(op);
  if (it != references().end()) return &it->second;
  int s = 0, g = 0;
  if (std::sscanf(op.c_str(), "bandwidth_s%d_g%d", &s, &g) != 2) return nullptr;
  static std::map<std::string, Reference> bw;
  Reference& r = bw[op];
  r.inputs = [s, g](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars&) {
    for (int k = 0; k < s; ++k) t["s" + std::to_string(k)] = uniform(rng, n, -1, 1);
    for (int k = 0; k < g; ++k) t["g" + std::to_string(k)] = uniform(rng, n, -1, 1);
  };
  r.update = [s, g](const Attrs&, const Scalars&, Tensors& t) {
    const size_t n = t["s0"].size();
    for (size_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int k = 0; k < g; ++k) sum += t["g" + std::to_string(k)][i];
      for (int k = 0; k < s; ++k) t["s" + std::to_string(k)][i] += g ? sum : 1.0;
    }
  };
  return &r;
}

}  // namespace opforge::testing
