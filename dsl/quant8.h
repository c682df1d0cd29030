// 8-bit blockwise state storage (Dettmers et al., "8-bit Optimizers via Block-wise
// Quantization", ICLR 2022): a state is kept as one uint8 code per element plus one fp32 absmax
// per block of B elements; code c stands for map[c] * absmax. The maps (256 fp32 values, sorted,
// code = index; values computed in fp64 and rounded to fp32):
//   dynamic signed   for i = 0..6 the 2^i values +-10^(i-6) * (0.1 + 0.9 (j + 0.5) / 2^i),
//                    plus 0 and 1.0 (bitsandbytes' create_dynamic_map(signed=True));
//   dynamic unsigned the same with 2^(i+1) values per decade and no negatives (signed=False);
//   linear signed    (c - 127) / 127 for c <= 254, map[255] = 1.0 (never produced);
//   linear unsigned  c / 255.
// Decoding is computed (exact for every code), or on AVX-512 the dynamic map is looked up with
// permutes (dsl/table_lookup.h; Halide's own lookup would be a gather per vector). Encoding finds
// the nearest map value arithmetically (no table search): the dynamic map's decade from compares
// against the fp32 midpoints between decades (with permutes: from the binade and one compare),
// then the linear bin inside it; within a decade the midpoints between neighbours are the bin
// edges. fp32 rounding may pick the neighbour when a value lies within a few ulps of a midpoint.
//
// The permute forms, 2-vCPU AMD EPYC (Zen 5), 8-bit Adam with the dynamic map, 5e4 elements in
// cache, 1 thread, `opforge bench --set unroll=1` against the registered arithmetic forms:
// AVX-512 (lookup decode and encode) 0.69-0.72x the time for Adam, AdamW, AMSGrad, Lion,
// momentum, bf16 masters and e4m3 gradients; AVX2 (the encode) 0.75-0.81x for the Adam family,
// 0.91x for Lion and momentum (one 8-bit state), then (the decode's denominator looked up, its
// |code - 127| kept signed) a further 0.78-0.82x. Then (same host and command, the previous
// step's binary against the rebuilt registry): the encode's decade count by two 32-entry lookups
// by the exponent (AVX-512) or an integer multiply-shift of it (AVX2) instead of a conversion,
// multiply-add, conversion back and clamp, its bin's clamp at 0 dropped (never below 0, checked),
// and the signed decode by 4 lookups and a sign flip instead of 8: AVX-512 0.83-0.87x the time
// for all seven, AVX2 0.89-0.94x.
#pragma once

#include <Halide.h>

#include <array>
#include <string>

#include "dsl/table_lookup.h"

namespace opforge::dsl {

enum class QuantMap { dynamic, linear };
// Elements per absmax unless a variant says otherwise (the paper's and bitsandbytes' B).
inline constexpr int kDefaultQuantBlock = 256;

// One quantized state's map: kind and sign.
struct StateQuant {
  QuantMap map = QuantMap::dynamic;
  bool is_signed = true;
  // "dynamic_signed", "dynamic_unsigned", "linear_signed", "linear_unsigned": the descriptor's
  // Input::quant_map.
  std::string name() const;
  // The 256 map values, sorted.
  std::array<float, 256> table() const;
};

// map[code] for a uint8 code Expr, in `compute` (fp32 kernels; fp64 for the golden, which gets
// the same fp32 values widened). With AVX-512's permutes the fp32 dynamic map is looked up
// (8 vpermi2ps over the 256 values and a tree of blends, against about 30 instructions of
// arithmetic with a division; the signed map, odd about code 127, 4 over its 128 magnitudes and
// a sign flip); AVX2's 8-entry permutes would take 32 for 256 entries, so there only the
// division's denominator (one of 8 values) is looked up.
Halide::Expr decode8(const StateQuant& q, const Halide::Expr& code,
                     const Halide::Type& compute = Halide::Float(32),
                     Permutes permutes = Permutes::none);

// A state's dequantized value: map[code] times its block's absmax. The fp32 linear map takes
// the code's offset times the block's step (absmax / 127 or / 255, once per block) instead of
// decode8's division per element: within an ulp of map[code] * absmax, and one multiply.
Halide::Expr dequantize8(const StateQuant& q, const Halide::Expr& code, const Halide::Expr& absmax,
                         const Halide::Type& compute = Halide::Float(32),
                         Permutes permutes = Permutes::none);

// The code of the map value nearest y, y in [-1, 1] (|y| <= 1: the value over the block's
// absmax; unsigned maps take y >= 0). Any float type; the result is UInt(8). NaN y gives an
// unspecified code (its block's absmax is NaN). `mask_compares`: the target compares into
// mask registers (AVX-512), where the dynamic map's decade is counted from sign bits instead
// of compares (an fp32 y only; the same codes except for a |y| exactly on a decade's edge, a
// midpoint, which then takes the lower neighbour).
// `prescaled`: y comes multiplied by encode_gain(q, its type) already. `permutes` (an fp32 y,
// the dynamic map): the decade from y's binade (the edges below it by two 32-entry lookups on
// AVX-512, an integer multiply-shift on AVX2) and one compare against the edge inside it, the
// decade's bin constants by 8-entry lookups, instead of six compares and selects; the same codes
// except within an ulp or two of a bin edge.
Halide::Expr encode8(const StateQuant& q, const Halide::Expr& y, bool mask_compares = false,
                     bool prescaled = false, Permutes permutes = Permutes::none);

// What a block's 1 / absmax is multiplied by for encode8(..., prescaled = true): the fp32
// linear map's 127 (signed) or 255, so that the per-element multiply is done once per block;
// 1 for the others.
double encode_gain(const StateQuant& q, const Halide::Type& t);

}  // namespace opforge::dsl
