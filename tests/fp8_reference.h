// Reference OCP FP8 (OFP8 rev. 1.0) for the tests, written from the spec's value formula,
// independent of the kernels' integer decoding (dsl/fp8.h) and of the tools' codec
// (opforge/fp8.h):
//   value = (-1)^S * 2^(E - bias) * (1 + M / 2^m)   for exponent field E > 0,
//           (-1)^S * 2^(1 - bias) * (M / 2^m)       for E = 0 (zero and subnormals);
//   E4M3 (m = 3, bias 7): S.1111.111 is NaN, no infinities (S.1111.110 = 448 is the largest);
//   E5M2 (m = 2, bias 15): S.11111.00 is +-inf, S.11111.{01,10,11} NaN.
// Encoding picks the nearest finite value from the table of all of them (ties to the even
// code, i.e. the even mantissa); beyond the largest finite value it saturates; +-inf becomes
// E5M2's infinity or E4M3's NaN; NaN becomes S.1111111.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace opforge::testing {

struct Fp8Spec {
  int mantissa, bias;
  bool e4m3;
};
inline constexpr Fp8Spec kE4M3{3, 7, true};
inline constexpr Fp8Spec kE5M2{2, 15, false};

inline double fp8_value(const Fp8Spec& f, uint8_t code) {
  const int S = code >> 7, E = (code >> f.mantissa) & (f.e4m3 ? 15 : 31),
            M = code & ((1 << f.mantissa) - 1);
  const double sign = S ? -1.0 : 1.0;
  if (f.e4m3 && E == 15 && M == 7) return std::nan("");
  if (!f.e4m3 && E == 31) return M == 0 ? sign * INFINITY : std::nan("");
  const double frac = static_cast<double>(M) / (1 << f.mantissa);
  return E == 0 ? sign * std::pow(2.0, 1 - f.bias) * frac
                : sign * std::pow(2.0, E - f.bias) * (1 + frac);
}

inline uint8_t fp8_encode(const Fp8Spec& f, double x) {
  // The non-negative finite codes 0..max, whose values increase with the code.
  static thread_local std::vector<double> table[2];
  std::vector<double>& t = table[f.e4m3];
  if (t.empty()) {
    for (int c = 0; c < 128 && std::isfinite(fp8_value(f, static_cast<uint8_t>(c))); ++c)
      t.push_back(fp8_value(f, static_cast<uint8_t>(c)));
  }
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | 0x7f;
  if (std::isinf(x)) return sign | (f.e4m3 ? 0x7f : 0x7c);
  const double a = std::fabs(x);
  const size_t hi = static_cast<size_t>(std::lower_bound(t.begin(), t.end(), a) - t.begin());
  if (hi == t.size()) return sign | static_cast<uint8_t>(t.size() - 1);  // saturate
  if (hi == 0 || t[hi] == a) return sign | static_cast<uint8_t>(hi);
  const double below = a - t[hi - 1], above = t[hi] - a;
  const size_t pick = below < above ? hi - 1 : above < below ? hi : (hi % 2 ? hi - 1 : hi);
  return sign | static_cast<uint8_t>(pick);
}

// The per-tensor scale inverse of a tensor whose largest |x| is amax: the power of two that
// takes amax to between half the format's largest finite value and that value (Transformer
// Engine's amax scaling, rounded to a power of two so that scaling is exact).
inline double fp8_scale_inv(const Fp8Spec& f, double amax) {
  const double largest = fp8_value(f, f.e4m3 ? 0x7e : 0x7b);
  return amax > 0 ? std::exp2(std::ceil(std::log2(amax / largest))) : 1.0;
}
// The largest finite |x| of x (0 when there is none).
inline double finite_amax(const std::vector<double>& x) {
  double amax = 0;
  for (double v : x) amax = std::isfinite(v) ? std::max(amax, std::fabs(v)) : amax;
  return amax;
}

}  // namespace opforge::testing
