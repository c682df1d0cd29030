// opforge autoschedule [OP...] [--out DIR] [--check]: regenerates the Adams2019 schedule files
// of the op table's autoscheduled variants (generators/schedules/<variant>.schedule.h, checked
// in). The HL_* environment and machine params are pinned by the tool, so a regeneration
// with the same Halide gives the same bytes; --check compares instead of writing (CI).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "registry/builder/autoscheduler.h"
#include "registry/cache/atomic_file.h"
#include "registry/cli/commands.h"

#ifndef OPFORGE_SCHEDULES_DIR
#define OPFORGE_SCHEDULES_DIR "generators/schedules"
#endif

namespace opforge::cli {

std::string default_schedules_dir() {
  return OPFORGE_SCHEDULES_DIR;
}

int cmd_autoschedule(const Args& a) {
  const std::string dir = checked_dir("--out", a.get("out", default_schedules_dir()));
  const bool check = a.has("check");
  const auto variants = builder::autoscheduled_variants(generators::op_table(), a.positional);
  if (!a.has("json")) std::printf("%s\n", builder::autoschedule_settings_text().c_str());
  nlohmann::json report = nlohmann::json::array();
  int differing = 0, stale = 0;
  for (const auto& v : variants) {
    const std::string text = builder::generate_schedule_file(v);
    const std::string path = builder::schedule_file_path(dir, v.variant);
    std::string old;
    std::error_code ec;
    const bool exists = std::filesystem::exists(path, ec);
    if (exists) old = cache::read_file(path);
    const std::string state = !exists ? "new" : old == text ? "unchanged" : "changed";
    differing += state != "unchanged";
    if (!check && state != "unchanged") cache::write_file_atomic(path, text);
    // The copy compiled into this opforge: what `opforge build` applies.
    const std::optional<std::string> built_in = builder::compiled_schedule_source(v.variant);
    const bool needs_rebuild = !built_in || *built_in != text;
    stale += needs_rebuild;
    report.push_back({{"variant", v.variant},
                      {"op", v.op.name()},
                      {"file", path},
                      {"state", state},
                      {"compiled_in", built_in && !needs_rebuild}});
    if (a.has("json")) continue;
    std::printf("  %-44s %s%s\n", v.variant.c_str(),
                check ? (state == "unchanged" ? "matches " : (state + ": differs from ").c_str())
                      : (state == "unchanged" ? "unchanged " : (state + ": wrote ").c_str()),
                path.c_str());
  }
  if (a.has("json")) {
    std::cout << report.dump(2) << "\n";
  } else if (check && differing) {
    std::printf(
        "%d schedule file(s) differ from a regeneration: run `opforge autoschedule` "
        "and commit the result\n",
        differing);
  } else if (!check && stale) {
    std::printf(
        "%d schedule file(s) differ from the copy compiled into this opforge: rebuild "
        "it (ninja) before `opforge build`\n",
        stale);
  }
  return check && differing ? 1 : 0;
}

Command autoschedule_command() {
  return {
      {"autoschedule",
       "[OP...]",
       "Regenerate the Adams2019 schedule files of the op table's autoscheduled variants "
       "(default: every one)",
       {{"out", "DIR", "where <variant>.schedule.h go (default: " + default_schedules_dir() + ")"},
        {"check", "", "compare a regeneration with the files in DIR; exit 1 if any differs"},
        json_option()}},
      cmd_autoschedule};
}

}  // namespace opforge::cli
