// The param sets `opforge tune` tries (registry/cli/tune/tune_plan.h), from best sets written
// out here: the current value skipped, params that change nothing skipped, and divide_below
// set against a divide=1 (searched or registered) with divide back to 0; and the points a
// candidate is timed at: where its loops differ from the best's, idle ones for threading params.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <tuple>
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

TEST_CASE("path_at: the loops a size runs, as apply() reads the params") {
  auto at = [](const std::map<std::string, int64_t>& p, int64_t n) {
    return path_at(p, n, PathContext{});
  };
  // Serial below serial_below (default 16384): tasks and chunk are not read there.
  const std::map<std::string, int64_t> serial = at({}, 10000);
  CHECK(serial.at("parallel") == 0);
  CHECK_FALSE(serial.count("tasks"));
  CHECK_FALSE(serial.count("chunk"));
  CHECK_FALSE(serial.count("serial_below"));
  CHECK(at({}, 16384).at("parallel") == 1);
  CHECK(at({}, 16384).at("tasks") == 8);
  CHECK(at({{"tasks", 2}}, 10000) == at({}, 10000));
  CHECK(at({{"tasks", 2}}, 20000) != at({}, 20000));
  // A serial threshold moves the sizes between the two values only.
  CHECK(at({{"serial_below", 65536}}, 100000) == at({}, 100000));
  CHECK(at({{"serial_below", 65536}}, 10000) == at({}, 10000));
  CHECK(at({{"serial_below", 65536}}, 20000) != at({}, 20000));
  // Buckets on the parallel path only; the serial loop keeps the base values.
  const std::map<std::string, int64_t> buckets = {
      {"serial_below", 65536}, {"vector@20000", 32}, {"tasks@200000", 2}};
  CHECK(at(buckets, 30000).at("vector") == 16);  // serial: the default, the natural width
  CHECK(at(buckets, 70000).at("vector") == 32);
  CHECK(at(buckets, 70000).at("tasks") == 8);
  CHECK(at(buckets, 200000).at("tasks") == 2);
  // 1/x's form: divide everywhere, or divide_below's split, which double buffering declines.
  CHECK(at({{"divide_below", 65536}}, 1000).at("divide") == 1);
  CHECK(at({{"divide_below", 65536}}, 65536).at("divide") == 0);
  CHECK(at({{"divide", 1}, {"divide_below", 65536}}, 1 << 20).at("divide") == 1);
  CHECK(at({{"divide_below", 65536}, {"double_buffer", 1}}, 1000).at("divide") == 0);
  CHECK_FALSE(at({{"divide_below", 65536}}, 1000).count("divide_below"));
  // db_grain is read with double buffering only.
  CHECK(at({{"db_grain", 2048}}, 1 << 20) == at({}, 1 << 20));
  CHECK(at({{"db_grain", 2048}, {"double_buffer", 1}}, 1 << 20) !=
        at({{"double_buffer", 1}}, 1 << 20));
}

TEST_CASE("path_at: a whole-tensor reduction splits by tasks and vector at every size") {
  // apply_reduction: chunks of max(ceil(n / (tasks * vec)) * vec, serial_below / tasks).
  const PathContext r{16, true};
  const std::map<std::string, int64_t> defaults = {};
  CHECK(path_at(defaults, 1000, r).at("reduction_chunk") == 1000);  // 16384 / 8: one chunk
  CHECK(path_at({{"serial_below", 4096}}, 1000, r).at("reduction_chunk") == 512);  // two
  CHECK(path_at(defaults, 1000000, r).at("reduction_chunk") == 125008);
  CHECK(path_at({{"tasks", 2}}, 1000, r) == path_at(defaults, 1000, r));   // one chunk still
  CHECK(path_at({{"tasks", 32}}, 1000, r) != path_at(defaults, 1000, r));  // 512: two
  CHECK(path_at({{"tasks", 32}}, 1000, PathContext{}) == path_at(defaults, 1000, PathContext{}));
  // The serial threshold moves the reduction's split at 1e3 (parallel tasks there), so it is
  // timed there, idle included; without a reduction it changes 1e4 only.
  const std::vector<TunePoint> at = {{1000, false, 2}, {1000, true, 2}, {10000, false, 2}};
  CHECK(points_changed(at, {{"serial_below", 16384}}, {{"serial_below", 4096}}, {}, r).size() == 3);
  CHECK(points_changed(at, {{"serial_below", 16384}}, {{"serial_below", 4096}}, {}, PathContext{})
            .size() == 1);
  // A vector width that moves the reduction's split at 1e6 keeps that size's idle point.
  const std::vector<TunePoint> big = {{1000000, false, 2}, {1000000, true, 2}};
  CHECK(points_changed(big, {{"vector", 16}}, {{"vector", 32}}, {}, r).size() == 2);
  CHECK(points_changed(big, {{"vector", 16}}, {{"vector", 32}}, {}, PathContext{}).size() == 1);
}

// tune's default points: 1e3..1e7, one thread awake, two threads awake and idle.
std::vector<TunePoint> default_points() {
  std::vector<TunePoint> at;
  for (int64_t n : {1000, 10000, 100000, 1000000, 10000000}) {
    at.push_back({n, false, 1});
    at.push_back({n, false, 2});
    at.push_back({n, true, 2});
  }
  return at;
}

