// Renders a kernel's schedule description (schema opforge.schedule/1, written at compile time
// by registry/builder/schedule_description.h into the cache entry's schedule.json) as text:
// per Func its compute/store level, folds and async flag; per stage its cases (each
// specialization, then the default) with their splits and loop nest; and which case a given
// problem size takes. Standard library + nlohmann/json only: no libHalide.
//
// schedule.json:
//   {"format": "opforge.schedule/1", "funcs": [{
//      "name", "output": bool, "args": [var...], "types": [type...],
//      "compute_at", "store_at": "root" | "inline" | "func.var", "async": bool,
//      "memoized": bool, "folds": [{"var", "fold_factor": expr, "fold_factor_text",
//      "fold_forward"}],
//      "stages": [{"name", "rvars"?: [{"var","min","extent"}], "cases": [{
//          "condition"?: expr, "condition_text"?,          (absent: the default case)
//          "splits": [{"kind": split|rename|fuse|purify, "old", "outer", "inner"?,
//                      "factor"?: expr, "factor_text"?, "tail"?}],
//          "loops": [{"var", "kind": serial|parallel|vectorized|unrolled|..., "width"?,
//                     "rvar"?}],                          (outermost first)
//          "prefetches"?: [{"name", "at", "offset"}]}]}]}]}
//   expr: a number, {"var": name}, [op, operand...] (op: + - * / % min max == != < <= > >=
//         && || ! select float int), or ["?", text] (not evaluable).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace opforge::registry {

// Values of the variables a condition or split factor can name. Unknown names evaluate to
// "unknown" (three-valued logic: false && unknown is false).
struct ScheduleEnv {
  std::optional<int64_t> n;              // binds every "<buffer>.extent.0" (1-D kernels)
  std::map<std::string, double> values;  // scalars and any other variable, by name
};

std::optional<double> evaluate(const nlohmann::json& expr, const ScheduleEnv& env);

// Which case of a stage runs: its index, or nullopt when a condition before it depends on a
// value the env does not have (then `depends_on` names those variables).
struct CaseChoice {
  std::optional<size_t> index;
  std::string depends_on;
};
CaseChoice choose_case(const nlohmann::json& stage, const ScheduleEnv& env);

// The whole description as text. With `env`, marks the case each stage takes and evaluates
// split factors (e.g. a run-time chunk size) for that N.
std::string render_schedule(const nlohmann::json& schedule, const ScheduleEnv* env = nullptr);

// Just the loop nests, one block per (func, stage, case): what `opforge diff` compares.
std::string render_loop_nests(const nlohmann::json& schedule);

// Checks the top-level shape of a description (format tag, funcs array); throws
// std::runtime_error naming `where` otherwise.
void check_schedule(const nlohmann::json& schedule, const std::string& where);

}  // namespace opforge::registry
