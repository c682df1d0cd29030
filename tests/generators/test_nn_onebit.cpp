// onebit_compress and onebit_decompress: fp64 references written from 1-bit Adam's compressor
// (Tang et al. 2021, Algorithm 1: per chunk the scale mean |s| and the signs of s = x + err,
// the error s - decompressed fed back), registered for test_nn_kernels.cpp, which runs every
// variant (each ISA the CPU runs) on them: one word (C = 32), chunks of several words, one chunk
// and many, the serial path and the parallel one (G * C >= 32768) with a ragged last block;
// decompression of 1 to 4 codes. Sign words are compared exactly. This file adds the zero
// cases and bad shapes, which must fail naming the argument.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "generators/nn_call_error.h"
#include "generators/nn_reference.h"
#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
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
const RegisterNnReference reg_compress("onebit_compress",
                                       {compress_problems(), compress_ref, [](const NnProblem& p) {
                                          return std::make_pair(2e-6, 4e-6 * p.hi);
                                        }});

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

const RegisterNnReference reg_decompress("onebit_decompress",
                                         {decompress_problems(), decompress_ref});

TEST_CASE("onebit_compress: a zero chunk gives scale 0, all bits set, zero error") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    CAPTURE(isa);
    std::vector<float> x(64, 0.f), err(64, 0.f), err_out(64, 1.f), scale(2, 1.f);
    x[40] = -0.f;  // -0 + 0 = +0: still positive
    std::vector<int32_t> bits(2, 0);
    std::vector<Tensor> t = {{"x", x.data(), registry::DType::f32, {2, 32}},
                             {"err", err.data(), registry::DType::f32, {2, 32}},
                             {"bits", bits.data(), registry::DType::i32, {2, 1}},
                             {"scale", scale.data(), registry::DType::f32, {2}},
                             {"err_out", err_out.data(), registry::DType::f32, {2, 32}}};
    reg->select("onebit_compress", {}, isa).call(t, {});
    CHECK(bits[0] == -1);
    CHECK(bits[1] == -1);
    CHECK(scale[0] == 0.f);
    CHECK(scale[1] == 0.f);
    for (float e : err_out) CHECK(e == 0.f);
  }
}

TEST_CASE("onebit_compress and onebit_decompress reject bad shapes, naming the argument") {
  auto reg = Registry::open(test_registry_dir());
  std::vector<float> f(4096);
  std::vector<int32_t> w(128);
  auto fails = [&](const std::string& op, std::vector<Tensor> t,
                   std::map<std::string, double> scalars,
                   const std::string& what) { check_call_fails(*reg, op, t, scalars, what); };
  auto f32 = [&](const char* name, std::vector<int64_t> shape) {
    return Tensor{name, f.data(), registry::DType::f32, std::move(shape)};
  };
  auto i32 = [&](const char* name, std::vector<int64_t> shape) {
    return Tensor{name, w.data(), registry::DType::i32, std::move(shape)};
  };
  // A chunk of 48: not whole words.
  fails("onebit_compress",
        {f32("x", {2, 48}), f32("err", {2, 48}), i32("bits", {2, 1}), f32("scale", {2}),
         f32("err_out", {2, 48})},
        {}, "multiple of 32");
  // err of another chunk count.
  fails("onebit_compress",
        {f32("x", {2, 64}), f32("err", {3, 64}), i32("bits", {2, 2}), f32("scale", {2}),
         f32("err_out", {2, 64})},
        {}, "err");
  // bits as floats.
  fails("onebit_compress",
        {f32("x", {2, 64}), f32("err", {2, 64}), f32("bits", {2, 2}), f32("scale", {2}),
         f32("err_out", {2, 64})},
        {}, "bits");
  // scale with 3 codes, bits with 2.
  fails("onebit_decompress", {i32("bits", {2, 4, 2}), f32("scale", {3, 4}), f32("y", {4, 64})},
        {{"weight", 0.5}}, "scale");
  // y of the wrong chunk length.
  fails("onebit_decompress", {i32("bits", {2, 4, 2}), f32("scale", {2, 4}), f32("y", {4, 32})},
        {{"weight", 0.5}}, "y");
}

}  // namespace
}  // namespace opforge::testing
