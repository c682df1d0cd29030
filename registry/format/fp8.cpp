#include "opforge/fp8.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace opforge::registry {

namespace {

struct Fp8Layout {
  int mantissa, bias;
  bool e4m3;
  double max_finite;
};

Fp8Layout layout_of(DType t) {
  if (t == DType::f8e4m3) return {3, 7, true, 448.0};
  if (t == DType::f8e5m2) return {2, 15, false, 57344.0};
  throw std::invalid_argument(std::string("dtype ") + dtype_name(t) + " is not an FP8 dtype");
}

}  // namespace

float fp8_to_float(uint8_t b, DType t) {
  const Fp8Layout f = layout_of(t);
  const int mag = b & 0x7f, e = mag >> f.mantissa, m = mag & ((1 << f.mantissa) - 1);
  const double sign = (b & 0x80) ? -1.0 : 1.0;
  if (f.e4m3 && mag == 0x7f) return NAN;
  if (!f.e4m3 && e == 31) return m ? NAN : static_cast<float>(sign * INFINITY);
  const double v = e == 0 ? std::ldexp(m, 1 - f.bias - f.mantissa)
                          : std::ldexp((1 << f.mantissa) + m, e - f.bias - f.mantissa);
  return static_cast<float>(sign * v);
}

uint8_t fp8_from_float(float x, DType t) {
  const Fp8Layout f = layout_of(t);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | 0x7f;
  if (std::isinf(x)) return sign | (f.e4m3 ? 0x7f : 0x7c);
  const double a = std::fabs(static_cast<double>(x));
  // The spacing of FP8 values around a: 2^(E - mantissa) in binade E, subnormals share the
  // smallest normal binade's spacing. a / q is exact (q a power of two); nearbyint ties to even.
  int e = 0;
  std::frexp(a, &e);
  const int binade = std::max(e - 1, 1 - f.bias);
  double r = std::nearbyint(std::ldexp(a, f.mantissa - binade));  // in units of the spacing
  r = std::min(std::ldexp(r, binade - f.mantissa), f.max_finite);
  if (r == 0) return sign;
  std::frexp(r, &e);
  if (e - 1 < 1 - f.bias)  // subnormal: exponent field 0
    return sign | static_cast<uint8_t>(std::ldexp(r, f.bias - 1 + f.mantissa));
  const int units = static_cast<int>(std::ldexp(r, f.mantissa - (e - 1)));  // 2^M + m
  return sign |
         static_cast<uint8_t>(((e - 1 + f.bias) << f.mantissa) | (units - (1 << f.mantissa)));
}

}  // namespace opforge::registry
