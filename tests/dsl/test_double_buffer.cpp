// dsl/double_buffer and the elementwise recipe's double_buffer param: JIT-compiled pipelines
// run in place (the output aliasing the staged input, as the optimizer kernels run) at odd
// sizes, serial and parallel paths, fast paths and size buckets, against values computed
// here in double; the lowered IR holds the async producer's semaphores; misuse is refused.
#include <doctest/doctest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "dsl/double_buffer.h"
#include "dsl/elementwise_schedule.h"
#include "lowered_stmt.h"

namespace opforge::dsl {
namespace {

using Halide::Buffer;
using Halide::Func;
using Halide::ImageParam;
using Halide::Var;

const int kSizes[] = {1, 5, 17, 1000, 65543, 100003};

// a(i) * 3 - b(i) * s, every value an exact small integer in fp32.
double expected(int k, double s) {
  return (k % 13) * 3.0 - (k % 5) * s;
}

using testing::lowered_stmt;

// Runs `out` (over a, b, s) in place on a at each size; counts the elements that differ.
int wrong_in_place(Func out, ImageParam a, ImageParam b, Halide::Param<float> s, float sv) {
  out.compile_jit(Halide::get_host_target());
  int wrong = 0;
  for (int n : kSizes) {
    Buffer<float> A(n), B(n);
    for (int k = 0; k < n; ++k) A(k) = static_cast<float>(k % 13), B(k) = static_cast<float>(k % 5);
    a.set(A);
    b.set(B);
    s.set(sv);
    out.realize(A);  // in place: the output is a's buffer
    int bad = 0;
    for (int k = 0; k < n; ++k) bad += A(k) != expected(k, sv);
    if (bad) std::printf("n = %d: %d elements wrong\n", n, bad);
    wrong += bad;
  }
  return wrong;
}

TEST_CASE("double_buffer: a staged input, in place, odd sizes and grains, async and not") {
  for (int grain : {8, 20, 256}) {
    for (bool async : {true, false}) {
      CAPTURE(grain);
      CAPTURE(async);
      ImageParam a(Halide::Float(32), 1, "a"), b(Halide::Float(32), 1, "b");
      Halide::Param<float> s("s");
      Var i("i"), io("io"), ii("ii"), blk("blk"), bi("bi");
      Func out("out");
      out(i) = a(i) * 3.0f - b(i) * s;
      const Halide::Expr n = out.output_buffer().dim(0).extent();
      out.split(i, io, ii, Halide::max(1, (n + 1) / 2), Halide::TailStrategy::GuardWithIf)
          .parallel(io)
          .split(ii, blk, bi, grain, Halide::TailStrategy::GuardWithIf)
          .vectorize(bi, 8, Halide::TailStrategy::GuardWithIf);
      Func staged = Func(a).in(out);
      double_buffer(staged, out, io, blk, staged.args()[0], grain, 8, async);
      const std::string ir = lowered_stmt(out, {a, b, s});
      CHECK((ir.find("halide_semaphore_release") != std::string::npos) == async);
      CHECK(wrong_in_place(out, a, b, s, 2.0f) == 0);
    }
  }
}

TEST_CASE("double_buffer: refused with a prefetch in the consumer, or a slot under a vector") {
  ImageParam a(Halide::Float(32), 1, "a");
  Var i("i"), io("io"), blk("blk"), bi("bi");
  Func out("out");
  out(i) = a(i) + 1.0f;
  out.split(i, io, bi, 64).split(bi, blk, bi, 16);
  Func staged = Func(a).in(out);
  CHECK_THROWS_WITH_AS(double_buffer(staged, out, io, blk, staged.args()[0], 0, 8),
                       doctest::Contains("grain 0 must be at least 1 and one vector (8)"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(double_buffer(staged, out, io, blk, staged.args()[0], 4, 8),
                       doctest::Contains("grain 4 must be"), std::invalid_argument);
  out.prefetch(a, io, io, 1);
  CHECK_THROWS_WITH_AS(double_buffer(staged, out, io, blk, staged.args()[0], 16, 8),
                       doctest::Contains("async() with prefetch() hangs"), std::invalid_argument);
}

// The recipe on out(i) = a(i) * 3 - b(i) * s with a fast path (s == 0), as the optimizer
// pipelines call it.
struct RecipeCase {
  std::map<std::string, int64_t> given;
  const char* what;
};

TEST_CASE("elementwise recipe, double_buffer=1: serial and parallel paths, fast path, buckets") {
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  const RecipeCase cases[] = {
      {{{"double_buffer", 1}, {"db_grain", 256}}, "defaults"},
      {{{"double_buffer", 1}, {"db_grain", 300}, {"serial_below", 0}, {"unroll", 2}},
       "all parallel, grain rounded to whole vectors x unroll"},
      {{{"double_buffer", 1},
        {"db_grain", 256},
        {"serial_below", 100},
        {"tasks@50000", 3},
        {"unroll@50000", 4}},
       "size buckets"},
      {{{"double_buffer", 1}, {"db_grain", 4096}, {"chunk", 1000}, {"serial_below", 10}},
       "fixed chunks"},
  };
  for (const auto& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    const auto p = ElementwiseSchedule::resolve(c.given, avx2);
    for (float sv : {0.0f, 2.0f}) {
      CAPTURE(sv);
      ImageParam a(Halide::Float(32), 1, "a"), b(Halide::Float(32), 1, "b");
      Halide::Param<float> s("s");
      Var i("i");
      Func out("out");
      out(i) = a(i) * 3.0f - b(i) * s;
      const auto stage = ElementwiseSchedule::staged_inputs({a, b}, out, p);
      REQUIRE(stage.size() == 2);
      ElementwiseSchedule::apply(out, i, p, {s == 0.0f}, Halide::Expr(), stage);
      CHECK(lowered_stmt(out, {a, b, s}).find("halide_semaphore_release") != std::string::npos);
      CHECK(wrong_in_place(out, a, b, s, sv) == 0);
    }
  }
  CHECK(ElementwiseSchedule::staged_inputs({Func("x")}, Func("y"),
                                           ElementwiseSchedule::resolve({}, avx2))
            .empty());  // off by default
  CHECK(ElementwiseSchedule::summary(
            ElementwiseSchedule::resolve({{"double_buffer", 1}, {"db_grain", 512}}, avx2))
            .find("double-buffered input tensors (2 slots of 512 elements per range, async)") !=
        std::string::npos);
  CHECK_THROWS_WITH_AS(ElementwiseSchedule::resolve({{"db_grain", 100}}, avx2),
                       doctest::Contains("'db_grain' = 100 is outside [256, 1048576]"),
                       std::invalid_argument);
}

}  // namespace
}  // namespace opforge::dsl
