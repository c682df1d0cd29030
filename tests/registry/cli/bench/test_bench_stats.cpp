// The timing statistics bench and tune share (registry/cli/bench/bench_stats.h), on samples
// written out here: medians and quartiles by nearest rank, per-pair ratios, and tune's
// re-measure of a vetoing point (a burst read once is outvoted; a slow point stays slow).
#include <doctest/doctest.h>

#include <vector>

#include "registry/cli/bench/bench_stats.h"

namespace opforge::cli {
namespace {

TEST_CASE("median and quartiles: nearest rank, unsorted input") {
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 3, 2}) == 3);  // the upper median
  const Quartiles q = quartiles({8, 1, 7, 2, 6, 3, 5, 4});
  CHECK(q.q1 == 3);
  CHECK(q.median == 5);
  CHECK(q.q3 == 7);
  const Quartiles one = quartiles({2.5});
  CHECK(one.q1 == 2.5);
  CHECK(one.q3 == 2.5);
}

TEST_CASE("paired_ratios: call by call, the shorter series decides the count") {
  const std::vector<double> r = paired_ratios({2, 9, 4}, {1, 3});
  REQUIRE(r.size() == 2);
  CHECK(r[0] == 2);
  CHECK(r[1] == 3);
}

TEST_CASE("recheck_vetoes: only points at or over the veto are re-timed") {
  std::vector<size_t> retimed;
  auto retime = [&](size_t point, int) {
    retimed.push_back(point);
    return 0.95;
  };
  const std::vector<double> out = recheck_vetoes({0.90, 1.107, 0.93, 1.10}, 1.10, 2, retime);
  // Points 1 and 3 (1.10 is at the veto), two re-measures each.
  CHECK(retimed == std::vector<size_t>{1, 1, 3, 3});
  CHECK(out[0] == 0.90);
  CHECK(out[2] == 0.93);
  // Median of {1.107, 0.95, 0.95}: the one slow reading is outvoted.
  CHECK(out[1] == 0.95);
  CHECK(out[3] == 0.95);
}

TEST_CASE("recheck_vetoes: a point that reads slow again keeps its veto") {
  int round_seen = -1;
  auto retime = [&](size_t, int round) {
    round_seen = round;
    return round == 0 ? 1.20 : 0.90;
  };
  // Readings {1.15, 1.20, 0.90}: the median, 1.15, still vetoes.
  const std::vector<double> out = recheck_vetoes({1.15}, 1.10, 2, retime);
  CHECK(out[0] == 1.15);
  CHECK(round_seen == 1);
  // No rounds: the first reading stands.
  CHECK(recheck_vetoes({1.3}, 1.10, 0, retime)[0] == 1.3);
}

}  // namespace
}  // namespace opforge::cli
