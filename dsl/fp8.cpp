#include "dsl/fp8.h"

#include <cmath>

namespace opforge::dsl {

registry::DType fp8_dtype(Fp8Format f) {
  return f == Fp8Format::e4m3 ? registry::DType::f8e4m3 : registry::DType::f8e5m2;
}

std::optional<Fp8Format> fp8_format(registry::DType t) {
  if (t == registry::DType::f8e4m3) return Fp8Format::e4m3;
  if (t == registry::DType::f8e5m2) return Fp8Format::e5m2;
  return std::nullopt;
}

Halide::Expr decode_fp8(Fp8Format f, const Halide::Expr& bits, const Halide::Type& compute) {
  using Halide::Expr;
  const Halide::Type u32 = Halide::UInt(32);
  auto u = [&](uint32_t x) { return Halide::cast(u32, Expr(x)); };
  const bool e4m3 = f == Fp8Format::e4m3;
  const int mantissa = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const Expr b = Halide::cast(u32, bits);
  const Expr mag = b & u(0x7f);  // exponent and mantissa bits
  // A normal number: exponent and mantissa moved to fp32's fields, the exponent rebiased.
  const Expr normal = (mag << (23 - mantissa)) + u(uint32_t(127 - bias) << 23);
  // A subnormal (exponent field 0, so mag is the mantissa): mag * 2^(1 - bias - mantissa),
  // exact in fp32 (an integer below 8 times a power of two).
  const Expr subnormal = Halide::reinterpret(
      u32, Halide::cast(Halide::Float(32), mag) *
               Halide::cast(Halide::Float(32), Expr(std::ldexp(1.0, 1 - bias - mantissa))));
  Expr out = Halide::select(mag < u(1u << mantissa), subnormal, normal);
  if (e4m3) {
    out = Halide::select(mag == u(0x7f), u(0x7fc00000), out);  // S.1111.111: NaN
  } else {
    out = Halide::select(mag == u(0x7c), u(0x7f800000),                       // S.11111.00: inf
                         Halide::select(mag > u(0x7c), u(0x7fc00000), out));  // NaN
  }
  out = out | ((b & u(0x80)) << 24);  // the sign
  const Expr value = Halide::reinterpret(Halide::Float(32), out);
  return value.type() == compute ? value : Halide::cast(compute, value);
}

}  // namespace opforge::dsl
