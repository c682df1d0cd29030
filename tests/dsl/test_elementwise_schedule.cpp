// dsl/elementwise_schedule: params resolved with their defaults and ranges, size-bucket keys
// (name@N) checked like their param, and the params in force at a size (the largest bucket at
// or below it wins, plain values elsewhere).
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "dsl/elementwise_schedule.h"

namespace opforge::dsl {
namespace {

using Params = std::map<std::string, int64_t>;

const Halide::Target kAvx2("x86-64-linux-avx-avx2-f16c-fma-sse41");

TEST_CASE("resolve: defaults, the natural vector width, bucket keys kept and range-checked") {
  const Params p =
      ElementwiseSchedule::resolve({{"tasks@300000", 2}, {"vector@5000000", 0}}, kAvx2);
  CHECK(p.at("tasks") == 8);
  CHECK(p.at("vector") == 8);
  CHECK(p.at("serial_below") == 16384);
  CHECK(p.at("tasks@300000") == 2);
  CHECK(p.at("vector@5000000") == 8);  // 0: the target's natural width, like the plain param

  auto fails = [](const Params& given, const std::string& what) {
    CAPTURE(what);
    CHECK_THROWS_WITH_AS(ElementwiseSchedule::resolve(given, kAvx2),
                         doctest::Contains(what.c_str()), std::invalid_argument);
  };
  fails({{"tasks@300000", 0}}, "'tasks@300000' = 0 is outside [1, 1024]");
  fails({{"divide@1000", 1}}, "'divide@1000': only vector, unroll, tasks and chunk");
  fails({{"serial_below@1000", 1}}, "only vector, unroll, tasks and chunk");
  fails({{"tasks@", 2}}, "'tasks@': the bucket's N must be an integer");
  fails({{"tasks@1e6", 2}}, "'tasks@1e6': the bucket's N must be an integer");
  fails({{"tasks@0", 2}}, "'tasks@0': the bucket's N must be an integer in [1, 2^31]");
  fails({{"tasks@99999999999", 2}}, "must be an integer in [1, 2^31]");
  fails({{"tasks@0300000", 2}}, "without a leading zero");
  fails({{"tiles@1000", 2}}, "only vector, unroll, tasks and chunk");
}

TEST_CASE("params_at: the largest bucket at or below N, per param; plain values elsewhere") {
  const Params p = {{"tasks", 8},      {"vector", 8},        {"unroll", 1},
                    {"chunk", 0},      {"serial_below", 16}, {"divide", 0},
                    {"tasks@1000", 2}, {"tasks@100000", 4},  {"unroll@50000", 2}};
  CHECK(ElementwiseSchedule::bucket_bounds(p) == std::vector<int64_t>{1000, 50000, 100000});
  const Params at0 = ElementwiseSchedule::params_at(p, 0);
  CHECK(at0.at("tasks") == 8);
  CHECK(at0.count("tasks@1000") == 0);  // only plain names come back
  CHECK(at0.size() == 6);
  CHECK(ElementwiseSchedule::params_at(p, 999).at("tasks") == 8);
  CHECK(ElementwiseSchedule::params_at(p, 1000).at("tasks") == 2);
  CHECK(ElementwiseSchedule::params_at(p, 60000).at("tasks") == 2);
  CHECK(ElementwiseSchedule::params_at(p, 60000).at("unroll") == 2);
  CHECK(ElementwiseSchedule::params_at(p, 100000).at("tasks") == 4);
  CHECK(ElementwiseSchedule::params_at(p, 100000).at("unroll") == 2);
  CHECK(ElementwiseSchedule::params_at(p, 1 << 30).at("vector") == 8);
}

TEST_CASE("exact_divides: a condition on N only when divide_below splits the update") {
  const Halide::Expr n = Halide::Var("n");
  auto with = [](const Params& given) { return ElementwiseSchedule::resolve(given, kAvx2); };
  CHECK_FALSE(ElementwiseSchedule::exact_divides(with({}), n).defined());  // default 0
  const Halide::Expr c = ElementwiseSchedule::exact_divides(with({{"divide_below", 65536}}), n);
  REQUIRE(c.defined());
  CHECK(Halide::Internal::equal(c, n < 65536));
  // Every 1/x divides already; double buffering's copies share their producers' loops.
  CHECK_FALSE(ElementwiseSchedule::exact_divides(with({{"divide_below", 65536}, {"divide", 1}}), n)
                  .defined());
  CHECK_FALSE(
      ElementwiseSchedule::exact_divides(with({{"divide_below", 65536}, {"double_buffer", 1}}), n)
          .defined());
  // Unscheduled (the golden): no params, no split.
  CHECK_FALSE(ElementwiseSchedule::exact_divides({}, n).defined());
  CHECK_THROWS_WITH_AS(ElementwiseSchedule::resolve({{"divide_below", -1}}, kAvx2),
                       doctest::Contains("'divide_below' = -1 is outside"), std::invalid_argument);
  const std::string s = ElementwiseSchedule::summary(with({{"divide_below", 65536}}));
  CHECK_MESSAGE(s.find("exact divides below N = 65536") != std::string::npos, s);
  // A declined threshold is said in the summary, and tune recognizes the words; a summary
  // that applies the threshold does not read as declined.
  const std::string declined = ElementwiseSchedule::divide_below_declined(4096);
  CHECK_MESSAGE(declined.find("divide_below 4096 not applied") != std::string::npos, declined);
  CHECK(ElementwiseSchedule::says_divide_below_declined(s + declined));
  CHECK_FALSE(ElementwiseSchedule::says_divide_below_declined(s));
}

TEST_CASE("summary: each bucket's params after the plain schedule") {
  const Params p = ElementwiseSchedule::resolve({{"tasks@300000", 2}, {"unroll@300000", 2}}, kAvx2);
  const std::string s = ElementwiseSchedule::summary(p);
  CHECK_MESSAGE(s.find("N >= 16384: 8 parallel chunks") != std::string::npos, s);
  CHECK_MESSAGE(s.find("N >= 300000: tasks 2, unroll 2") != std::string::npos, s);
}

}  // namespace
}  // namespace opforge::dsl
