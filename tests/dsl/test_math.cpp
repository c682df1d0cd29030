// dsl/math: sign(), reciprocal() both ways lower_fp32_math resolves it, the full-width sqrt
// against exact results, exp, log and pow against libm with their special values, JIT-compiled for
// the vector target the kernels use and for the scalar path; the f16/bf16 storage conversions
// bit-exactly against the IEEE reference rounding (tests/ieee_half.h), on the host and the avx2
// target.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "dsl/math.h"
#include "dsl/table_lookup.h"
#include "dsl/ulp.h"
#include "ieee_half.h"

namespace opforge::dsl {
namespace {

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

uint32_t f32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// f over `in`, JIT-compiled for the host, or with `linked` for that target through a module
// that links dsl/table_lookup.c's bitcode, as the kernels are built.
std::vector<float> realize(Halide::Expr (*f)(const Halide::Expr&), const std::vector<float>& in,
                           int vector_width, const Halide::Target* linked = nullptr) {
  Halide::Buffer<float> b(const_cast<float*>(in.data()), static_cast<int>(in.size()));
  Halide::ImageParam p(Halide::Float(32), 1, "x");
  Halide::Var i("i");
  Halide::Func out("out");
  out(i) = f(p(i));
  if (vector_width > 1) out.vectorize(i, vector_width, Halide::TailStrategy::GuardWithIf);
  Halide::Buffer<float> r(static_cast<int>(in.size()));
  if (linked) {
    Halide::Module m = out.compile_to_module({p}, "linked", *linked);
    link_table_lookups(m);
    Halide::Internal::JITModule jit(m, m.get_function_by_name("linked"), {});
    std::vector<const void*> argv = {b.raw_buffer(), r.raw_buffer()};
    REQUIRE(jit.argv_function()(argv.data()) == 0);
  } else {
    p.set(b);
    out.realize(r);
  }
  return std::vector<float>(r.data(), r.data() + in.size());
}

Halide::Expr estimated_reciprocal(const Halide::Expr& x) {
  return lower_fp32_math(reciprocal(x), Fp32Math{});
}
Halide::Expr divided_reciprocal(const Halide::Expr& x) {
  return lower_fp32_math(reciprocal(x), Fp32Math{true, false});
}
Halide::Expr lowered_sqrt(const Halide::Expr& x) {
  return lower_fp32_math(Halide::sqrt(x), Fp32Math{});
}

std::vector<float> special_and_random(int count, int lowest_exponent) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, inf, -inf, std::nanf(""), 1.0f, -3.0f, 1e-30f, 3e37f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(lowest_exponent, 100);
  for (int k = 0; k < count; ++k) x.push_back(std::ldexp(mant(rng), expo(rng)) * (k % 2 ? 1 : -1));
  return x;
}

// Bit-exact, a NaN for a NaN (payloads aside).
void check_exact(const std::vector<float>& got, const std::vector<float>& x, float (*want)(float)) {
  int wrong = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    const float w = want(x[k]);
    const bool ok = std::isnan(w) ? std::isnan(got[k]) : f32_bits(got[k]) == f32_bits(w);
    if (!ok && ++wrong <= 5) MESSAGE("x=" << x[k] << " got " << got[k] << " want " << w);
  }
  CHECK(wrong == 0);
}

TEST_CASE("reciprocal, divide: the exact IEEE 1/x, specials included") {
  const std::vector<float> x = special_and_random(4000, -100);
  for (int width : {1, 8, 16}) {
    CAPTURE(width);
    check_exact(realize(divided_reciprocal, x, width), x, [](float v) { return 1.0f / v; });
  }
}

TEST_CASE("sqrt, lowered: the correctly rounded sqrt at every width, specials included") {
  // Subnormal inputs too (exponents down to -140): the intrinsic must not flush them.
  const std::vector<float> x = special_and_random(4000, -140);
  for (int width : {1, 8, 16, 32}) {
    CAPTURE(width);
    check_exact(realize(lowered_sqrt, x, width), x, [](float v) { return std::sqrt(v); });
  }
}

