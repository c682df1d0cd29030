// FP8 gradient storage (OCP 8-bit Floating Point Specification (OFP8), rev. 1.0, 2023): a
// gradient arrives as one byte per element, an fp8 value in one of the spec's two formats,
// with one fp32 per-tensor scale: the gradient is value * scale_inv (Transformer Engine's
// `scale_inv`, the inverse of the scale the gradient was quantized with).
//   E4M3 ("float8_e4m3fn"): bias 7, 3 mantissa bits, no infinities, NaN = S.1111.111, largest
//        normal 448, subnormals m * 2^-9;
//   E5M2 ("float8_e5m2"):   bias 15, 2 mantissa bits, IEEE-like: S.11111.00 = inf,
//        S.11111.{01,10,11} = NaN, largest normal 57344, subnormals m * 2^-16.
// Widening to fp32 is exact. It is computed on the integer bits (shift the exponent and
// mantissa into place and rebias; subnormals through an exact int-to-float conversion), so it
// needs no table (a gather per vector) and no denormal arithmetic (which flush-to-zero modes
// would zero).
#pragma once

#include <Halide.h>

#include <optional>

#include "opforge/descriptor.h"

namespace opforge::dsl {

enum class Fp8Format { e4m3, e5m2 };

// The registry dtype of an fp8 format, and back (nullopt for a dtype that is not fp8).
registry::DType fp8_dtype(Fp8Format f);
std::optional<Fp8Format> fp8_format(registry::DType t);

// The value of fp8 bits (a UInt(8) Expr) in `compute` (fp32 kernels; fp64 for the golden,
// which widens the same exact fp32 value): NaN codes give NaN, E5M2's infinity codes +-inf.
Halide::Expr decode_fp8(Fp8Format f, const Halide::Expr& bits,
                        const Halide::Type& compute = Halide::Float(32));

}  // namespace opforge::dsl
