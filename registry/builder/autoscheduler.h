// Generates the Adams2019 schedule files of the op table's autoscheduled variants
// (`opforge autoschedule`). The files are checked in and compiled into opforge
// (generators/auto_schedules.h); `opforge build` only applies them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "generators/isa.h"
#include "generators/op_table.h"

namespace opforge::builder {

// One autoscheduled variant of the table: an (op, attrs) row and one of its autoschedule ISAs.
struct AutoscheduledVariant {
  std::string variant;  // "<hand id>__auto"
  std::string hand;     // the hand-scheduled twin's id
  dsl::ResolvedOp op;
  generators::Isa isa;
};

// Every autoscheduled variant of `rows`, in table order; `ops` (op names) filters, empty =
// all. Throws std::runtime_error for a name in `ops` that has no autoscheduled variant.
std::vector<AutoscheduledVariant> autoscheduled_variants(
    const std::vector<generators::VariantSpec>& rows, const std::vector<std::string>& ops = {});

// Runs Adams2019 (plugin loaded once per process) on the variant's unscheduled pipeline with
// the pinned settings (generators::autoschedule_settings(): HL_* set/unset first, machine
// params) and returns the schedule file's text: a header comment, Halide's .schedule.h layout
// with apply_schedule_<variant> in namespace opforge::schedules, and every ShiftInwards and
// RoundUp tail rewritten (guard_tails) and every Func looked up by name (funcs_by_name). The
// same inputs give the same bytes.
std::string generate_schedule_file(const AutoscheduledVariant& v);

// The tail rewrite applied to Adams2019's output, safe in place: every
// TailStrategy::ShiftInwards and TailStrategy::RoundUp becomes GuardWithIf.
struct TailRewrites {
  int shift_inwards = 0, round_up = 0;  // how many of each were rewritten
  int automatic = 0;                    // TailStrategy::Auto (guard_split_tails only)
};
std::string guard_tails(const std::string& schedule_source, TailRewrites* counts = nullptr);

// The same rewrite on the schedules themselves: every split of every stage (and
// specialization) of every Func the pipeline computes whose tail is ShiftInwards, RoundUp or
// Auto gets GuardWithIf (Halide 14 resolves Auto in split() already, a pure definition's to
// ShiftInwards; guarded all the same). For schedules applied in this process, which have no
// text to rewrite.
TailRewrites guard_split_tails(Halide::Pipeline pipeline);

// A rule's autoschedule twin: runs Adams2019 in this process on `pipeline` (the variant's
// unscheduled algorithm, with estimates), with the pinned settings of generate_schedule_file
// (plugin loaded once, HL_* pinned, machine params), which applies the schedule to the Funcs;
// then guard_split_tails makes it safe in place. One run at a time (std::cerr and the
// environment are process-wide). Throws std::runtime_error when the plugin is missing.
TailRewrites autoschedule_in_place(Halide::Pipeline pipeline, const Halide::Target& target);

// Rewrites Halide's index lookups, pipeline.get_func(N), into lookups by the Func's name in
// `pipeline` (generators::pipeline_func), which survive a Func added to or dropped from the
// algorithm. Throws std::runtime_error for a Func without an exact name (Halide made it
// unique with a "$n" suffix, which differs between processes).
std::string funcs_by_name(const std::string& schedule_source, Halide::Pipeline pipeline);

// "<dir>/<variant>.schedule.h".
std::string schedule_file_path(const std::string& dir, const std::string& variant);

// The schedule files compiled into this opforge, for the CLI (which reads them through here,
// not through the generators' own generators/auto_schedules.h):
// the exact text of the file compiled in for `variant`, what `opforge build` applies, or
// nullopt when the variant has none (it is not autoscheduled, or its file is missing).
std::optional<std::string> compiled_schedule_source(const std::string& variant);
// The id of the autoscheduled twin of a hand-scheduled variant id ("<hand id>__auto").
std::string auto_variant_id(const std::string& hand_id);
// The pinned settings on one line: "Adams2019 (PLUGIN), machine params 8,16777216,40,
// HL_SEED=0 ... unset: ...".
std::string autoschedule_settings_text();

}  // namespace opforge::builder
