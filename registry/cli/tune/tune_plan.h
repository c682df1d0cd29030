// Which schedule-param sets `opforge tune` tries for one param of its coordinate search: pure
// functions of the best set so far, kept apart from the timing so their rules are unit-tested.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace opforge::cli {

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

}  // namespace opforge::cli
