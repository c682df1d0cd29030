// onebit_compress and onebit_decompress: fp64 references written from 1-bit Adam's compressor
// (Tang et al. 2021, Algorithm 1: per chunk the scale mean |s| and the signs of s = x + err,
// the error s - decompressed fed back); the check (registry/cli/check/nn_problem.h) runs every
// variant (each ISA the CPU runs) on them: one word (C = 32), chunks of several words, one chunk
// and many, the serial path and the parallel one (G * C >= 32768) with a ragged last block;
// decompression of 1 to 4 codes. Sign words are compared exactly.
#include <cmath>
#include <cstdint>

#include "registry/builder/nn_golden/add_references.h"

namespace opforge::nn_golden {
namespace {

std::vector<NnProblem> compress_problems() {
  std::vector<NnProblem> out;
  for (auto [g, c] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 32}, {5, 32}, {3, 96}, {17, 64}, {1, 2048}, {9, 2048}, {33, 1024}, {300, 128}}) {
    for (double range : {1.0, 100.0}) {
      NnProblem p;
      p.shapes["x"] = p.shapes["err"] = {g, c};
      p.lo = -range, p.hi = range;
      out.push_back(p);
    }
  }
  return out;
}

NnTensors compress_ref(const NnShapes& shapes, const NnTensors& in, const NnScalars&,
                       const NnAttrs&) {
  const int64_t g_n = shapes.at("x")[0], c_n = shapes.at("x")[1];
  const auto &x = in.at("x"), &err = in.at("err");
  NnTensors out;
  auto &bits = out["bits"], &scale = out["scale"], &err_out = out["err_out"];
  for (int64_t g = 0; g < g_n; ++g) {
    std::vector<double> s(c_n);
    double sum = 0;
    for (int64_t c = 0; c < c_n; ++c) {
      s[c] = x[g * c_n + c] + err[g * c_n + c];
      sum += std::fabs(s[c]);
    }
    const double mean = sum / static_cast<double>(c_n);
    scale.push_back(mean);
    for (int64_t w = 0; w < c_n / 32; ++w) {
      uint32_t word = 0;
      for (int j = 0; j < 32; ++j)
        if (s[w * 32 + j] >= 0) word |= uint32_t{1} << j;
      bits.push_back(static_cast<double>(static_cast<int32_t>(word)));
    }
    for (int64_t c = 0; c < c_n; ++c) err_out.push_back(s[c] - (s[c] >= 0 ? mean : -mean));
  }
  return out;
}

// err_out = s - scale cancels where |s| is near the scale: its error is that of the fp32 scale
// (a sum of C terms in 32 lanes, ~3e-7 relative measured, at range 100: 1.8e-5 absolute) plus
// half an ulp of s, so atol grows with the inputs' range (|s| < 2 * range): a few ulps of it.
// A constant off by 1e-4 relative moves err_out by 1e-4 * scale, 25x this atol.
std::vector<NnProblem> decompress_problems() {
  std::vector<NnProblem> out;
  for (int64_t k : {1, 2, 3, 4}) {
    for (auto [g, w] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 3}, {1, 64}, {40, 64}, {300, 4}}) {
      NnProblem p;
      p.shapes["bits"] = {k, g, w};
      p.shapes["scale"] = {k, g};
      p.scalars["weight"] = 1.0 / static_cast<double>(k);
      p.lo = 0.0, p.hi = 3.0;  // scales are means of |s|
      out.push_back(p);
    }
  }
  return out;
}

NnTensors decompress_ref(const NnShapes& shapes, const NnTensors& in, const NnScalars& sc,
                         const NnAttrs&) {
  const int64_t k_n = shapes.at("bits")[0], g_n = shapes.at("bits")[1], w_n = shapes.at("bits")[2];
  const auto &bits = in.at("bits"), &scale = in.at("scale");
  // The kernel's weight is the fp32 value of the scalar.
  const double weight = static_cast<float>(sc.at("weight"));
  std::vector<double> y(g_n * w_n * 32, 0.0);
  for (int64_t k = 0; k < k_n; ++k) {
    for (int64_t g = 0; g < g_n; ++g) {
      for (int64_t w = 0; w < w_n; ++w) {
        const auto word =
            static_cast<uint32_t>(static_cast<int32_t>(bits[(k * g_n + g) * w_n + w]));
        for (int j = 0; j < 32; ++j) {
          const double v = scale[k * g_n + g];
          y[(g * w_n + w) * 32 + j] += (word >> j & 1) ? v : -v;
        }
      }
    }
  }
  for (double& v : y) v *= weight;
  return {{"y", y}};
}

}  // namespace

void add_onebit(NnReferences& r) {
  r["onebit_compress"] = NnReference{compress_problems(), compress_ref, [](const NnProblem& p) {
                                       return std::make_pair(2e-6, 4e-6 * p.hi);
                                     }};
  r["onebit_decompress"] = NnReference{decompress_problems(), decompress_ref};
}

}  // namespace opforge::nn_golden