// exp and log against libm: special values exactly, normal results within `max_ulp`, results
// below the normal range (exp's) within the smallest normal of 0 (Halide's exp flushes them).
void check_libm(const std::vector<float>& got, const std::vector<float>& x, float (*want)(float),
                int64_t max_ulp) {
  int wrong = 0;
  int64_t worst = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    const float w = want(x[k]);
    bool ok;
    if (std::isnan(w) || std::isinf(w) || w == 0) {
      ok = std::isnan(w) ? std::isnan(got[k]) : got[k] == w;
    } else if (std::fabs(w) < std::numeric_limits<float>::min()) {
      ok = std::fabs(got[k] - w) < std::numeric_limits<float>::min();
    } else {
      worst = std::max(worst, ulp_distance(got[k], w));
      ok = ulp_distance(got[k], w) <= max_ulp;
    }
    if (!ok && ++wrong <= 5)
      MESSAGE("x=" << x[k] << " got " << got[k] << " want " << w << " (" << ulp_distance(got[k], w)
                   << " ulp)");
  }
  MESSAGE("worst " << worst << " ulp");
  CHECK(wrong == 0);
}

TEST_CASE("exp and log for rules: libm's values, +inf and NaN where Halide 14's give 0 or finite") {
  const float inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(11);
  std::vector<float> e = {-inf,    inf,   std::nanf(""), -1000.f, -103.f, -87.5f, -10.f,
                          -1e-30f, 0.f,   -0.f,          1e-30f,  1.f,    10.f,   88.f,
                          88.7f,   88.8f, 100.f,         1e10f,   3e38f};
  std::uniform_real_distribution<float> arg(-87.f, 88.f);
  for (int k = 0; k < 3000; ++k) e.push_back(arg(rng));
  // log: specials, denormals (exponents down to -149), and positive and negative normals.
  std::vector<float> l = special_and_random(3000, -149);
  for (float v : {std::ldexp(1.f, -149), std::ldexp(3.f, -140), std::ldexp(1.f, -126), 1.f})
    l.push_back(v);
  for (int width : {1, 8, 16}) {
    CAPTURE(width);
    // Halide's polynomial: 5 ulp at worst here (x near -85, where 2^k scales its rounding).
    const auto exp_f = [](float v) { return std::exp(v); };
    const auto log_f = [](float v) { return std::log(v); };
    check_libm(realize(dsl::exp, e, width), e, exp_f, 8);
    check_libm(realize(dsl::log, l, width), l, log_f, 4);
  }
}

// f(x[k], y[k]) for every k, vectorized at `vector_width` (1: scalar).
std::vector<float> realize2(Halide::Expr (*f)(const Halide::Expr&, const Halide::Expr&),
                            const std::vector<float>& x, const std::vector<float>& y,
                            int vector_width) {
  const int n = static_cast<int>(x.size());
  Halide::Buffer<float> bx(const_cast<float*>(x.data()), n), by(const_cast<float*>(y.data()), n);
  Halide::ImageParam px(Halide::Float(32), 1, "x"), py(Halide::Float(32), 1, "y");
  Halide::Var i("i");
  Halide::Func out("out");
  out(i) = f(px(i), py(i));
  if (vector_width > 1) out.vectorize(i, vector_width, Halide::TailStrategy::GuardWithIf);
  px.set(bx);
  py.set(by);
  Halide::Buffer<float> r = out.realize({n});
  return std::vector<float>(r.data(), r.data() + n);
}

