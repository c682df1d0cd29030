// The rounds that keep a candidate in `opforge tune` (registry/cli/tune/tune_keep.h), on
// made-up paired ratios: the heaviest member screens alone, the others are timed only after it
// passes, then every member on swapped buffers; a vetoing point is re-measured.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include "registry/cli/tune/tune_keep.h"

namespace opforge::cli {
namespace {

// Ratios per (member, swapped) and a log of the rounds asked for.
struct Script {
  std::map<std::pair<size_t, bool>, std::vector<double>> ratios;
  std::vector<std::pair<size_t, bool>> rounds;
  std::vector<std::tuple<size_t, size_t, bool>> retimes;
  double retime_reads = 1.0;

  Verdict judge(size_t members) {
    return judge_candidate(
        members, KeepRule{},
        [&](size_t k, bool swap) {
          rounds.emplace_back(k, swap);
          return ratios.at({k, swap});
        },
        [&](size_t k, size_t point, bool swap) {
          retimes.emplace_back(k, point, swap);
          return retime_reads;
        });
  }
};

using Rounds = std::vector<std::pair<size_t, bool>>;

TEST_CASE("score: geometric mean and the worst point") {
  const Score s = score({0.5, 2.0, 1.0});
  CHECK(s.mean == doctest::Approx(1.0));
  CHECK(s.worst == 2.0);
}

TEST_CASE("judge_candidate: a loser on the heaviest member costs one member's round") {
  Script sc;
  sc.ratios[{0, false}] = {0.99, 1.0, 0.98};
  const Verdict v = sc.judge(2);
  CHECK_FALSE(v.keep);
  CHECK(sc.rounds == Rounds{{0, false}});
  CHECK(v.member_rounds == 1);
  CHECK_FALSE(v.first.has_value());
  CHECK_FALSE(v.confirm.has_value());
  CHECK(v.screen.mean == doctest::Approx(std::cbrt(0.99 * 0.98)));
}

TEST_CASE("judge_candidate: the lightest member can still reject what the heaviest wants") {
  Script sc;
  sc.ratios[{0, false}] = {0.92, 0.92};
  sc.ratios[{1, false}] = {1.04, 1.04};  // together: geometric mean 0.978
  const Verdict v = sc.judge(2);
  CHECK_FALSE(v.keep);
  CHECK(sc.rounds == Rounds{{0, false}, {1, false}});
  REQUIRE(v.first.has_value());
  CHECK(v.first->mean == doctest::Approx(std::sqrt(0.92 * 1.04)));
  CHECK_FALSE(v.confirm.has_value());
}

TEST_CASE("judge_candidate: kept after every member's first round and the swapped confirm") {
  Script sc;
  sc.ratios[{0, false}] = {0.90, 0.95};
  sc.ratios[{1, false}] = {0.96, 0.97};
  sc.ratios[{0, true}] = {0.97, 0.98};
  sc.ratios[{1, true}] = {0.99, 0.98};
  const Verdict v = sc.judge(2);
  CHECK(v.keep);
  CHECK(sc.rounds == Rounds{{0, false}, {1, false}, {0, true}, {1, true}});
  CHECK(v.member_rounds == 4);
  CHECK(sc.retimes.empty());
}

TEST_CASE("judge_candidate: a confirm that does not agree rejects") {
  Script sc;
  sc.ratios[{0, false}] = {0.90};
  sc.ratios[{0, true}] = {0.995};
  const Verdict v = sc.judge(1);
  CHECK_FALSE(v.keep);
  CHECK(sc.rounds == Rounds{{0, false}, {0, true}});
  CHECK_FALSE(v.first.has_value());  // one member: the screen is the first round
  REQUIRE(v.confirm.has_value());
  CHECK(v.confirm->mean == doctest::Approx(0.995));
}

TEST_CASE("judge_candidate: a point that alone vetoes is timed again, other buffers first") {
  Script sc;
  sc.ratios[{0, false}] = {0.85, 0.85, 1.15};  // mean 0.940: under the gate, vetoed by 1.15
  sc.ratios[{0, true}] = {0.95, 0.95, 0.98};
  sc.retime_reads = 1.0;  // the veto was a neighbour's burst
  const Verdict v = sc.judge(1);
  CHECK(v.keep);
  CHECK(v.rechecked == 2);
  CHECK(sc.retimes == std::vector<std::tuple<size_t, size_t, bool>>{{0, 2, true}, {0, 2, false}});
  CHECK(v.screen.worst == doctest::Approx(1.0));
}

TEST_CASE(
    "judge_candidate: a veto that reads slow again stands, and a losing mean is not rechecked") {
  Script sc;
  sc.ratios[{0, false}] = {0.85, 0.85, 1.15};
  sc.retime_reads = 1.2;
  Verdict v = sc.judge(2);
  CHECK_FALSE(v.keep);
  CHECK(v.rechecked == 2);
  CHECK(sc.rounds == Rounds{{0, false}});

  Script lose;
  lose.ratios[{0, false}] = {1.0, 1.0, 1.15};
  v = lose.judge(2);
  CHECK_FALSE(v.keep);
  CHECK(lose.retimes.empty());
}

}  // namespace
}  // namespace opforge::cli
