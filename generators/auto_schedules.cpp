#include "generators/auto_schedules.h"

#include <stdexcept>

#ifndef OPFORGE_ADAMS2019_PLUGIN
#define OPFORGE_ADAMS2019_PLUGIN "/usr/lib/x86_64-linux-gnu/halide14/libautoschedule_adams2019.so"
#endif

namespace opforge::generators {

Halide::MachineParams AutoscheduleSettings::machine_params() const {
  return Halide::MachineParams(parallelism, last_level_cache, balance);
}

std::string AutoscheduleSettings::machine_params_text() const {
  return machine_params().to_string();
}

std::string AutoscheduleSettings::env_text() const {
  std::string s;
  for (const auto& [k, v] : env) s += (s.empty() ? "" : " ") + k + "=" + v;
  s += "; unset:";
  for (const auto& k : unset) s += " " + k;
  return s;
}

const AutoscheduleSettings& autoschedule_settings() {
  static const AutoscheduleSettings s = {
      "Adams2019",
      OPFORGE_ADAMS2019_PLUGIN,
      {
          // The seed only drives random dropout, which 100 turns off; pinned all the same
          // (unset, Adams2019 seeds with the time of day).
          {"HL_SEED", "0"},
          {"HL_RANDOM_DROPOUT", "100"},
          {"HL_BEAM_SIZE", "32"},  // Adams2019's default
          {"HL_NUM_PASSES", "5"},  // its default for a beam wider than 1
      },
      {
          "HL_WEIGHTS_DIR",        // unset: the cost model's built-in baseline weights
          "HL_RANDOMIZE_WEIGHTS",  // would replace them with random ones
          "HL_CYOS",               // interactive search
          "HL_NO_SUBTILING",       // narrows the search space
          "HL_AUTOSCHEDULE_MEMORY_LIMIT",
          "HL_PERMIT_FAILED_UNROLL",  // would hide a schedule that does not unroll
          "HL_DISABLE_MEMOIZED_FEATURES",
          "HL_DISABLE_MEMOIZED_BLOCKS",
          "HL_MACHINE_PARAMS",  // MachineParams::generic(); opforge passes its own
          "HL_SCHEDULE_FILE",   // deprecated side outputs
          "HL_FEATURE_FILE",
      },
      // Parallelism 8: the hand recipe's task count (8 keeps a stolen core from idling half
      // the update); Halide's generic cache size and balance.
      8,
      16 * 1024 * 1024,
      40.0f,
  };
  return s;
}

const AutoSchedule* find_auto_schedule(const std::string& variant) {
  for (const auto& s : auto_schedules()) {
    if (s.variant == variant) return &s;
  }
  return nullptr;
}

std::string auto_variant_id(const std::string& hand_id) {
  return hand_id + "__auto";
}

bool is_auto_variant_id(const std::string& id) {
  const std::string suffix = "__auto";
  return id.size() > suffix.size() &&
         id.compare(id.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string auto_schedule_summary() {
  const AutoscheduleSettings& s = autoschedule_settings();
  std::string set;
  for (const auto& [k, v] : s.env) set += " " + k + "=" + v;
  return s.autoscheduler + " autoschedule (machine params " + s.machine_params_text() +
         ", estimates 1<<20 elements, pinned" + set +
         "); ShiftInwards/RoundUp tails rewritten to GuardWithIf (safe in place)";
}

dsl::KernelPipeline auto_scheduled_pipeline(const dsl::ResolvedOp& op, const Halide::Target& target,
                                            const std::string& variant) {
  const AutoSchedule* s = find_auto_schedule(variant);
  if (!s) {
    throw std::runtime_error(
        "variant " + variant + " is autoscheduled in the op table, but no schedule file " +
        "generators/schedules/" + variant + ".schedule.h is compiled in: run `opforge " +
        "autoschedule " + op.name() + " --out <source dir>/generators/schedules`, then " +
        "rebuild opforge (CMake picks up new schedule files)");
  }
  dsl::KernelPipeline p = dsl::build_pipeline(op, {}, target, /*scheduled=*/false);
  s->apply(p.pipeline, target);
  p.schedule_recipe = kAutoRecipe;
  p.schedule_params.clear();
  p.schedule_summary = auto_schedule_summary();
  return p;
}

}  // namespace opforge::generators
