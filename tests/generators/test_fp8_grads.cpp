// FP8 gradients (storage e4m3g / e5m2g, dsl/fp8.h): the widening of every one of the 256 codes
// of both formats, through accumulate_grad on every ISA, against the spec's value formula
// (tests/fp8_reference.h): exact, NaN codes NaN, E5M2's infinities infinite; the per-tensor
// scale exact for a power of two and one fp32 rounding otherwise; the scalar's domain and the
// gradient's dtype refused by name. The optimizer rows (Adam, AdamW, LAMB, accumulate_grad,
// loss scaling's skip, 8-bit states) are checked against their fp64 references at odd sizes,
// in place, by test_kernels.cpp and test_quant8_states.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "fp8_reference.h"
#include "generators/reference.h"
#include "host_isa.h"
#include "opforge/fp8.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

using registry::DType;

struct Format {
  const char* storage;
  DType dtype;
  const Fp8Spec* spec;
};
const Format kFormats[] = {{"e4m3g", DType::f8e4m3, &kE4M3}, {"e5m2g", DType::f8e5m2, &kE5M2}};

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// acc = 0 + every code (repeated: vectors, a tail) times scale_inv, through the kernel.
std::vector<float> accumulate_codes(Kernel& k, const std::vector<uint8_t>& codes,
                                    double scale_inv) {
  std::vector<uint8_t> grad = codes;
  std::vector<float> acc(codes.size(), 0.f);
  const int64_t n = static_cast<int64_t>(codes.size());
  k.call({{"acc", acc.data(), DType::f32, {n}},
          {"grad", grad.data(), k.descriptor().find_input("grad")->dtype, {n}}},
         {{"grad_scale_inv", scale_inv}});
  CHECK(grad == codes);  // an input, never written
  return acc;
}

std::vector<uint8_t> all_codes(int repeat) {
  std::vector<uint8_t> codes;
  for (int r = 0; r < repeat; ++r) {
    for (int c = 0; c < 256; ++c) codes.push_back(static_cast<uint8_t>((c + 37 * r) % 256));
  }
  for (int c = 0; c < 17; ++c) codes.push_back(static_cast<uint8_t>(c * 15));  // a tail
  return codes;
}

TEST_CASE("FP8 gradients: every code of both formats widens exactly, on every ISA") {
  auto reg = Registry::open(test_registry_dir());
  const std::vector<uint8_t> codes = all_codes(5);
  for (const std::string& isa : runnable_isas()) {
    for (const Format& f : kFormats) {
      Kernel& k = reg->select("accumulate_grad", {{"storage", f.storage}}, isa);
      CAPTURE(k.descriptor().variant);
      CHECK(k.descriptor().find_input("grad")->dtype == f.dtype);
      int nan = 0, inf = 0, subnormal = 0;
      // scale_inv 1: the code's value; 2^-20: the same scaled exactly (deep in fp32's normals)
      for (double scale_inv : {1.0, 0x1p-20}) {
        const std::vector<float> acc = accumulate_codes(k, codes, scale_inv);
        for (size_t i = 0; i < codes.size(); ++i) {
          const double want = fp8_value(*f.spec, codes[i]) * scale_inv;
          CAPTURE(int(codes[i]));
          if (std::isnan(want)) {
            CHECK(std::isnan(acc[i]));
            nan += scale_inv == 1;
            continue;
          }
          // 0 + x: +0 for both zeros
          CHECK(double(acc[i]) == (want == 0 ? 0.0 : want));
          inf += std::isinf(want) && scale_inv == 1;
          subnormal += (codes[i] & 0x7f) != 0 && (codes[i] & 0x7f) < (1 << f.spec->mantissa) &&
                       scale_inv == 1;
        }
      }
      // The special codes are there: E4M3 2 NaN codes, E5M2 6 NaN and 2 infinities.
      CHECK(nan == (f.spec->e4m3 ? 2 : 6) * 5);
      CHECK(inf == (f.spec->e4m3 ? 0 : 2 * 5));
      CHECK(subnormal > 0);
    }
  }
}

TEST_CASE("FP8 gradients: a scale that is not a power of two rounds once, in fp32") {
  auto reg = Registry::open(test_registry_dir());
  const std::vector<uint8_t> codes = all_codes(2);
  const float scale = 0.3f;  // the kernel reads the fp32 scalar
  for (const std::string& isa : runnable_isas()) {
    for (const Format& f : kFormats) {
      Kernel& k = reg->select("accumulate_grad", {{"storage", f.storage}}, isa);
      CAPTURE(k.descriptor().variant);
      const std::vector<float> acc = accumulate_codes(k, codes, scale);
      for (size_t i = 0; i < codes.size(); ++i) {
        const double x = fp8_value(*f.spec, codes[i]);
        if (std::isnan(x)) continue;
        // The exact product of two fp32 values fits a double; one rounding to fp32.
        const float want = static_cast<float>(x * double(scale));
        CAPTURE(int(codes[i]));
        CHECK(bits_of(acc[i]) == bits_of(want == 0 ? 0.f : want));
      }
    }
  }
}

