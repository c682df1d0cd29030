// Autoscheduled variants: the op table's rows flagged `autoschedule` get, per listed ISA, a
// variant "<hand id>__auto" scheduled by Halide's Adams2019 autoscheduler instead of the
// elementwise recipe. The schedules are generated once (`opforge autoschedule OP`), checked in
// as generators/schedules/<variant>.schedule.h, compiled into this library (CMake generates
// the lookup table from that directory) and applied deterministically at build time: no
// autoscheduler runs during `opforge build`.
#pragma once

#include <Halide.h>

#include <string>
#include <utility>
#include <vector>

#include "dsl/kernel_pipeline.h"

namespace opforge::generators {

// What a regeneration pins. Adams2019 (Halide 14, src/autoschedulers/adams2019/AutoSchedule.cpp
// and Cache.cpp) reads its search settings from HL_* variables; the tool sets `env` and unsets
// `unset` before every call, so the user's environment never changes a schedule.
struct AutoscheduleSettings {
  std::string autoscheduler;                             // "Adams2019"
  std::string plugin;                                    // its plugin library (CMake's path)
  std::vector<std::pair<std::string, std::string>> env;  // set, in this order
  std::vector<std::string> unset;                        // removed from the environment
  int parallelism;
  uint64_t last_level_cache;
  float balance;
  Halide::MachineParams machine_params() const;
  std::string machine_params_text() const;  // MachineParams::to_string(): "8,16777216,40"
  std::string env_text() const;             // "HL_SEED=0 HL_BEAM_SIZE=32 ... unset: ..."
};
const AutoscheduleSettings& autoschedule_settings();

// Recipe name in descriptors and cache keys.
constexpr const char* kAutoRecipe = "adams2019";

// One compiled-in schedule file.
struct AutoSchedule {
  std::string variant;                              // "<hand id>__auto"
  void (*apply)(Halide::Pipeline, Halide::Target);  // the file's apply_schedule_<variant>
  std::string source;                               // the file's exact text
};

// Every schedule compiled in (from generators/schedules/*.schedule.h), sorted by variant.
const std::vector<AutoSchedule>& auto_schedules();
// The schedule of an autoscheduled variant, or nullptr when none is compiled in. `source` is
// what `opforge inspect OP --schedule` prints for an autoscheduled variant.
const AutoSchedule* find_auto_schedule(const std::string& variant);

// The id of the autoscheduled twin of a hand-scheduled variant id.
std::string auto_variant_id(const std::string& hand_id);
bool is_auto_variant_id(const std::string& id);

// The algorithm of the variant, unscheduled, then scheduled by its compiled-in schedule file;
// recipe "adams2019", no recipe params, summary naming the pinned settings. Throws
// std::runtime_error telling the user to run `opforge autoschedule OP` when the file is
// missing.
dsl::KernelPipeline auto_scheduled_pipeline(const dsl::ResolvedOp& op, const Halide::Target& target,
                                            const std::string& variant);

// The summary descriptors carry for autoscheduled variants.
std::string auto_schedule_summary();

}  // namespace opforge::generators