using PointSet = std::set<std::tuple<int64_t, bool, int>>;

PointSet changed(const std::map<std::string, int64_t>& best,
                 const std::map<std::string, int64_t>& cand,
                 const std::map<std::string, int64_t>& kept = {}) {
  PointSet out;
  for (const TunePoint& p : points_changed(default_points(), best, cand, kept, PathContext{}))
    out.insert({p.n, p.idle, p.threads});
  return out;
}

TEST_CASE("path_at: 8-bit states run whole blocks per task, serial_below's worth at least") {
  // apply_blockwise: max(ceil(blocks / tasks), ceil(serial_below / block)) blocks per task.
  const PathContext q{16, false, 256};
  const std::map<std::string, int64_t> defaults = {};
  auto run = [&](const std::map<std::string, int64_t>& p, int64_t n) {
    return path_at(p, n, q).at("block_run");
  };
  CHECK(run(defaults, 10000) == 40);                     // 40 blocks, one task
  CHECK(run({{"serial_below", 4096}}, 10000) == 16);     // three tasks
  CHECK(run(defaults, 100000) == 64);                    // 391 blocks, 7 tasks
  CHECK(run({{"serial_below", 65536}}, 100000) == 256);  // 2 tasks: a threshold above N moves it
  CHECK(run({{"serial_below", 65536}}, 10000000) == run(defaults, 10000000));
  CHECK(path_at({{"tasks", 2}}, 10000, q) == path_at(defaults, 10000, q));
  CHECK_FALSE(path_at(defaults, 10000, q).count("unroll"));  // not read by the 8-bit schedule
  // Where the dense recipe would see nothing (no size in [16384, 65536)), 1e5 moves.
  const PointSet moved = [&] {
    PointSet out;
    for (const TunePoint& p : points_changed(default_points(), {{"serial_below", 16384}},
                                             {{"serial_below", 65536}}, {}, q))
      out.insert({p.n, p.idle, p.threads});
    return out;
  }();
  CHECK(moved == PointSet{{100000, false, 1}, {100000, false, 2}, {100000, true, 2}});
}

TEST_CASE("points_changed: a serial threshold is timed at the sizes it moves, both regimes") {
  const std::map<std::string, int64_t> best = {{"serial_below", 16384}, {"tasks", 8}};
  auto with = [&](int64_t v) {
    auto c = best;
    c["serial_below"] = v;
    return c;
  };
  CHECK(changed(best, with(4096)) ==
        PointSet{{10000, false, 1}, {10000, false, 2}, {10000, true, 2}});
  CHECK(changed(best, with(0)).size() == 6);  // 1e3 and 1e4
  CHECK(changed(best, with(65536)).empty());  // no timed size lies in [16384, 65536)
  CHECK(changed(best, with(262144)) ==
        PointSet{{100000, false, 1}, {100000, false, 2}, {100000, true, 2}});
}

TEST_CASE("points_changed: tasks on the parallel path only; buckets from their bound") {
  const std::map<std::string, int64_t> best = {{"serial_below", 16384}, {"tasks", 8}};
  const PointSet tasks = changed(best, {{"serial_below", 16384}, {"tasks", 2}});
  CHECK(tasks.size() == 9);  // 1e5, 1e6, 1e7 in both regimes
  for (const auto& [n, idle, threads] : tasks) CHECK(n >= 100000);
  auto bucket = best;
  bucket["tasks@316228"] = 16;
  const PointSet b = changed(best, bucket);
  CHECK(b.size() == 6);
  for (const auto& [n, idle, threads] : b) CHECK(n >= 1000000);
}

TEST_CASE("points_changed: compute params awake only, at the sizes whose 1/x they change") {
  const std::map<std::string, int64_t> best = {{"divide", 0}, {"divide_below", 0}};
  const PointSet divide = changed(best, {{"divide", 1}, {"divide_below", 0}});
  CHECK(divide.size() == 10);
  for (const auto& [n, idle, threads] : divide) CHECK_FALSE(idle);
  CHECK(changed(best, {{"divide", 0}, {"divide_below", 262144}}) == PointSet{{1000, false, 1},
                                                                             {1000, false, 2},
                                                                             {10000, false, 1},
                                                                             {10000, false, 2},
                                                                             {100000, false, 1},
                                                                             {100000, false, 2}});
  // Against a registered divide=1: the threshold gives the estimate back above it.
  CHECK(changed({{"divide_below", 0}}, {{"divide", 0}, {"divide_below", 1048576}},
                {{"divide", 1}}) == PointSet{{10000000, false, 1}, {10000000, false, 2}});
  CHECK(changed({{"unroll", 1}}, {{"unroll", 2}}).size() == 10);
  // With the idle regime alone, its points are all there is to time.
  const std::vector<TunePoint> idle_only = {{10000, true, 2}};
  CHECK(points_changed(idle_only, {{"divide", 0}}, {{"divide", 1}}, {}, PathContext{}).size() == 1);
}

}  // namespace
}  // namespace opforge::cli
