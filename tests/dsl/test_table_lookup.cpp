// dsl/table_lookup: lookups into constant tables as permutes, JIT-compiled with their bitcode
// linked (linked_jit.h) for each permute level this host runs, at 1, 8, 16 and 32 lanes
// (scalar calls, Halide's splitting of wide vectors): every index gives its entry.
#include <doctest/doctest.h>

#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/table_lookup.h"
#include "linked_jit.h"

namespace opforge::dsl {
namespace {

// How many of out(i) = lookup(idx(i)) differ from table[idx(i) mod n], every index in [0, n)
// at every lane position of every vector width (33 rotations of 0 .. n - 1), plus a multiple of
// n (from -16 n to 16 n: bits the lookups do not read) when `high` (n is then 8 or 32).
template <typename T>
int wrong_lookups(const std::function<Halide::Expr(const Halide::Expr&)>& lookup,
                  const std::vector<T>& table, int width, const Halide::Target& target,
                  bool high = false) {
  const int n = static_cast<int>(table.size());
  std::vector<int32_t> idx;
  for (int r = 0; r < 33; ++r) {
    for (int k = 0; k < n; ++k) idx.push_back((k + r) % n + (high ? (r - 16) * n : 0));
  }
  Halide::Buffer<int32_t> in(idx.data(), static_cast<int>(idx.size()));
  Halide::Buffer<T> out(static_cast<int>(idx.size()));
  Halide::ImageParam p(Halide::Int(32), 1, "idx");
  Halide::Var i("i");
  Halide::Func f("f");
  f(i) = lookup(p(i));
  if (width > 1) f.vectorize(i, width, Halide::TailStrategy::GuardWithIf);
  testing::realize_linked(f, {p}, {in.raw_buffer()}, out.raw_buffer(), target);
  int wrong = 0;
  for (size_t k = 0; k < idx.size(); ++k)
    wrong += out(static_cast<int>(k)) != table[(idx[k] % n + n) % n];
  return wrong;
}

TEST_CASE("table_lookup: 8 and 32 int32 or fp32 entries, lookup_float's 256, every width") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-3.f, 3.f);
  std::vector<float> big(256);
  for (float& x : big) x = unit(rng);
  std::vector<Halide::Expr> f8, i8, f32, i32;
  std::vector<float> f8v, f32v;
  std::vector<int32_t> i8v, i32v;
  for (int k = 0; k < 32; ++k) {
    f32v.push_back(unit(rng));
    i32v.push_back(static_cast<int32_t>(rng()));
    f32.push_back(f32v.back());
    i32.push_back(i32v.back());
    if (k >= 8) continue;
    f8v.push_back(unit(rng));
    i8v.push_back(static_cast<int32_t>(rng()));
    f8.push_back(f8v.back());
    i8.push_back(i8v.back());
  }
  for (const auto& [permutes, target] : testing::host_permutes()) {
    for (int width : {1, 8, 16, 32}) {
      CAPTURE(target.to_string());
      CAPTURE(width);
      CHECK(wrong_lookups<float>([&](const Halide::Expr& i) { return table_lookup(f8, i); }, f8v,
                                 width, target) == 0);
      CHECK(wrong_lookups<int32_t>([&](const Halide::Expr& i) { return table_lookup(i8, i); }, i8v,
                                   width, target) == 0);
      // Only the low 3 bits are read.
      CHECK(wrong_lookups<float>([&](const Halide::Expr& i) { return table_lookup(f8, i); }, f8v,
                                 width, target, true) == 0);
      if (permutes == Permutes::avx512) {
        CHECK(wrong_lookups<float>([&](const Halide::Expr& i) { return table_lookup(f32, i); },
                                   f32v, width, target) == 0);
        CHECK(wrong_lookups<int32_t>([&](const Halide::Expr& i) { return table_lookup(i32, i); },
                                     i32v, width, target) == 0);
        CHECK(wrong_lookups<float>([&](const Halide::Expr& i) { return table_lookup(f32, i); },
                                   f32v, width, target, true) == 0);  // low 5 bits
        CHECK(wrong_lookups<int32_t>([&](const Halide::Expr& i) { return table_lookup(i32, i); },
                                     i32v, width, target, true) == 0);
        CHECK(wrong_lookups<float>([&](const Halide::Expr& i) { return lookup_float(big, i); }, big,
                                   width, target) == 0);
      }
    }
  }
}

// How many of f(l, j, bx, by) = transposed_lane(j, element (l, j), the 16 rows of block (bx, by))
// differ from element (l, j) of the block, over a 48 x 32 input of distinct values (3 x 2 blocks;
// element (i, l) of block (bx, by) is in(16 bx + l, 16 by + i)), under `schedule`.
int wrong_transposes(const std::function<void(Halide::Func, Halide::Var, Halide::Var)>& schedule,
                     const Halide::Target& target) {
  Halide::Buffer<float> in(48, 32);
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 48; ++x) in(x, y) = static_cast<float>(1000 * y + x);
  }
  Halide::ImageParam p(Halide::Float(32), 2, "in");
  Halide::Var l("l"), j("j"), bx("bx"), by("by");
  std::vector<Halide::Expr> rows;
  for (int i = 0; i < 16; ++i) rows.push_back(p(bx * 16 + l, by * 16 + i));
  Halide::Func f("f");
  f(l, j, bx, by) = transposed_lane(j, p(bx * 16 + j, by * 16 + l), rows);
  f.bound(l, 0, 16).bound(j, 0, 16);
  schedule(f, l, j);
  Halide::Buffer<float> out(16, 16, 3, 2);
  testing::realize_linked(f, {p}, {in.raw_buffer()}, out.raw_buffer(), target);
  int wrong = 0;
  out.for_each_element([&](int l_, int j_, int bx_, int by_) {
    wrong += out(l_, j_, bx_, by_) != in(bx_ * 16 + j_, by_ * 16 + l_);
  });
  return wrong;
}

