// dsl/quant8: the four 8-bit maps against tables written here from their definitions
// (Dettmers et al. 2022's dynamic map, bitsandbytes' create_dynamic_map; the linear maps), and
// decode8 / encode8 JIT-compiled (16 and 8 lanes, and scalar) against them: every code decodes
// to its table value exactly, and every value encodes to the nearest table value, except where
// it lies within a few fp32 ulps of the midpoint between two (either neighbour is then right);
// dequantize8 (the kernels' decode times absmax) within an ulp or two of the exact product.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "dsl/quant8.h"
#include "linked_jit.h"

namespace opforge::dsl {
namespace {

// The map from its definition, fp64 values rounded to fp32, sorted.
std::vector<float> expected_map(const StateQuant& q) {
  std::vector<double> v;
  if (q.map == QuantMap::linear) {
    for (int c = 0; c < 256; ++c) {
      v.push_back(q.is_signed ? (c == 255 ? 1.0 : (c - 127) / 127.0) : c / 255.0);
    }
  } else {
    for (int i = 0; i < 7; ++i) {
      const int per = q.is_signed ? 1 << i : 1 << (i + 1);
      for (int j = 0; j < per; ++j) {
        const double x = std::pow(10.0, i - 6) * (0.1 + 0.9 * (j + 0.5) / per);
        v.push_back(x);
        if (q.is_signed) v.push_back(-x);
      }
    }
    v.push_back(0.0);
    v.push_back(1.0);
    std::sort(v.begin(), v.end());
  }
  std::vector<float> out;
  for (double x : v) out.push_back(static_cast<float>(x));
  return out;
}

const std::array<StateQuant, 4> kMaps = {
    StateQuant{QuantMap::dynamic, true}, StateQuant{QuantMap::dynamic, false},
    StateQuant{QuantMap::linear, true}, StateQuant{QuantMap::linear, false}};

// out(i) = f(q, x(i)), vectorized by `width`, JIT-compiled; with a `linked` target through a
// module that links the table lookups' bitcode, as the kernels are (dsl::link_table_lookups).
template <typename In, typename Out>
std::vector<Out> realize(
    const std::vector<In>& in,
    const std::function<Halide::Expr(const StateQuant&, const Halide::Expr&)>& f,
    const StateQuant& q, int width, const Halide::Target* linked = nullptr) {
  Halide::Buffer<In> b(const_cast<In*>(in.data()), static_cast<int>(in.size()));
  Halide::ImageParam p(Halide::type_of<In>(), 1, "x");
  Halide::Var i("i");
  Halide::Func out("out");
  out(i) = Halide::cast(Halide::type_of<Out>(), f(q, p(i)));
  if (width > 1) out.vectorize(i, width, Halide::TailStrategy::GuardWithIf);
  Halide::Buffer<Out> r(static_cast<int>(in.size()));
  if (linked) {
    testing::realize_linked(out, {p}, {b.raw_buffer()}, r.raw_buffer(), *linked);
  } else {
    p.set(b);
    out.realize(r);
  }
  return std::vector<Out>(r.data(), r.data() + in.size());
}

Halide::Expr decode_f32(const StateQuant& q, const Halide::Expr& c) {
  return decode8(q, c);
}

TEST_CASE("quant8 maps: 256 sorted values as defined, 0 and 1 included") {
  for (const StateQuant& q : kMaps) {
    CAPTURE(q.name());
    const std::array<float, 256> t = q.table();
    const std::vector<float> want = expected_map(q);
    REQUIRE(want.size() == 256);
    for (int c = 0; c < 256; ++c) CHECK_MESSAGE(t[c] == want[c], "code " << c);
    CHECK(std::is_sorted(t.begin(), t.end()));
    CHECK(std::count(t.begin(), t.end(), 0.f) >= 1);
    CHECK(t[255] == 1.f);
  }
  // The paper's layout: 127 negatives, zero at 127, the smallest magnitude 0.55e-6.
  const std::array<float, 256> s = StateQuant{QuantMap::dynamic, true}.table();
  CHECK(s[127] == 0.f);
  CHECK(s[126] < 0.f);
  CHECK(s[128] == static_cast<float>(0.55e-6));
  CHECK(s[0] == -s[254]);
}

// How many codes decoded to something other than their map value (the first few printed).
int wrong_codes(const std::vector<float>& got, const std::vector<float>& want) {
  int wrong = 0;
  for (int c = 0; c < 256; ++c) {
    if (got[c] == want[c]) continue;
    if (++wrong <= 3) MESSAGE("code " << c << ": " << got[c] << " want " << want[c]);
  }
  return wrong;
}

TEST_CASE("decode8: every code gives its map value exactly, on every vector width") {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  for (const StateQuant& q : kMaps) {
    const std::vector<float> want = expected_map(q);
    for (int width : {1, 8, 16}) {
      CAPTURE(q.name());
      CAPTURE(width);
      CHECK(wrong_codes(realize<uint8_t, float>(codes, decode_f32, q, width), want) == 0);
    }
    // Looked up with the permutes (the dynamic maps on AVX-512; the others compute as above).
    for (const auto& [permutes, target] : testing::host_permutes()) {
      const auto decode = [permutes = permutes](const StateQuant& m, const Halide::Expr& c) {
        return decode8(m, c, Halide::Float(32), permutes);
      };
      for (int width : {1, 8, 16, 32}) {
        CAPTURE(q.name());
        CAPTURE(width);
        CAPTURE(target.to_string());
        CHECK(wrong_codes(realize<uint8_t, float>(codes, decode, q, width, &target), want) == 0);
      }
    }
  }
}

TEST_CASE("dequantize8: map value times absmax, within an ulp or two of the exact product") {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  for (const StateQuant& q : kMaps) {
    const std::vector<float> table = expected_map(q);
    for (float absmax : {1.f, 0.37f, 3.1e-5f, 7.7e-30f, 2.5e30f}) {
      for (int width : {1, 8, 16}) {
        CAPTURE(q.name());
        CAPTURE(absmax);
        CAPTURE(width);
        const auto deq = [absmax](const StateQuant& m, const Halide::Expr& c) {
          return dequantize8(m, c, Halide::Expr(absmax));
        };
        const std::vector<float> got = realize<uint8_t, float>(codes, deq, q, width);
        int wrong = 0;
        for (int c = 0; c < 256; ++c) {
          // The exact product (the signed linear map's code 255 is 1.0, as 254 is; the dynamic
          // map's fp32 table value). The linear form rounds twice (the step, the product):
          // within an ulp; the dynamic map's division and product, which Halide's simplifier
          // may reassociate, within two.
          double exact = static_cast<double>(table[c]);
          if (q.map == QuantMap::linear) {
            exact = q.is_signed ? (std::min(c, 254) - 127) / 127.0 : c / 255.0;
          }
          exact *= absmax;
          const double tol = std::ldexp(std::fabs(exact), q.map == QuantMap::linear ? -23 : -22);
          if (std::fabs(got[c] - exact) <= tol) continue;
          if (++wrong <= 3) MESSAGE("code " << c << ": " << got[c] << " want " << exact);
        }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("encode8: a prescaled value gives the same code as the plain one") {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  for (const StateQuant& q : kMaps) {
    std::vector<float> y;
    for (int k = 0; k < 5000; ++k) y.push_back(q.is_signed ? unit(rng) : std::fabs(unit(rng)));
    const float gain = static_cast<float>(encode_gain(q, Halide::Float(32)));
    CHECK(gain == (q.map == QuantMap::linear ? (q.is_signed ? 127.f : 255.f) : 1.f));
    for (int width : {1, 16}) {
      CAPTURE(q.name());
      CAPTURE(width);
      const auto plain = [](const StateQuant& m, const Halide::Expr& v) { return encode8(m, v); };
      const auto pre = [gain](const StateQuant& m, const Halide::Expr& v) {
        return encode8(m, v * gain, false, true);
      };
      CHECK(realize<float, uint8_t>(y, plain, q, width) ==
            realize<float, uint8_t>(y, pre, q, width));
    }
  }
}

TEST_CASE("encode8: the nearest map value, up to fp32 rounding at the midpoints") {
  std::mt19937 rng(20);
  for (const StateQuant& q : kMaps) {
    const std::vector<float> table = expected_map(q);
    std::vector<float> y;
    // Every map value, the midpoints between neighbours and 2 ulps either side of them,
    // and random values spread over every decade.
    for (int c = 0; c < 256; ++c) y.push_back(table[c]);
    for (int c = 0; c + 1 < 256; ++c) {
      float m = static_cast<float>((static_cast<double>(table[c]) + table[c + 1]) / 2);
      y.push_back(m);
      y.push_back(std::nextafter(std::nextafter(m, 2.f), 2.f));
      y.push_back(std::nextafter(std::nextafter(m, -2.f), -2.f));
    }
    std::uniform_real_distribution<double> expo(-7.5, 0), unit(0, 1);
    for (int k = 0; k < 20000; ++k) {
      const float mag = static_cast<float>(k % 2 ? std::pow(10.0, expo(rng)) : unit(rng));
      y.push_back(q.is_signed && k % 3 == 0 ? -mag : mag);
    }
    y.push_back(0.f);
    y.push_back(1.f);
    if (q.is_signed) y.push_back(-1.f);
    // Far below the smallest value (code 0), down to denormals: binades whose exponent the
    // permute forms' lookups alias or whose decade count they leave unclamped.
    for (float tiny : {1e-9f, 3e-10f, 1e-12f, 1e-20f, 1e-30f, 1e-38f, 1e-40f, 1e-45f}) {
      y.push_back(tiny);
      if (q.is_signed) y.push_back(-tiny);
    }
    // Every form of the dynamic map's decade count: compares; sign bits (AVX-512); the binade
    // and one lookup (with each permute level the host runs), at 1, 8, 16 and 32 lanes.
    struct Form {
      int width;
      bool masks;
      Permutes permutes;
      const Halide::Target* target;
    };
    std::vector<Form> forms = {{1, false, Permutes::none, nullptr},
                               {16, false, Permutes::none, nullptr},
                               {1, true, Permutes::none, nullptr},
                               {16, true, Permutes::none, nullptr}};
    const auto permutes = testing::host_permutes();
    for (const auto& [level, target] : permutes) {
      for (int width : {1, 8, 16, 32})
        forms.push_back({width, level == Permutes::avx512, level, &target});
    }
    for (const Form& form : forms) {
      CAPTURE(q.name());
      CAPTURE(form.width);
      CAPTURE(form.masks);
      CAPTURE(static_cast<int>(form.permutes));
      const auto encode = [form](const StateQuant& m, const Halide::Expr& v) {
        return encode8(m, v, form.masks, false, form.permutes);
      };
      const std::vector<uint8_t> got =
          realize<float, uint8_t>(y, encode, q, form.width, form.target);
      int wrong = 0, ties = 0;
      for (size_t k = 0; k < y.size(); ++k) {
        // The nearest value in fp64; a tie band of 4 ulps of y around each midpoint.
        int best = 0;
        for (int c = 1; c < 256; ++c) {
          if (std::fabs(static_cast<double>(table[c]) - y[k]) <
              std::fabs(static_cast<double>(table[best]) - y[k]))
            best = c;
        }
        if (got[k] == best || table[got[k]] == table[best]) continue;
        const double d_got = std::fabs(static_cast<double>(table[got[k]]) - y[k]);
        const double d_best = std::fabs(static_cast<double>(table[best]) - y[k]);
        const double band = 4 * std::fabs(std::nextafter(y[k], 2.f) - y[k]);
        if (d_got - d_best <= 2 * band) {
          ++ties;
        } else {
          ++wrong;
          if (wrong <= 5)
            MESSAGE("y=" << y[k] << " got code " << int(got[k]) << " (" << table[got[k]]
                         << ") want " << best << " (" << table[best] << ")");
        }
      }
      CHECK(wrong == 0);
      CHECK(ties <= 3 * 255);  // only the values placed next to midpoints may tie
    }
  }
}

}  // namespace
}  // namespace opforge::dsl
