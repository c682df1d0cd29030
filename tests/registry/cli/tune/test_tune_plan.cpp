// The param sets `opforge tune` tries (registry/cli/tune/tune_plan.h), from best sets written
// out here: the current value skipped, params that change nothing skipped, and divide_below
// set against a divide=1 (searched or registered) with divide back to 0.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "registry/cli/tune/tune_plan.h"

namespace opforge::cli {
namespace {

const std::vector<int64_t> kThresholds = {0, 65536, 262144, 1048576, 4194304};

std::vector<std::string> labels(const std::vector<TuneCandidate>& cs) {
  std::vector<std::string> out;
  for (const auto& c : cs) out.push_back(c.label);
  return out;
}

TEST_CASE("param_candidates: every other value, the rest of the best set unchanged") {
  const std::map<std::string, int64_t> best = {{"tasks", 8}, {"divide", 0}};
  const auto cs = param_candidates("tasks", {2, 4, 8, 16}, best, {});
  CHECK(labels(cs) == std::vector<std::string>{"tasks=2", "tasks=4", "tasks=16"});
  for (const auto& c : cs) {
    CHECK(c.params.size() == 2);
    CHECK(c.params.at("divide") == 0);
  }
  CHECK(cs[2].params.at("tasks") == 16);
}

TEST_CASE("param_candidates: divide_below with the estimate in force is a threshold on it") {
  const std::map<std::string, int64_t> best = {{"divide", 0}, {"divide_below", 0}};
  const auto cs = param_candidates("divide_below", kThresholds, best, {});
  CHECK(labels(cs) == std::vector<std::string>{"divide_below=65536", "divide_below=262144",
                                               "divide_below=1048576", "divide_below=4194304"});
  for (const auto& c : cs) CHECK(c.params.at("divide") == 0);
}

TEST_CASE("param_candidates: divide_below against a divide=1, searched or registered") {
  // divide=1 kept by this search: each threshold is tried with divide back to 0, and no set
  // is the estimate alone (divide=1 beat it).
  const std::map<std::string, int64_t> searched = {{"divide", 1}, {"divide_below", 0}};
  const auto cs = param_candidates("divide_below", kThresholds, searched, {});
  REQUIRE(cs.size() == 4);
  CHECK(cs[0].label == "divide=0 divide_below=65536");
  for (const auto& c : cs) {
    CHECK(c.params.at("divide") == 0);
    CHECK(c.params.at("divide_below") > 0);
  }
  // divide=1 from the registered variant (not searched now): the same, and the set names
  // divide so that the preview overrides the registered value.
  const auto reg = param_candidates("divide_below", kThresholds, {{"divide_below", 0}},
                                    {{"divide", 1}, {"tasks", 4}});
  REQUIRE(reg.size() == 4);
  CHECK(reg[3].label == "divide=0 divide_below=4194304");
  CHECK(reg[3].params.at("divide") == 0);
  CHECK_FALSE(reg[3].params.count("tasks"));  // kept params stay the registered variant's
}

TEST_CASE("param_candidates: params that change nothing are not tried") {
  // A slot size without double buffering, a divide threshold with it (exact_divides ignores
  // it), whether double buffering is searched or registered.
  CHECK(param_candidates("db_grain", {2048, 8192}, {{"db_grain", 8192}}, {}).empty());
  CHECK(param_candidates("db_grain", {2048, 8192}, {{"db_grain", 8192}, {"double_buffer", 0}}, {})
            .empty());
  CHECK(param_candidates("db_grain", {2048, 8192}, {{"db_grain", 8192}}, {{"double_buffer", 1}})
            .size() == 1);
  CHECK(
      param_candidates("divide_below", kThresholds, {{"divide_below", 0}, {"double_buffer", 1}}, {})
          .empty());
  CHECK(param_candidates("divide_below", kThresholds, {{"divide_below", 0}},
                         {{"double_buffer", 1}, {"divide", 1}})
            .empty());
}

}  // namespace
}  // namespace opforge::cli
