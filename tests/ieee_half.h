// Reference fp32 -> bfloat16 / IEEE binary16 rounding for the tests, written from the IEEE 754
// definition (round the exact value to the nearest representable one, ties to the even
// significand; overflow to +-inf; subnormals with the format's fixed quantum), in double
// arithmetic, independent of the kernels' bit tricks (dsl/math.h). NaN: bf16 keeps the sign and
// the payload's top bits with the quiet bit set ((u >> 16) | 0x0040); f16 is 0x7e00 | sign.
#pragma once

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace opforge::testing {

struct HalfFormat {
  int precision;  // significand bits, hidden bit included
  int emin, emax, bias, exp_bits;
};
inline constexpr HalfFormat kBF16{8, -126, 127, 127, 8};
inline constexpr HalfFormat kF16{11, -14, 15, 15, 5};

inline uint32_t f32_bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// The bits of x rounded to the format (x not NaN).
inline uint16_t round_finite_or_inf(const HalfFormat& f, float xf) {
  const double x = xf;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  const uint16_t inf_bits =
      sign | static_cast<uint16_t>(((1u << f.exp_bits) - 1) << (f.precision - 1));
  if (std::isinf(a)) return inf_bits;
  if (a == 0) return sign;
  int e2;
  std::frexp(a, &e2);          // a = m * 2^e2, m in [0.5, 1)
  int e = e2 - 1;              // a in [2^e, 2^(e+1))
  if (e < f.emin) e = f.emin;  // subnormal range: the quantum stays 2^(emin - p + 1)
  const double quantum = std::ldexp(1.0, e - (f.precision - 1));
  const int saved = std::fegetround();
  std::fesetround(FE_TONEAREST);
  const double q = std::nearbyint(a / quantum);  // exact division: quantum is a power of 2
  std::fesetround(saved);
  const double r = q * quantum;
  const double max = (2.0 - std::ldexp(1.0, 1 - f.precision)) * std::ldexp(1.0, f.emax);
  if (r > max) return inf_bits;
  if (r < std::ldexp(1.0, f.emin)) {  // subnormal (or zero): exponent field 0
    return sign | static_cast<uint16_t>(r / std::ldexp(1.0, f.emin - (f.precision - 1)));
  }
  int re2;
  std::frexp(r, &re2);
  const int re = re2 - 1;
  const double mant =
      r / std::ldexp(1.0, re - (f.precision - 1)) - std::ldexp(1.0, f.precision - 1);
  return sign | static_cast<uint16_t>((re + f.bias) << (f.precision - 1)) |
         static_cast<uint16_t>(mant);
}

inline uint16_t ref_bf16_bits(float x) {
  if (std::isnan(x)) return static_cast<uint16_t>((f32_bits_of(x) >> 16) | 0x0040);
  return round_finite_or_inf(kBF16, x);
}

inline uint16_t ref_f16_bits(float x) {
  if (std::isnan(x)) return static_cast<uint16_t>(0x7e00 | ((f32_bits_of(x) >> 16) & 0x8000));
  return round_finite_or_inf(kF16, x);
}

// Exact widening to fp32.
inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float x;
  if (exp == 0x1f) {
    const uint32_t u = sign | 0x7f800000u | (mant << 13);
    std::memcpy(&x, &u, 4);
    return x;
  }
  const double v = exp == 0 ? std::ldexp(static_cast<double>(mant), -24)
                            : std::ldexp(1.0 + mant / 1024.0, static_cast<int>(exp) - 15);
  x = static_cast<float>(v);
  return sign ? -x : x;
}

}  // namespace opforge::testing
