#include "generators/quant8_reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace opforge::testing {

std::vector<double> quant_map_values(const std::string& name) {
  std::vector<double> v;
  const bool is_signed = name.size() > 7 && name.substr(name.size() - 7) == "_signed";
  if (name == "linear_signed" || name == "linear_unsigned") {
    for (int c = 0; c < 256; ++c)
      v.push_back(is_signed ? (c == 255 ? 1.0 : (c - 127) / 127.0) : c / 255.0);
  } else if (name == "dynamic_signed" || name == "dynamic_unsigned") {
    for (int i = 0; i < 7; ++i) {
      const int per = is_signed ? 1 << i : 1 << (i + 1);
      for (int j = 0; j < per; ++j) {
        const double x = std::pow(10.0, i - 6) * (0.1 + 0.9 * (j + 0.5) / per);
        v.push_back(x);
        if (is_signed) v.push_back(-x);
      }
    }
    v.push_back(0);
    v.push_back(1);
    std::sort(v.begin(), v.end());
  } else {
    throw std::invalid_argument("unknown quant_map '" + name + "'");
  }
  for (double& x : v) x = static_cast<float>(x);
  return v;
}

int nearest_code(const std::vector<double>& map, double y) {
  int best = 0;
  for (int c = 1; c < static_cast<int>(map.size()); ++c) {
    if (std::fabs(map[c] - y) < std::fabs(map[best] - y)) best = c;
  }
  return best;
}

Quantized quantize_blockwise(const std::vector<double>& map, const std::vector<double>& x, int B) {
  Quantized q;
  const size_t n = x.size(), blocks = (n + B - 1) / B;
  q.codes.resize(n);
  q.absmax.resize(blocks);
  const int zero = nearest_code(map, 0.0);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t lo = b * B, hi = std::min(n, lo + B);
    double a = 0;
    bool finite = true;
    for (size_t i = lo; i < hi; ++i) {
      finite = finite && std::isfinite(x[i]);
      a = std::max(a, std::fabs(x[i]));
    }
    // The kernel divides by its fp32 absmax: the reference quantizes against the same value.
    const float a32 = finite ? static_cast<float>(a) : std::nanf("");
    q.absmax[b] = a32;
    for (size_t i = lo; i < hi; ++i) {
      q.codes[i] = static_cast<uint8_t>(a32 > 0 ? nearest_code(map, x[i] / a32) : zero);
    }
  }
  return q;
}

std::vector<double> dequantize_blockwise(const std::vector<double>& map, const Quantized& q,
                                         int B) {
  std::vector<double> x(q.codes.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = map[q.codes[i]] * q.absmax[i / B];
  return x;
}

bool code_within(const std::vector<double>& map, double y, int got, double slack) {
  const int best = nearest_code(map, y);
  if (got == best || map[got] == map[best]) return true;
  return std::fabs(map[got] - y) - std::fabs(map[best] - y) <= 2 * slack;
}

}  // namespace opforge::testing