TEST_CASE("pow for rules: C99's special values exactly, others within a few ulp plus |t| ulp") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  // Every pair of these: zeros, ones, infinities, NaN, odd and even integers, non-integers,
  // huge (even) integers, both signs.
  const std::vector<float> specials = {0.f,  -0.f,  1.f,    -1.f,  inf,    -inf,   nan,   2.f,
                                       -2.f, 3.f,   -3.f,   0.5f,  -0.5f,  2.5f,   -2.5f, 0.25f,
                                       -7.f, 1e-3f, -1e-3f, 1e30f, -1e30f, 1e-40f, 3e7f,  -3e7f};
  std::vector<float> x, y;
  for (float a : specials) {
    for (float b : specials) x.push_back(a), y.push_back(b);
  }
  // Random finite cases: positive bases over many magnitudes, negative bases with integer
  // exponents, results over the whole normal range.
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> mag(-30.f, 30.f), ex(-4.f, 4.f);
  std::uniform_int_distribution<int> odd(-9, 9);
  for (int k = 0; k < 3000; ++k) {
    x.push_back(std::exp(mag(rng)));
    y.push_back(ex(rng));
    x.push_back(-std::exp(mag(rng) / 8));
    y.push_back(static_cast<float>(odd(rng)) + (k % 7 == 0 ? 0.5f : 0.f));
  }
  for (int width : {1, 8, 16}) {
    CAPTURE(width);
    const std::vector<float> got = realize2(dsl::pow, x, y, width);
    int wrong = 0;
    double worst = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      const float want = std::pow(x[k], y[k]);
      bool ok;
      if (std::isnan(want) || std::isinf(want) || want == 0.f || want == 1.f ||
          std::fabs(want) < std::numeric_limits<float>::min()) {
        // Exactly, sign included (pow(-0, -3) = -inf, pow(-0, 3) = -0); the subnormal
        // results within the smallest normal (Halide's exp flushes them).
        ok = std::isnan(want) ? std::isnan(got[k])
             : std::fabs(want) < std::numeric_limits<float>::min() && want != 0.f
                 ? std::fabs(got[k] - want) < std::numeric_limits<float>::min()
                 : got[k] == want && std::signbit(got[k]) == std::signbit(want);
      } else {
        // exp's argument t = y log|x| carries about |t| ulp of absolute error into the result.
        const double t = std::fabs(y[k] * std::log(std::fabs(static_cast<double>(x[k]))));
        const double ulps = static_cast<double>(ulp_distance(got[k], want));
        worst = std::max(worst, ulps / (8 + t));
        ok = ulps <= 8 + t;
      }
      if (!ok && ++wrong <= 8)
        MESSAGE("pow(" << x[k] << ", " << y[k] << ") got " << got[k] << " want " << want);
    }
    MESSAGE("worst " << worst << " of the (8 + |t|) ulp bound");
    CHECK(wrong == 0);
  }
}

// The estimate's contract: within 2 ulp of 1/x for normal x; exact for +-0, +-inf and NaN;
// +-inf for denormal x (1/x overflows there anyway).
void check_estimate(const std::vector<float>& x, const std::vector<float>& got) {
  const float inf = std::numeric_limits<float>::infinity();
  int64_t worst = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    const float want =
        std::fpclassify(x[k]) == FP_SUBNORMAL ? std::copysign(inf, x[k]) : 1.0f / x[k];
    if (std::isnan(want)) {
      CHECK(std::isnan(got[k]));
    } else if (std::isinf(want) || want == 0) {
      CHECK_MESSAGE(got[k] == want, "x=" << x[k] << " got " << got[k]);
      CHECK(std::signbit(got[k]) == std::signbit(want));
    } else {
      worst = std::max(worst, ulp_distance(got[k], want));
    }
  }
  CHECK(worst <= 2);
  MESSAGE("worst " << worst << " ulp");
}

std::vector<float> estimate_inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  // Normal results only (1/x below FLT_MIN, x above 8.5e37, is outside the contract: rcpps
  // flushes it to 0).
  std::vector<float> x = {0.0f,  -0.0f,  inf,   -inf,   std::nanf(""), 1.0f,
                          -3.0f, 1e-30f, 3e37f, 1e-40f, -1e-40f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-100, 100);
  for (int k = 0; k < 4000; ++k) x.push_back(std::ldexp(mant(rng), expo(rng)) * (k % 2 ? 1 : -1));
  return x;
}

