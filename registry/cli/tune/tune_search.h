// What `opforge tune` does for one op family on one ISA: time the family's members with the
// recipe defaults to pick the one furthest from its bandwidth kernel, then a coordinate
// search over the elementwise recipe's params (serial_below, tasks, unroll, vector, divide) on that
// member, then per size bucket (name@N params for a size range that wants its own), each candidate
// a schedule preview compiled into the cache and timed against the current best and the
// same-traffic bandwidth kernel, interleaved, at the sizes, regimes and thread counts where the
// two run different loops (tune_plan.h: points_changed).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "opforge/runtime.hpp"
#include "registry/builder/tuning.h"

namespace opforge::cli {

struct TuneOptions {
  std::vector<std::string> isas;    // ISAs to tune (each must run here)
  std::vector<std::string> ops;     // only the families with one of these ops; empty: all
  std::vector<std::string> params;  // searched, in this order
  std::vector<int64_t> sizes;       // elements per tensor, the size buckets
  bool size_buckets = true;         // then per size: params that only that size range wants
  std::vector<bool> idle_regimes;   // false: awake (back to back), true: idle (a sleep first)
  double idle_gap_us = 2000;
  std::vector<int> threads = {2};  // thread counts the kernels are timed at
  double point_seconds = 0.02;     // time per contender per (size, regime), about
  std::string cache_dir;
  std::vector<std::string> rules;
  int jobs = 0;  // previews compiled at a time (0: the hardware's threads)
  std::function<void(const std::string&)> progress;  // one line at a time
};

// A family to tune: its name, ISA and the registry variants in it; with --ops, `asked` holds the
// named ops' variants, and the search times those (a family shares a traffic shape, not a
// compute mix: its heaviest and lightest members may not care for a param the named op needs).
struct TuneFamily {
  std::string family, isa;
  std::vector<std::string> variants;
  std::vector<std::string> asked;
  bool reduction = false;  // a whole-tensor reduction in the update (the "_r" families)
};

struct TuneResult {
  TuneFamily family;
  builder::TunedFamily tuned;               // params that differ from the defaults, evidence
  std::map<std::string, int64_t> defaults;  // the searched params' recipe defaults
  int candidates = 0;                       // previews timed
  int skipped = 0;        // candidates that run the best's loops, or a timed one's, everywhere
  int points_timed = 0;   // points the candidates were timed at (first rounds)
  int member_rounds = 0;  // rounds of one member at a candidate's points (judge_candidate)
  int compiled = 0;       // of which the cache did not have
  double seconds = 0;
};

// The tunable families of the registry's variants (the op table and `rules`), by family and
// ISA, restricted to `o.isas` and `o.ops`.
std::vector<TuneFamily> tune_families(Registry& reg, const TuneOptions& o);

TuneResult tune_family(Registry& reg, const TuneFamily& f, const TuneOptions& o);

// The values tried for each param, given the ISA's natural vector width.
std::vector<int64_t> candidate_values(const std::string& param, int natural_vector);

}  // namespace opforge::cli
