// Which schedule-param sets `opforge tune` tries for one param of its coordinate search, and at
// which points it times each: pure functions of the best set so far, kept apart from the timing
// so their rules are unit-tested.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace opforge::cli {

// Where a kernel is timed: elements per tensor, idle (a sleep before each call) or awake, and
// the thread count.
struct TunePoint {
  int64_t n;
  bool idle;
  int threads;
};

struct TuneCandidate {
  std::map<std::string, int64_t> params;  // the whole searched set, as timed
  std::string label;                      // progress text: what differs from the best
};

// The sets tried for `param` (one per value of `values` that changes the kernel) after `best`
// (the searched params so far; holds `param`), with `kept` the registered variant's params that
// are not searched (they apply to every preview unless a set names them). None where the param
// changes nothing: db_grain without double buffering, divide_below with it. A divide_below where
// every 1/x already divides (divide=1, searched or kept) competes against that: the set turns
// divide back to 0, so the exact divide stays below the threshold and the estimate runs above.
std::vector<TuneCandidate> param_candidates(const std::string& param,
                                            const std::vector<int64_t>& values,
                                            const std::map<std::string, int64_t>& best,
                                            const std::map<std::string, int64_t>& kept);

// What a family's kernels are besides their params: the ISA's natural vector width (what
// vector = 0 means), whether the update has a whole-tensor reduction (found_inf's check, a
// norm), which dsl::ElementwiseSchedule::apply_reduction splits at every N, and the block of
// 8-bit states (apply_blockwise's schedule; 0: the dense recipe, apply()).
struct PathContext {
  int natural_vector = 16;
  bool reduction = false;
  int64_t block = 0;
};

// What the kernel of elementwise-recipe params `p` (partial: the rest at their declared
// defaults) runs at N = n, as dsl::ElementwiseSchedule's apply(), exact_divides(),
// apply_blockwise() and apply_reduction() read them: whether the parallel path runs
// ("parallel"), the values in force there (size buckets applied), 1/x's form ("divide": 1 for
// the exact divide); for 8-bit states the blocks per task ("block_run"); with a reduction its
// chunk and vector width ("reduction_chunk", "reduction_vector": the base values' split, also
// below serial_below). Params a path does not read (tasks and chunk on the serial path,
// db_grain without double buffering) are left out. Two sets with equal paths at n run the same
// loops there. (Here, not in the recipe: only tune reads it, and a dsl/ edit changes every
// kernel's cache key.)
std::map<std::string, int64_t> path_at(const std::map<std::string, int64_t>& p, int64_t n,
                                       const PathContext& ctx);

// `set` over `kept` (the registered variant's unsearched params): the params a preview of `set`
// is built with.
std::map<std::string, int64_t> over_kept(const std::map<std::string, int64_t>& set,
                                         const std::map<std::string, int64_t>& kept);

// Whether a param changes how a call hands its work to the thread pool (serial_below, tasks,
// chunk, double_buffer, db_grain): what a call that finds the pool asleep pays depends on it.
// The others (vector, unroll, divide, divide_below) change the per-element work only.
bool threading_param(const std::string& name);

// The points of `at` where `cand` runs other loops than `best` (both over `kept`, the
// registered variant's unsearched params): the sizes whose paths differ (path_at: a serial
// threshold moves the sizes between its two values, a reduction's split and 8-bit states' runs
// of blocks; tasks are unread on the serial path). Of those, the idle points only when a
// threading_param differs, or one of those splits, or `at` has no awake point at that size and
// thread count: a compute param (vector, unroll, divide, divide_below) changes the work a call
// does, not the pool's wake-up that the idle regime adds to it. Empty: no timed point can tell
// them apart.
std::vector<TunePoint> points_changed(const std::vector<TunePoint>& at,
                                      const std::map<std::string, int64_t>& best,
                                      const std::map<std::string, int64_t>& cand,
                                      const std::map<std::string, int64_t>& kept,
                                      const PathContext& ctx);

}  // namespace opforge::cli