TEST_CASE("reciprocal, estimate: within 2 ulp of 1/x for normal x, exact for 0, inf, NaN") {
  const std::vector<float> x = estimate_inputs();
  for (int width : {1, 8, 16}) {
    CAPTURE(width);
    check_estimate(x, realize(estimated_reciprocal, x, width));
  }
}

Halide::Expr estimated_reciprocal14(const Halide::Expr& x) {
  return lower_fp32_math(reciprocal(x), Fp32Math{false, true});
}

TEST_CASE("reciprocal, estimate by vrcp14ps (AVX-512): the same contract at every width") {
  const Halide::Target host = Halide::get_host_target();
  if (host.arch != Halide::Target::X86 || !host.has_feature(Halide::Target::AVX512_Skylake)) {
    MESSAGE("skipped: the host lacks AVX-512 (Skylake's set)");
    return;
  }
  const Halide::Target target =
      Halide::Target("x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake")
          .with_feature(Halide::Target::JIT);
  REQUIRE(has_rcp14(target));
  const std::vector<float> x = estimate_inputs();
  // 1: the scalar form; 4, 8, 16: the vector forms; 5, 32: a tail and a split vector.
  for (int width : {1, 4, 5, 8, 16, 32}) {
    CAPTURE(width);
    check_estimate(x, realize(estimated_reciprocal14, x, width, &target));
  }
}

TEST_CASE("sign: 1, -1 and 0 (TensorFlow's sign(0) == 0)") {
  const std::vector<float> x = {3.5f, -0.25f, 0.0f, -0.0f, 1e-40f, -1e-40f};
  const std::vector<float> got = realize(sign, x, 8);
  CHECK(got == std::vector<float>{1, -1, 0, 0, 1, -1});
}

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// The bits f(x) stores, JIT-compiled for `target`.
std::vector<uint16_t> narrow_bits(Halide::Expr (*f)(Halide::Expr), const std::vector<float>& in,
                                  int vector_width, const Halide::Target& target) {
  Halide::Buffer<float> b(const_cast<float*>(in.data()), static_cast<int>(in.size()));
  Halide::ImageParam p(Halide::Float(32), 1, "x");
  Halide::Var i("i");
  Halide::Func out("out");
  out(i) = Halide::reinterpret(Halide::UInt(16), f(p(i)));
  if (vector_width > 1) out.vectorize(i, vector_width, Halide::TailStrategy::GuardWithIf);
  p.set(b);
  Halide::Buffer<uint16_t> r = out.realize({static_cast<int>(in.size())}, target);
  return std::vector<uint16_t>(r.data(), r.data() + in.size());
}

// Widening: the narrow bits read back as fp32 (the kernels' gradient reads).
std::vector<float> widen(const Halide::Type& t, const std::vector<uint16_t>& bits) {
  Halide::Buffer<uint16_t> b(const_cast<uint16_t*>(bits.data()), static_cast<int>(bits.size()));
  Halide::ImageParam p(Halide::UInt(16), 1, "h");
  Halide::Var i("i");
  Halide::Func out("out");
  out(i) = from_storage(Halide::reinterpret(t, p(i)));
  out.vectorize(i, 16, Halide::TailStrategy::GuardWithIf);
  p.set(b);
  Halide::Buffer<float> r = out.realize({static_cast<int>(bits.size())});
  return std::vector<float>(r.data(), r.data() + bits.size());
}