TEST_CASE("FP8 gradients: the tools' codec agrees with the spec's formula and rounding") {
  for (const Format& f : kFormats) {
    CAPTURE(f.storage);
    for (int c = 0; c < 256; ++c) {
      const double want = fp8_value(*f.spec, static_cast<uint8_t>(c));
      const float got = registry::fp8_to_float(static_cast<uint8_t>(c), f.dtype);
      CHECK((std::isnan(want) ? std::isnan(got) : double(got) == want));
    }
    // Encoding: nearest, ties to even, saturating, against the reference's table search.
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> mag(-20, 17);
    for (int i = 0; i < 20000; ++i) {
      const float x = static_cast<float>((i % 2 ? -1 : 1) * std::exp2(mag(rng)));
      CAPTURE(x);
      CHECK(int(registry::fp8_from_float(x, f.dtype)) == int(fp8_encode(*f.spec, x)));
    }
    for (int c = 0; c < 255; ++c) {  // midpoints between neighbours: ties
      const double a = fp8_value(*f.spec, static_cast<uint8_t>(c)),
                   b = fp8_value(*f.spec, static_cast<uint8_t>(c + 1));
      if (!std::isfinite(a) || !std::isfinite(b) || (c & 0x7f) == 0x7f) continue;
      const float mid = static_cast<float>((a + b) / 2);
      CAPTURE(c);
      CHECK(int(registry::fp8_from_float(mid, f.dtype)) == int(fp8_encode(*f.spec, mid)));
      CHECK(int(fp8_encode(*f.spec, mid)) % 2 == 0);  // the even neighbour
    }
    CHECK(int(fp8_encode(*f.spec, 1e9)) == (f.spec->e4m3 ? 0x7e : 0x7b));  // saturates
    CHECK(int(registry::fp8_from_float(-1e9f, f.dtype)) == (f.spec->e4m3 ? 0xfe : 0xfb));
    CHECK(int(registry::fp8_from_float(INFINITY, f.dtype)) == (f.spec->e4m3 ? 0x7f : 0x7c));
  }
}

TEST_CASE("FP8 gradients: a bad scale or an fp32 gradient is refused by name, nothing written") {
  auto reg = Registry::open(test_registry_dir());
  Kernel& k = reg->select("apply_adamw", {{"storage", "e4m3g"}}, "avx2");
  const int64_t n = 17;
  std::vector<float> var(n, 1.f), m(n, 0.f), v(n, 0.f), grad32(n, 0.5f);
  std::vector<uint8_t> grad(n, 0x38);  // 1.0
  const std::map<std::string, double> s = {{"lr", 1e-3},     {"beta1", 0.9},
                                           {"beta2", 0.999}, {"epsilon", 1e-8},
                                           {"step", 1},      {"weight_decay", 0.01}};
  auto call = [&](bool fp32_grad, double scale) {
    std::map<std::string, double> sc = s;
    sc["grad_scale_inv"] = scale;
    std::vector<Tensor> t = {{"var", var.data(), DType::f32, {n}},
                             {"m", m.data(), DType::f32, {n}},
                             {"v", v.data(), DType::f32, {n}}};
    t.push_back(fp32_grad ? Tensor{"grad", grad32.data(), DType::f32, {n}}
                          : Tensor{"grad", grad.data(), DType::f8e4m3, {n}});
    std::string what;
    try {
      k.call(t, sc);
    } catch (const Error& e) {
      what = e.what();
    }
    return what;
  };
  for (double bad : {0.0, -1.0, double(NAN), double(INFINITY)}) {
    const std::string what = call(false, bad);
    CAPTURE(bad);
    CHECK(what.find("grad_scale_inv") != std::string::npos);
  }
  const std::string what = call(true, 1.0);
  CHECK(what.find("grad") != std::string::npos);
  CHECK(what.find("float8_e4m3fn") != std::string::npos);
  CHECK(var == std::vector<float>(n, 1.f));
  CHECK(call(false, 0.5).empty());  // and a good call runs
  CHECK(var != std::vector<float>(n, 1.f));
}

}  // namespace
}  // namespace opforge::testing
