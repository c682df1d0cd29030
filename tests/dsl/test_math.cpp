// dsl/math: sign() and reciprocal() against exact results, JIT-compiled for the vector
// target the kernels use and for the scalar path.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "dsl/math.h"

namespace opforge::dsl {
namespace {

int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = std::numeric_limits<int32_t>::min() - ia;
  if (ib < 0) ib = std::numeric_limits<int32_t>::min() - ib;
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

std::vector<float> realize(Halide::Expr (*f)(const Halide::Expr&), const std::vector<float>& in,
                           int vector_width) {
  Halide::Buffer<float> b(const_cast<float*>(in.data()), static_cast<int>(in.size()));
  Halide::ImageParam p(Halide::Float(32), 1, "x");
  Halide::Var i("i");
  Halide::Func out("out");
  out(i) = f(p(i));
  if (vector_width > 1) out.vectorize(i, vector_width, Halide::TailStrategy::GuardWithIf);
  p.set(b);
  Halide::Buffer<float> r = out.realize({static_cast<int>(in.size())});
  return std::vector<float>(r.data(), r.data() + in.size());
}

TEST_CASE("reciprocal: within 2 ulp of 1/x for normal x, exact for 0, inf, NaN") {
  // Denormal x gives +-inf (documented), so the random values stay normal.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, inf, -inf, std::nanf(""), 1.0f, -3.0f, 1e-30f, 3e37f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-100, 100);
  for (int k = 0; k < 4000; ++k) x.push_back(std::ldexp(mant(rng), expo(rng)) * (k % 2 ? 1 : -1));
  for (int width : {1, 8, 16}) {
    CAPTURE(width);
    const std::vector<float> got = realize(reciprocal, x, width);
    int64_t worst = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      const float want = 1.0f / x[k];
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
    MESSAGE("width " << width << ": worst " << worst << " ulp");
  }
}

TEST_CASE("sign: 1, -1 and 0 (TensorFlow's sign(0) == 0)") {
  const std::vector<float> x = {3.5f, -0.25f, 0.0f, -0.0f, 1e-40f, -1e-40f};
  const std::vector<float> got = realize(sign, x, 8);
  CHECK(got == std::vector<float>{1, -1, 0, 0, 1, -1});
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
  const std::vector<float> x = {0.0f, -0.0f, 1.0f, -2.5f, 1e-45f, 3.4028235e38f, -3.4028235e38f,
                                inf, -inf, std::nanf(""), -std::nanf(""), snan};
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