std::vector<float> edge_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, inf, -inf, 1.0f, -1.0f, std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(), 1e-40f, -3e-39f,
                          // f16: largest finite, just below and at the overflow tie, min subnormal
                          65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e5f, std::ldexp(1.0f, -24),
                          std::ldexp(1.0f, -25), std::ldexp(3.0f, -26), std::ldexp(3.0f, -25),
                          std::ldexp(1.0f, -14), std::ldexp(1023.0f, -24), std::ldexp(2047.0f, -25),
                          // f16 halfway cases (1 + 2^-11: to even, down; 1 + 3 * 2^-11: up)
                          1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11),
                          -(1.0f + std::ldexp(3.0f, -11)), 2048.5f, 2049.0f, 2051.0f};
  // bf16 halfway and near-halfway bit patterns, normal and subnormal, both signs.
  for (uint32_t u : {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0x00008000u, 0x00018000u,
                     0x007f8000u, 0x007fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x7f7fffffu, 0xbf818000u,
                     0x80008000u, 0x3fffffffu}) {
    x.push_back(from_bits(u));
  }
  // NaNs: quiet, signalling, payloads, both signs.
  for (uint32_t u : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fa00000u, 0x7fffffffu,
                     0x7f812345u, 0xffb00000u}) {
    x.push_back(from_bits(u));
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-30, 20);
  for (int k = 0; k < 3000; ++k) x.push_back(from_bits(bits(rng)));
  for (int k = 0; k < 3000; ++k) x.push_back(std::ldexp(mant(rng), expo(rng)) * (k % 2 ? 1 : -1));
  return x;
}

const char* const kAvx2 = "x86-64-linux-avx-avx2-f16c-fma-sse41";

