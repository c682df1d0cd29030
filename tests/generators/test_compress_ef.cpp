// Reference: fp16/bf16 gradient compression with error feedback (1-bit Adam's error feedback,
// Tang et al. 2021, with the fp16/bf16 code of torch DDP's fp16_compress_hook):
//   s = grad + err (one fp32 add); c = s rounded to nearest even in `format` (IEEE, from
//   tests/ieee_half.h); err = s - c, or 0 where c is inf or NaN.
// test_kernels runs both formats (storage bf16s / f16s) against it, bit for bit (tolerance 0);
// here: ties, overflow, subnormals, NaN/inf, and error feedback over several steps.
#include <doctest/doctest.h>

#include <cmath>

#include "generators/reference.h"
#include "ieee_half.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

bool is_f16(const Attrs& a) {
  return a.at("format") == "f16";
}

uint16_t round_bits(bool f16, float x) {
  return f16 ? ref_f16_bits(x) : ref_bf16_bits(x);
}
float widen_bits(bool f16, uint16_t h) {
  return f16 ? f16_to_float(h) : bf16_to_float(h);
}

void compress_update(const Attrs& a, const Scalars&, Tensors& t) {
  const bool f16 = is_f16(a);
  std::vector<double>& err = t.at("err");
  std::vector<double>& c = t.at("c");
  const std::vector<double>& grad = t.at("grad");
  for (size_t i = 0; i < err.size(); ++i) {
    const float s = static_cast<float>(grad[i]) + static_cast<float>(err[i]);
    const float w = widen_bits(f16, round_bits(f16, s));
    c[i] = w;
    err[i] = std::isfinite(w) ? static_cast<double>(s) - w : 0.0;
  }
}

// Gradients in [-1, 1] (f16: times 2^-20 for a tenth of them, into f16's subnormals), error
// feedback of about half an ulp of them.
void compress_inputs(std::mt19937& rng, size_t n, const Attrs& a, Tensors& t, Scalars&) {
  t["grad"] = uniform(rng, n, -1, 1);
  t["err"] = uniform(rng, n, -1.0 / 256, 1.0 / 256);
  t["c"] = std::vector<double>(n, 0.0);
  for (size_t i = 0; i < n; i += 10) {
    if (is_f16(a)) t["grad"][i] *= 0x1p-20, t["err"][i] *= 0x1p-20;
  }
}

const RegisterReference reg("compress_ef", {compress_inputs, compress_update});

struct Case {
  float grad, err;
};

// Runs compress_ef once on every ISA with these (grad, err) pairs tiled to 37 elements and
// checks c and err bit for bit against the reference.
void check_cases(const std::string& format, const std::vector<Case>& cases) {
  auto reg = Registry::open(test_registry_dir());
  const bool f16 = format == "f16";
  std::vector<float> g0, e0;
  for (size_t i = 0; i < 37; ++i) {
    g0.push_back(cases[i % cases.size()].grad);
    e0.push_back(cases[i % cases.size()].err);
  }
  for (const auto& isa : runnable_isas()) {
    CAPTURE(isa);
    CAPTURE(format);
    Kernel& k = reg->select("compress_ef", {{"format", format}}, isa);
    std::vector<float> g = g0, e = e0;
    std::vector<uint16_t> c(g.size(), 0x5555);
    const int64_t n = static_cast<int64_t>(g.size());
    k.call({{"grad", g.data(), registry::DType::f32, {n}},
            {"err", e.data(), registry::DType::f32, {n}},
            {"c", c.data(), f16 ? registry::DType::f16 : registry::DType::bf16, {n}}},
           {});
    for (size_t i = 0; i < g.size(); ++i) {
      CAPTURE(i);
      const float s = g0[i] + e0[i];
      const uint16_t want = round_bits(f16, s);
      const float w = widen_bits(f16, want);
      CHECK(c[i] == want);
      const float want_err = std::isfinite(w) ? s - w : 0.0f;
      CHECK(e[i] == want_err);
      CHECK(std::signbit(e[i]) == std::signbit(want_err));
      CHECK(f32_bits_of(g[i]) == f32_bits_of(g0[i]));  // read only
    }
  }
}

