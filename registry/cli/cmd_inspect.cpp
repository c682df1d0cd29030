// opforge inspect: a registered kernel's schedule, from the compile cache entry its
// descriptor's cache key names: a summary (loops with their kinds and widths, splits with
// factors and tails, specializations and which one N takes, folds, async stages, ISA), or one
// of the raw views Halide wrote (stmt, stmt_html, assembly, LLVM IR, header, loop nest).
// With --set, a preview of the same variant under other schedule params (cache only).
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "dsl/elementwise_schedule.h"
#include "registry/builder/autoscheduler.h"
#include "registry/cache/atomic_file.h"
#include "registry/cli/commands.h"
#include "registry/cli/inspected_kernel.h"
#include "registry/format/schedule_view.h"

namespace opforge::cli {

namespace {

// Problem sizes the summary reports the taken case for when --n is not given.
const int64_t kSampleSizes[] = {1000, 100000, 10000000};

std::string params_text(const registry::Descriptor& d) {
  std::string s;
  for (const auto& [k, v] : d.schedule.params) s += " " + k + "=" + v;
  return s;
}

std::string header_text(const InspectedKernel& k) {
  const registry::Descriptor& d = k.descriptor;
  std::string features;
  for (const auto& f : d.target.cpu_features) features += (features.empty() ? "" : " ") + f;
  std::string s = "variant   " + d.variant + "\n";
  s += "op        " + d.op + " v" + std::to_string(d.op_version) + ": " + d.summary + "\n";
  s += "source    " + k.origin + "\n";
  s += "isa       " + d.target.isa + " (priority " + std::to_string(d.target.priority) +
       "), needs cpu features: " + (features.empty() ? "none" : features) + "\n";
  s += "target    " + d.target.halide_target + "\n";
  s += "recipe    " + d.schedule.recipe + ":" + params_text(d) + "\n";
  if (!k.changed.empty()) {
    s += "changed  ";
    for (const auto& [name, v] : k.changed) s += " " + name + "=" + std::to_string(v);
    s += "\n";
  }
  s += "          " + d.schedule.summary + "\n";
  s += "tuning    " + tuning_text(d) + "\n";
  s += "cache key " + d.cache_key + "\n";
  return s;
}

// For each sample N: the case each stage with several cases takes.
std::string sample_choices(const nlohmann::json& schedule, const registry::ScheduleEnv& base) {
  std::string s;
  for (int64_t n : kSampleSizes) {
    registry::ScheduleEnv env = base;
    env.n = n;
    std::string line;
    for (const auto& f : schedule["funcs"]) {
      for (const auto& st : f["stages"]) {
        if (st["cases"].size() < 2) continue;
        registry::CaseChoice c = registry::choose_case(st, env);
        line += "  " + st.value("name", "?") + ": " +
                (c.index ? "case " + std::to_string(*c.index + 1) : "depends on " + c.depends_on);
      }
    }
    if (!line.empty()) s += "  N = " + std::to_string(n) + " ->" + line + "\n";
  }
  return s.empty() ? ""
                   : "\nwhich case runs (pass --n N for one size, --scalar for fast paths):\n" + s;
}

}  // namespace

int cmd_inspect(const Args& a) {
  // The listings print the whole kernel; --n and --scalar mark cases in the schedule summary.
  const std::vector<const char*> listings = {"stmt",      "asm",      "llvm", "header",
                                             "loop-nest", "schedule", "html"};
  std::vector<const char*> outputs = listings;
  outputs.push_back("json");
  a.at_most_one_of(outputs);
  for (const char* out : listings) {
    for (const char* o : {"n", "scalar"}) {
      if (a.has(out) && a.has(o)) {
        throw UsageError(std::string("--") + o + " marks the cases of the schedule summary; --" +
                         out + " prints the whole kernel: drop --" + o);
      }
    }
  }
  const std::map<std::string, int64_t> set = set_options(a);
  // OP --variant ID names one variant of OP by id, as in run/check/bench.
  const std::string name = a.has("variant") ? a.get("variant") : a.positional.at(0);
  const InspectedKernel k = inspect_kernel(a, name, set);
  if (a.has("variant") && k.descriptor.op != a.positional.at(0) &&
      k.descriptor.variant != a.positional.at(0)) {
    throw UsageError("variant " + name + " is a variant of " + k.descriptor.op + ", not of " +
                     a.positional.at(0));
  }
  auto artifact = [&](const char* name) -> const std::string& {
    auto it = k.entry.artifacts.find(name);
    if (it == k.entry.artifacts.end()) {
      throw std::runtime_error("cache entry of " + k.descriptor.variant + " has no " + name);
    }
    return it->second;
  };
  if (a.has("stmt")) return std::cout << artifact("kernel.stmt"), 0;
  if (a.has("asm")) return std::cout << artifact("kernel.s"), 0;
  if (a.has("llvm")) return std::cout << artifact("kernel.ll"), 0;
  if (a.has("header")) return std::cout << artifact("kernel.h"), 0;
  if (a.has("loop-nest")) return std::cout << artifact("loop_nest.txt"), 0;
  if (a.has("schedule")) {
    const std::optional<std::string> s = builder::compiled_schedule_source(k.descriptor.variant);
    if (!s && k.descriptor.schedule.recipe == "adams2019") {
      throw std::runtime_error("variant " + k.descriptor.variant +
                               " was autoscheduled at build time (a rule's autoschedule line): "
                               "it has no .schedule.h (its schedule is what `opforge inspect` "
                               "prints)");
    }
    if (!s) {
      throw std::runtime_error("variant " + k.descriptor.variant + " is scheduled by the '" +
                               k.descriptor.schedule.recipe +
                               "' recipe, not autoscheduled: it has no .schedule.h (its "
                               "schedule is what `opforge inspect` prints)");
    }
    return std::cout << *s, 0;
  }
  if (a.has("html")) {
    cache::write_file_atomic(a.get("html"), artifact("kernel.stmt.html"));
    std::printf("wrote %s (Halide stmt_html of %s)\n", a.get("html").c_str(),
                k.descriptor.variant.c_str());
    return 0;
  }

  registry::ScheduleEnv env;
  const std::map<std::string, double> given = scalar_options(a);
  check_scalar_names(k.descriptor, given, true);
  for (const auto& [name, v] : given) env.values[name] = v;
  const bool one_size = a.has("n");
  if (one_size) {
    const int64_t n = a.get_int("n", 0);
    if (n < 1) throw UsageError("--n must be at least 1");
    env.n = n;
  }
  if (a.has("json")) {
    nlohmann::json j = {{"variant", k.descriptor.variant},
                        {"source", k.origin},
                        {"descriptor", nlohmann::json::parse(registry::to_json(k.descriptor))},
                        {"schedule", k.schedule}};
    if (one_size) {
      nlohmann::json taken = nlohmann::json::object();
      for (const auto& f : k.schedule["funcs"]) {
        for (const auto& st : f["stages"]) {
          registry::CaseChoice c = registry::choose_case(st, env);
          taken[st.value("name", "?")] =
              c.index ? nlohmann::json(*c.index + 1) : nlohmann::json(c.depends_on);
        }
      }
      j["case_taken"] = taken;
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << header_text(k) << "\n"
            << registry::render_schedule(k.schedule, one_size ? &env : nullptr);
  if (!one_size) std::cout << sample_choices(k.schedule, env);
  return 0;
}

Command inspect_command() {
  return {{"inspect",
           "OP|VARIANT",
           "Show a registered kernel's schedule: loops with kinds and widths, splits and tails, "
           "specializations and which one N takes; or its stmt / HTML / assembly / LLVM IR",
           {registry_option(),
            cache_option(),
            attr_option(),
            isa_option(),
            variant_option(),
            {"n", "N", "mark the case each stage takes for N elements (and evaluate chunk sizes)"},
            {"scalar", "NAME=VALUE", "a scalar's value, for fast-path specializations", true},
            {"set", "NAME=VALUE",
             "preview with this schedule param changed (dense ops: " +
                 dsl::ElementwiseSchedule::param_names() +
                 "; NN ops: their algorithm's, listed "
                 "under schedule params): compiled into the cache, not the registry",
             true},
            {"rules", "PATH", "rule files a previewed op comes from", true},
            {"stmt", "", "print the lowered Halide IR (stmt)"},
            {"html", "FILE", "write Halide's stmt_html view to FILE"},
            {"asm", "", "print the assembly"},
            {"llvm", "", "print the LLVM IR"},
            {"header", "", "print the kernel's C header"},
            {"loop-nest", "", "print Halide's own print_loop_nest output"},
            {"schedule", "", "print the Adams2019 .schedule.h of an autoscheduled variant"},
            json_option()}},
          cmd_inspect};
}

}  // namespace opforge::cli