TEST_CASE("reference rounding (tests/ieee_half.h) on hand-checked values") {
  CHECK(testing::ref_bf16_bits(1.0f) == 0x3f80);
  CHECK(testing::ref_bf16_bits(from_bits(0x3f808000u)) == 0x3f80);  // tie to even: down
  CHECK(testing::ref_bf16_bits(from_bits(0x3f818000u)) == 0x3f82);  // tie to even: up
  CHECK(testing::ref_bf16_bits(from_bits(0x7f7fffffu)) == 0x7f80);  // overflow to inf
  CHECK(testing::ref_bf16_bits(from_bits(0x00018000u)) == 0x0002);  // subnormal tie
  CHECK(testing::ref_bf16_bits(from_bits(0xff800001u)) == 0xffc0);  // sNaN: quiet, sign kept
  CHECK(testing::ref_f16_bits(65504.0f) == 0x7bff);
  CHECK(testing::ref_f16_bits(65519.0f) == 0x7bff);
  CHECK(testing::ref_f16_bits(65520.0f) == 0x7c00);
  CHECK(testing::ref_f16_bits(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(testing::ref_f16_bits(std::ldexp(1.0f, -25)) == 0x0000);  // tie to even: 0
  CHECK(testing::ref_f16_bits(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 quanta: to 2
  CHECK(testing::ref_f16_bits(-0.0f) == 0x8000);
  CHECK(testing::ref_f16_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(testing::ref_f16_bits(1.0f + std::ldexp(3.0f, -11)) == 0x3c02);
  CHECK(testing::ref_f16_bits(-std::nanf("")) == 0xfe00);
  CHECK(testing::f16_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(testing::f16_to_float(0xfbff) == -65504.0f);
}

// Runs `check` on the host's target and AVX2's, at 1, 8 and 16 lanes.
void on_targets_and_widths(const std::function<void(const Halide::Target&, int)>& check) {
  for (const std::string target : {"host", kAvx2}) {
    for (int width : {1, 8, 16}) {
      CAPTURE(target);
      CAPTURE(width);
      check(target == "host" ? Halide::get_jit_target_from_environment() : Halide::Target(target),
            width);
    }
  }
}

TEST_CASE("f32_to_bf16 / f32_to_f16: bit-exact RNE, NaN stays a quiet NaN, on host and avx2") {
  const std::vector<float> x = edge_values();
  on_targets_and_widths([&](const Halide::Target& t, int width) {
    const std::vector<uint16_t> bf = narrow_bits(f32_to_bf16, x, width, t);
    const std::vector<uint16_t> h = narrow_bits(f32_to_f16, x, width, t);
    int bad_bf = 0, bad_h = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      const uint16_t want_bf = testing::ref_bf16_bits(x[k]), want_h = testing::ref_f16_bits(x[k]);
      if (bf[k] != want_bf && bad_bf++ < 5) {
        FAIL_CHECK("bf16 of " << hex(f32_bits(x[k])) << ": " << hex(bf[k]) << ", want "
                              << hex(want_bf));
      }
      if (h[k] != want_h && bad_h++ < 5) {
        FAIL_CHECK("f16 of " << hex(f32_bits(x[k])) << ": " << hex(h[k]) << ", want "
                             << hex(want_h));
      }
    }
    CHECK(bad_bf == 0);
    CHECK(bad_h == 0);
  });
}

TEST_CASE("f32_to_bf16_computed: f32_to_bf16's rounding, every quiet NaN a NaN, on host and avx2") {
  std::vector<float> x = edge_values();
  // The NaNs whose bare rounding carries out of the exponent (into the sign, or wrapping to 0).
  for (uint32_t u : {0x7fff8000u, 0x7fffffffu, 0xffff8000u, 0xffffffffu, 0x7fff7fffu}) {
    x.push_back(from_bits(u));
  }
  on_targets_and_widths([&](const Halide::Target& t, int width) {
    const std::vector<uint16_t> bf = narrow_bits(f32_to_bf16_computed, x, width, t);
    int bad = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      const uint32_t u = f32_bits(x[k]);
      const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
      const bool quiet = nan && (u & 0x00400000u);
      if (nan && !quiet) continue;  // a signalling NaN: no arithmetic makes one (documented)
      // Finite and inf: the reference's bits. A quiet NaN: a NaN of the same sign.
      const bool ok = nan ? (bf[k] & 0x7fff) > 0x7f80 && (bf[k] >> 15) == (u >> 31)
                          : bf[k] == testing::ref_bf16_bits(x[k]);
      if (!ok && bad++ < 5) FAIL_CHECK("bf16 of " << hex(u) << ": " << hex(bf[k]));
    }
    CHECK(bad == 0);
  });
  // Why it exists: Halide 14's cast stores these NaNs as zeros. If a newer Halide fixes the cast
  // this documents the change.
  const std::vector<float> carry = {from_bits(0x7fffffffu), from_bits(0xffffffffu)};
  const std::vector<uint16_t> plain =
      narrow_bits([](Halide::Expr e) { return Halide::cast(Halide::BFloat(16), e); }, carry, 8,
                  Halide::get_jit_target_from_environment());
  WARN_MESSAGE((plain[0] & 0x7fff) == 0, "Halide's cast gave " << hex(plain[0]));
  WARN_MESSAGE(plain[1] == 0, "Halide's cast gave " << hex(plain[1]));
}

TEST_CASE("Halide 14's plain f32->f16 cast turns NaN into inf: why f32_to_f16 maps NaN itself") {
  const std::vector<float> x = {std::nanf(""), -std::nanf("")};
  const std::vector<uint16_t> plain =
      narrow_bits([](Halide::Expr e) { return Halide::cast(Halide::Float(16), e); }, x, 8,
                  Halide::get_jit_target_from_environment());
  const std::vector<uint16_t> ours =
      narrow_bits(f32_to_f16, x, 8, Halide::get_jit_target_from_environment());
  // If a newer Halide fixes the cast this documents the change; ours must be NaN either way.
  WARN_MESSAGE((plain[0] & 0x7fff) == 0x7c00, "Halide's cast gave " << hex(plain[0]));
  CHECK(ours[0] == 0x7e00);
  CHECK(ours[1] == 0xfe00);
}

TEST_CASE("from_storage: f16 and bf16 widen to fp32 exactly (every bit pattern)") {
  std::vector<uint16_t> all(65536);
  for (uint32_t k = 0; k < 65536; ++k) all[k] = static_cast<uint16_t>(k);
  const std::vector<float> bf = widen(Halide::BFloat(16), all), h = widen(Halide::Float(16), all);
  int bad = 0;
  for (uint32_t k = 0; k < 65536; ++k) {
    const float want_bf = testing::bf16_to_float(all[k]), want_h = testing::f16_to_float(all[k]);
    const bool ok_bf =
        std::isnan(want_bf) ? std::isnan(bf[k]) : f32_bits(bf[k]) == f32_bits(want_bf);
    const bool ok_h = std::isnan(want_h) ? std::isnan(h[k]) : f32_bits(h[k]) == f32_bits(want_h);
    if ((!ok_bf || !ok_h) && bad++ < 5) FAIL_CHECK("bits " << hex(k));
  }
  CHECK(bad == 0);
  // and narrowing what was widened gives the same bits back (NaNs aside)
  CHECK(testing::ref_f16_bits(testing::f16_to_float(0x03ff)) == 0x03ff);
}

TEST_CASE("maximum: keeps a NaN of either argument (torch.maximum), fp32 vectorized and fp64") {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> a = {1, 2, nan, nan, -inf, 0.5f, -0.0f, 3, nan, 1};
  const std::vector<float> b = {2, 1, 1, nan, 1, nan, 0.0f, inf, -nan, -nan};
  for (int w : {1, 8}) {
    CAPTURE(w);
    Halide::Buffer<float> ba(const_cast<float*>(a.data()), int(a.size()));
    Halide::Buffer<float> bb(const_cast<float*>(b.data()), int(b.size()));
    Halide::Var i("i");
    Halide::Func f("max_f32");
    f(i) = dsl::maximum(ba(i), bb(i));
    if (w > 1) f.vectorize(i, w, Halide::TailStrategy::GuardWithIf);
    Halide::Buffer<float> r = f.realize({int(a.size())});
    for (size_t k = 0; k < a.size(); ++k) {
      CAPTURE(k);
      if (std::isnan(a[k]) || std::isnan(b[k])) {
        CHECK(std::isnan(r(int(k))));
      } else {
        CHECK(r(int(k)) == std::max(a[k], b[k]));
      }
    }
  }
  Halide::Func g("max_f64");
  Halide::Var j("j");
  Halide::Buffer<double> x(2);
  x(0) = 1, x(1) = std::nan("");
  g(j) = dsl::maximum(x(j), Halide::Internal::make_const(Halide::Float(64), 0.5));
  Halide::Buffer<double> r = g.realize({2});
  CHECK(r(0) == 1);
  CHECK(std::isnan(r(1)));
}

}  // namespace
}  // namespace opforge::dsl

namespace opforge::dsl {
namespace {

Halide::Expr finite_as_float(const Halide::Expr& x) {
  return Halide::select(dsl::is_finite(x), 1.0f, 0.0f);
}

TEST_CASE("is_finite: false exactly for +-inf and NaNs, vectorized and scalar, fp32 and fp64") {
  const float inf = std::numeric_limits<float>::infinity();
  uint32_t payload_bits = 0x7f800001u;  // a signalling-NaN payload
  float snan;
  std::memcpy(&snan, &payload_bits, 4);
  const std::vector<float> x = {0.0f,   -0.0f,         1.0f,           -2.5f,
                                1e-45f, 3.4028235e38f, -3.4028235e38f, inf,
                                -inf,   std::nanf(""), -std::nanf(""), snan};
  const std::vector<float> want = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
  for (int w : {1, 8}) {
    CAPTURE(w);
    CHECK(realize(finite_as_float, x, w) == want);
  }
  // fp64: the golden evaluates updates in double.
  Halide::Func f("f64_finite");
  Halide::Var i("i");
  Halide::Buffer<double> in(3);
  in(0) = 1e300, in(1) = std::numeric_limits<double>::infinity(), in(2) = std::nan("");
  f(i) = Halide::select(dsl::is_finite(in(i)), 1, 0);
  Halide::Buffer<int> r = f.realize({3});
  CHECK(r(0) == 1);
  CHECK(r(1) == 0);
  CHECK(r(2) == 0);
}

}  // namespace
}  // namespace opforge::dsl
