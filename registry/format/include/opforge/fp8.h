// OCP FP8 (8-bit Floating Point Specification (OFP8), rev. 1.0) bits <-> fp32, for the tools
// that make or read FP8 tensors outside a kernel (bench and check inputs, `opforge run`
// files). Kernels decode on their own (dsl/fp8.h).
//   E4M3 (DType::f8e4m3): bias 7, 3 mantissa bits, S.1111.111 = NaN, no infinities, max 448;
//   E5M2 (DType::f8e5m2): bias 15, 2 mantissa bits, S.11111.00 = inf, S.11111.xx = NaN,
//   max 57344.
#pragma once

#include <cstdint>

#include "opforge/descriptor.h"

namespace opforge::registry {

// The exact value of FP8 bits `b` of dtype `t` (f8e4m3 or f8e5m2; throws otherwise).
float fp8_to_float(uint8_t b, DType t);

// The nearest FP8 value to x, ties to even, as bits. Finite values beyond the largest finite
// value saturate to it (Transformer Engine's satfinite); +-inf becomes E5M2's infinity or
// E4M3's NaN (a non-finite gradient stays non-finite); NaN becomes NaN. The sign of zero kept.
uint8_t fp8_from_float(float x, DType t);

}  // namespace opforge::registry