TEST_CASE("compress_ef: ties to even, overflow, subnormals, NaN and inf, bit for bit") {
  const float nan = std::nanf(""), inf = INFINITY;
  // bf16: 1 + 2^-8 is a tie (to 1), 1 + 3 * 2^-8 a tie to 1 + 2^-6 (even); the largest bf16
  // plus half an ulp overflows; fp32 subnormals stay (bf16 has fp32's exponent range).
  check_cases("bf16", {{1.0f, 0x1p-8f},
                       {1.0f + 0x1p-7f, 0x1p-8f},
                       {-1.0f, -0x1p-8f},
                       {0x1.fep127f, 0x1p119f},
                       {0x1p-140f, 0x1p-145f},
                       {nan, 0.5f},
                       {inf, -1.0f},
                       {-inf, 0.0f},
                       {0.0f, -0.0f},
                       {-0.0f, -0.0f},
                       {3.0e38f, 3.0e38f}});
  // f16: 65504 is the largest; 65520 ties to inf; 2^-24 the smallest subnormal, 2^-25 a tie to
  // 0, 3 * 2^-25 a tie to 2^-23; 1 + 2^-11 a tie to 1.
  check_cases("f16", {{65504.0f, 0.0f},
                      {65504.0f, 16.0f},
                      {1.0e5f, 0.0f},
                      {-1.0e5f, 3.0f},
                      {0x1p-24f, 0.0f},
                      {0x1p-25f, 0.0f},
                      {0x1p-25f, 0x1p-24f},
                      {1.0f, 0x1p-11f},
                      {1.0f + 0x1p-10f, 0x1p-11f},
                      {nan, 1.0f},
                      {-inf, 1.0f},
                      {0.1f, 0.0f},
                      {-0.0f, 0.0f}});
}

// Over steps, sum_k c_k + err = sum_k grad_k exactly where every step's s and c are exact
// in fp32 (c + err = s per step): the compressed stream loses nothing but the last err.
TEST_CASE("compress_ef: error feedback over steps telescopes") {
  auto reg = Registry::open(test_registry_dir());
  const size_t n = 1003;
  for (const std::string format : {"bf16", "f16"}) {
    const bool f16 = format == "f16";
    for (const auto& isa : runnable_isas()) {
      CAPTURE(isa);
      CAPTURE(format);
      Kernel& k = reg->select("compress_ef", {{"format", format}}, isa);
      std::mt19937 rng(7);
      std::vector<float> err(n, 0.0f);
      std::vector<double> sent(n, 0.0), total(n, 0.0);
      std::vector<float> want_err(n, 0.0f);
      for (int step = 0; step < 6; ++step) {
        // Gradients on a 2^-12 grid in [-1, 1]: every s below is exact in fp32.
        std::vector<float> g(n);
        for (auto& x : g) x = std::ldexp(float(int(rng() % 8193) - 4096), -12);
        std::vector<uint16_t> c(n);
        k.call({{"grad", g.data(), registry::DType::f32, {int64_t(n)}},
                {"err", err.data(), registry::DType::f32, {int64_t(n)}},
                {"c", c.data(), f16 ? registry::DType::f16 : registry::DType::bf16, {int64_t(n)}}},
               {});
        for (size_t i = 0; i < n; ++i) {
          const float s = g[i] + want_err[i];
          const uint16_t h = round_bits(f16, s);
          want_err[i] = s - widen_bits(f16, h);
          CHECK(c[i] == h);
          sent[i] += widen_bits(f16, c[i]);
          total[i] += g[i];
        }
      }
      int bad = 0;
      for (size_t i = 0; i < n; ++i) {
        if (err[i] != want_err[i] || sent[i] + err[i] != total[i]) ++bad;
      }
      CHECK(bad == 0);
    }
  }
}

}  // namespace
}  // namespace opforge::testing
