// The fp64 reference of 8-bit blockwise optimizer states (Dettmers et al., "8-bit Optimizers
// via Block-wise Quantization", ICLR 2022), written from the definitions and not from the
// kernels' code: the maps, nearest-code quantization of a block against its absmax, and how
// far a kernel's code may legitimately sit from the reference's one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace opforge::testing {

// The 256 values of a descriptor's quant_map ("dynamic_signed", "dynamic_unsigned",
// "linear_signed", "linear_unsigned"), each computed in fp64 and rounded to fp32, sorted;
// code c stands for map[c] * absmax. Throws std::invalid_argument for another name.
//   dynamic:  for i = 0..6, 2^i (signed, with their negatives) or 2^(i+1) (unsigned) values
//             10^(i-6) * (0.1 + 0.9 (j + 0.5) / per), plus 0 and 1.0;
//   linear:   (c - 127) / 127 (c = 255: 1.0) or c / 255.
std::vector<double> quant_map_values(const std::string& quant_map);

// The code whose value is nearest y (the lower one on an exact tie).
int nearest_code(const std::vector<double>& map, double y);

// One state quantized blockwise: absmax[b] = max |x| over block b (B elements, the last one
// shorter; NaN when the block holds a non-finite value), codes[i] = nearest_code(x[i] /
// absmax) (code of 0 for an all-zero block).
struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> absmax;
};
Quantized quantize_blockwise(const std::vector<double>& map, const std::vector<double>& x, int B);

// map[codes[i]] * absmax[i / B], in fp64.
std::vector<double> dequantize_blockwise(const std::vector<double>& map, const Quantized& q, int B);

// Whether the kernel's code `got` is a legitimate answer for the reference value y (already
// divided by the block's absmax) when the kernel's own y may differ from it by up to `slack`:
// the nearest code, or one whose distance to y exceeds the nearest's by at most 2 * slack.
bool code_within(const std::vector<double>& map, double y, int got, double slack);

}  // namespace opforge::testing