TEST_CASE("transposed_lane: a 16 x 16 block's rows transposed, scalar and vectorized") {
  using Sched = std::function<void(Halide::Func, Halide::Var, Halide::Var)>;
  const std::vector<std::pair<const char*, Sched>> schedules = {
      {"scalar", [](Halide::Func, Halide::Var, Halide::Var) {}},
      // The form it is for: 16 lanes, the 16 rows of j unrolled (one shared network).
      {"16 lanes, j unrolled",
       [](Halide::Func f, Halide::Var l, Halide::Var j) { f.vectorize(l, 16).unroll(j); }},
      {"16 lanes, j a loop",
       [](Halide::Func f, Halide::Var l, Halide::Var) { f.vectorize(l, 16); }},
      // No 8-lane form: Halide calls the scalar one per lane.
      {"8 lanes", [](Halide::Func f, Halide::Var l, Halide::Var) { f.vectorize(l, 8); }},
  };
  for (const auto& [permutes, target] : testing::host_permutes()) {
    if (permutes != Permutes::avx512) continue;
    for (const auto& [name, schedule] : schedules) {
      const std::string what = name;
      CAPTURE(what);
      CHECK(wrong_transposes(schedule, target) == 0);
    }
  }
  const Halide::Expr x = Halide::Var("x"), one = 1.f;
  CHECK_THROWS_AS(transposed_lane(x, one, std::vector<Halide::Expr>(15, one)),
                  std::invalid_argument);
  CHECK_THROWS_AS(transposed_lane(x, Halide::Expr(1.0), std::vector<Halide::Expr>(16, one)),
                  std::invalid_argument);
}

TEST_CASE("table_lookup: tables it cannot look up are refused") {
  const Halide::Expr i = Halide::Var("i");
  CHECK_THROWS_AS(table_lookup({}, i), std::invalid_argument);
  CHECK_THROWS_AS(table_lookup(std::vector<Halide::Expr>(33, Halide::Expr(1.f)), i),
                  std::invalid_argument);
  CHECK_THROWS_AS(table_lookup(std::vector<Halide::Expr>(33, Halide::Expr(1)), i),
                  std::invalid_argument);
  CHECK_THROWS_AS(table_lookup({Halide::Expr(1.f), Halide::Expr(1)}, i), std::invalid_argument);
  CHECK_THROWS_AS(table_lookup({Halide::Expr(1.0)}, i), std::invalid_argument);  // fp64
  CHECK_THROWS_AS(table_lookup({Halide::Expr(1.f)}, Halide::cast<uint8_t>(i)),
                  std::invalid_argument);
}

TEST_CASE("link_table_lookups: a 32-entry lookup is refused for an AVX2 target") {
  Halide::ImageParam p(Halide::Int(32), 1, "idx");
  Halide::Var i("i");
  Halide::Func f("f");
  f(i) = table_lookup(std::vector<Halide::Expr>(32, Halide::Expr(1.f)), p(i));
  Halide::Module m =
      f.compile_to_module({p}, "wide", Halide::Target("x86-64-linux-sse41-avx-f16c-fma-avx2"));
  CHECK_THROWS_AS(link_table_lookups(m), std::logic_error);
  Halide::Func g("g");
  g(i) = Halide::cast<float>(p(i));  // no lookup: nothing to link, nothing refused
  Halide::Module none = g.compile_to_module({p}, "none", Halide::Target("x86-64-linux-sse41"));
  link_table_lookups(none);
  CHECK(none.external_code().empty());
}

TEST_CASE("permutes_of: AVX-512 at any level, AVX2, none elsewhere") {
  CHECK(permutes_of(Halide::Target("x86-64-linux-avx512_skylake")) == Permutes::avx512);
  CHECK(permutes_of(Halide::Target("x86-64-linux-avx512")) == Permutes::avx512);
  CHECK(permutes_of(Halide::Target("x86-64-linux-sse41-avx-f16c-fma-avx2")) == Permutes::avx2);
  CHECK(permutes_of(Halide::Target("x86-64-linux-sse41")) == Permutes::none);
  CHECK(permutes_of(Halide::Target("arm-64-linux")) == Permutes::none);
  CHECK(table_lookup_bitcode(Halide::Target("x86-64-linux-sse41")).empty());
  CHECK_FALSE(table_lookup_bitcode(Halide::Target("x86-64-linux-avx512")).empty());
}

TEST_CASE("table_lookup_bitcode: no path of the checkout in it (it is in every cache key)") {
  for (const char* t : {"x86-64-linux-sse41-avx-f16c-fma-avx2", "x86-64-linux-avx512"}) {
    const std::vector<uint8_t>& code = table_lookup_bitcode(Halide::Target(t));
    const std::string text(code.begin(), code.end());
    CAPTURE(t);
    CHECK(text.find("table_lookup.c") != std::string::npos);  // its source, by bare name
    CHECK(text.find("/table_lookup.c") == std::string::npos);
  }
}

}  // namespace
}  // namespace opforge::dsl
