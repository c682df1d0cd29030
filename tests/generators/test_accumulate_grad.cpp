// Reference: gradient accumulation into an fp32 buffer, from torch's p.grad += g across
// backward passes and DeepSpeed's BF16_Optimizer (hp_grad.add_(lp.grad.to(fp32))):
//   acc += grad                  (scaled = false)
//   acc += grad * scale          (scaled = true)
// test_kernels runs every variant (storage f32, bf16g, f16g) against it; here: nonfinite
// gradients for every storage, and N micro-batches averaged into one buffer.
#include <doctest/doctest.h>

#include <cmath>

#include "generators/reference.h"
#include "ieee_half.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

void accumulate_update(const Attrs& a, const Scalars& s, Tensors& t) {
  const double scale = a.at("scaled") == "true" ? s.at("scale") : 1.0;
  std::vector<double>& acc = t.at("acc");
  const std::vector<double>& grad = t.at("grad");
  for (size_t i = 0; i < acc.size(); ++i) acc[i] += grad[i] * scale;
}

// scale: fp32(1/N) for averaging over N micro-batches, or an inverse loss scale 2^-k.
void accumulate_inputs(std::mt19937& rng, size_t n, const Attrs& a, Tensors& t, Scalars& s) {
  t["acc"] = uniform(rng, n, -4, 4);
  t["grad"] = uniform(rng, n, -1, 1);
  if (a.at("scaled") != "true") return;
  const int k = std::uniform_int_distribution<int>(1, 24)(rng);
  s["scale"] = rng() % 2 ? static_cast<float>(1.0 / k) : std::ldexp(1.0, -k);
}

const RegisterReference reg("accumulate_grad", {accumulate_inputs, accumulate_update});

// A gradient as a variant stores it: fp32, or bf16/f16 bits rounded to nearest even.
struct Grad {
  registry::DType dtype;
  std::vector<float> f32;
  std::vector<uint16_t> half;

  Grad(const std::string& storage, const std::vector<double>& g)
      : dtype(storage == "f32"     ? registry::DType::f32
              : storage == "bf16g" ? registry::DType::bf16
                                   : registry::DType::f16) {
    for (double x : g) {
      const float f = static_cast<float>(x);
      if (dtype == registry::DType::f32) f32.push_back(f);
      if (dtype == registry::DType::bf16) half.push_back(ref_bf16_bits(f));
      if (dtype == registry::DType::f16) half.push_back(ref_f16_bits(f));
    }
  }
  Tensor tensor() {
    void* p = dtype == registry::DType::f32 ? static_cast<void*>(f32.data()) : half.data();
    return {"grad", p, dtype, {static_cast<int64_t>(size())}};
  }
  size_t size() const { return dtype == registry::DType::f32 ? f32.size() : half.size(); }
  double operator[](size_t i) const {
    if (dtype == registry::DType::f32) return f32[i];
    return dtype == registry::DType::bf16 ? bf16_to_float(half[i]) : f16_to_float(half[i]);
  }
};

TEST_CASE("accumulate_grad: NaN and inf gradients propagate, every storage") {
  auto reg = Registry::open(test_registry_dir());
  const double nan = std::nan(""), inf = INFINITY;
  // 37 elements: the vector body and the tail both see every case. 70000 overflows f16 to inf.
  const std::vector<double> acc0 = tile({1, -2, inf, -inf, 0.5, nan, 3, inf, 0, -1, 2});
  const std::vector<double> g0 = tile({nan, inf, -inf, 1, -nan, 1, -inf, inf, 0.25, 70000, -3});
  for (const std::string storage : {"f32", "bf16g", "f16g"}) {
    for (const bool scaled : {false, true}) {
      for (const auto& isa : runnable_isas()) {
        CAPTURE(storage);
        CAPTURE(scaled);
        CAPTURE(isa);
        Kernel& k = reg->select("accumulate_grad",
                                {{"scaled", scaled ? "true" : "false"}, {"storage", storage}}, isa);
        const double scale = scaled ? 0.75 : 1.0;
        Grad g(storage, g0);
        std::vector<float> acc(acc0.begin(), acc0.end());
        Scalars s;
        if (scaled) s["scale"] = scale;
        k.call({{"acc", acc.data(), registry::DType::f32, {int64_t(acc.size())}}, g.tensor()}, s);
        for (size_t i = 0; i < acc.size(); ++i) {
          CAPTURE(i);
          const double want = acc0[i] + g[i] * scale;  // exact here: no rounding in fp32
          if (std::isnan(want)) {
            CHECK(std::isnan(acc[i]));
          } else {
            CHECK(acc[i] == want);
          }
        }
      }
    }
  }
}

// The use it is for: N micro-batch gradients in bf16, averaged into a zeroed fp32 buffer with
// scale = fp32(1/N). Each call rounds once (|err| <= 2^-24 of the partial sum, or twice without
// an fma), so the sum is within 2N * 2^-24 * sum_k |grad_k * scale| of the fp64 mean (a bf16
// buffer would round to 8 significant bits at every step).
TEST_CASE("accumulate_grad: N bf16 micro-batches average into fp32") {
  auto reg = Registry::open(test_registry_dir());
  const int steps = 7;
  const size_t n = 4099;
  const float scale = 1.0f / steps;
  std::mt19937 rng(4099);
  for (const auto& isa : runnable_isas()) {
    CAPTURE(isa);
    Kernel& k = reg->select("accumulate_grad", {{"scaled", "true"}, {"storage", "bf16g"}}, isa);
    std::vector<float> acc(n, 0.0f);
    std::vector<double> sum(n, 0.0), magnitude(n, 0.0);
    for (int step = 0; step < steps; ++step) {
      Grad g("bf16g", uniform(rng, n, -1, 1));
      k.call({{"acc", acc.data(), registry::DType::f32, {int64_t(n)}}, g.tensor()},
             {{"scale", scale}});
      for (size_t i = 0; i < n; ++i) {
        sum[i] += g[i] * double(scale);
        magnitude[i] += std::fabs(g[i] * double(scale));
      }
    }
    int bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const double allowed = 2 * steps * std::ldexp(magnitude[i], -24);
      if (!(std::fabs(acc[i] - sum[i]) <= allowed) && bad++ < 5) {
        FAIL_CHECK("acc[" << i << "] = " << acc[i] << ", fp64 mean " << sum[i]);
      }
    }
    CHECK(bad == 0);
  }
}

}  // namespace
}  // namespace opforge::testing
