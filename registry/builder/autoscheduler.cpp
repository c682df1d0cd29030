#include "registry/builder/autoscheduler.h"

#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "dsl/optimizer_pipeline.h"
#include "generators/auto_schedules.h"
#include "registry/builder/kernel_compiler.h"

#ifndef OPFORGE_HALIDE_VERSION
#define OPFORGE_HALIDE_VERSION "unknown"
#endif

namespace opforge::builder {

namespace {

void load_plugin_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string& path = generators::autoschedule_settings().plugin;
    if (access(path.c_str(), R_OK) != 0) {
      throw std::runtime_error(path +
                               ": Adams2019 autoscheduler plugin not found (libhalide14-0-dev "
                               "ships it as libautoschedule_adams2019.so)");
    }
    Halide::load_plugin(path);
  });
}

void pin_environment() {
  const auto& s = generators::autoschedule_settings();
  for (const auto& k : s.unset) unsetenv(k.c_str());
  for (const auto& [k, v] : s.env) setenv(k.c_str(), v.c_str(), 1);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to, int* count) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
    ++*count;
  }
  return s;
}

std::string indent(const std::string& body, const std::string& pad) {
  std::string out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) out += (line.empty() ? "" : pad) + line + "\n";
  return out;
}

// `words` (space-separated, leading space) as comment lines of at most 96 columns.
std::string wrap(const std::string& prefix, const std::string& words) {
  std::string out, line = prefix;
  std::istringstream in(words);
  for (std::string w; in >> w;) {
    if (line.size() > prefix.size() && line.size() + 1 + w.size() > 96) {
      out += line + "\n";
      line = prefix;
    }
    line += " " + w;
  }
  return out + line + "\n";
}

// The attrs the variant id names (attrs added later to an op, like grad_scaling()'s, are named
// only off their default).
std::string attrs_text(const dsl::ResolvedOp& op) {
  std::string s;
  for (const auto& [k, v] : op.attrs) {
    bool named = true;
    for (const auto& a : op.decl->attrs()) {
      if (a.name == k && !a.in_id_at_default && a.default_value == v) named = false;
    }
    if (named) s += (s.empty() ? "" : ", ") + k + "=" + v;
  }
  return s.empty() ? "none" : s;
}

// The target as Halide's schedule files print it: without features irrelevant to scheduling.
std::string target_text(Halide::Target t) {
  for (auto f : {Halide::Target::CPlusPlusMangling, Halide::Target::NoRuntime,
                 Halide::Target::UserContext}) {
    t = t.without_feature(f);
  }
  return t.to_string();
}

}  // namespace

std::vector<AutoscheduledVariant> autoscheduled_variants(
    const std::vector<generators::VariantSpec>& rows, const std::vector<std::string>& ops) {
  std::set<std::string> wanted(ops.begin(), ops.end()), found;
  std::vector<AutoscheduledVariant> out;
  for (const auto& row : rows) {
    if (!wanted.empty() && !wanted.count(row.decl->name())) continue;
    const dsl::ResolvedOp op = row.resolve();
    for (const auto& isa_name : row.autoschedule) {
      const std::string hand = op.variant_id(isa_name);
      out.push_back({generators::auto_variant_id(hand), hand, op, generators::isa(isa_name)});
      found.insert(row.decl->name());
    }
  }
  for (const auto& op : wanted) {
    if (!found.count(op)) {
      std::string known;
      std::set<std::string> listed;
      for (const auto& row : rows) {
        if (!row.autoschedule.empty() && listed.insert(row.decl->name()).second) {
          known += (known.empty() ? "" : ", ") + row.decl->name();
        }
      }
      throw std::runtime_error("op '" + op + "' has no autoscheduled variant in the op table " +
                               "(set `autoschedule` on its row; autoscheduled ops: " + known + ")");
    }
  }
  return out;
}

std::string guard_tails(const std::string& source, TailRewrites* counts) {
  TailRewrites n;
  std::string out = replace_all(source, "TailStrategy::ShiftInwards", "TailStrategy::GuardWithIf",
                                &n.shift_inwards);
  out = replace_all(out, "TailStrategy::RoundUp", "TailStrategy::GuardWithIf", &n.round_up);
  if (counts) *counts = n;
  return out;
}

TailRewrites guard_split_tails(Halide::Pipeline pipeline) {
  using Halide::TailStrategy;
  TailRewrites n;
  std::function<void(Halide::Internal::Definition&)> guard = [&](Halide::Internal::Definition& d) {
    for (Halide::Internal::Split& s : d.schedule().splits()) {
      if (!s.is_split()) continue;
      int* count = s.tail == TailStrategy::ShiftInwards ? &n.shift_inwards
                   : s.tail == TailStrategy::RoundUp    ? &n.round_up
                   : s.tail == TailStrategy::Auto       ? &n.automatic
                                                        : nullptr;
      if (!count) continue;
      s.tail = TailStrategy::GuardWithIf;
      ++*count;
    }
    for (auto& spec : d.specializations()) guard(spec.definition);
  };
  std::map<std::string, Halide::Internal::Function> funcs;
  for (const Halide::Func& out : pipeline.outputs()) {
    for (const auto& [name, f] : Halide::Internal::find_transitive_calls(out.function())) {
      funcs.emplace(name, f);
    }
  }
  for (auto& [name, f] : funcs) {
    guard(f.definition());
    for (size_t k = 0; k < f.updates().size(); ++k) guard(f.update(static_cast<int>(k)));
  }
  return n;
}

TailRewrites autoschedule_in_place(Halide::Pipeline pipeline, const Halide::Target& target) {
  const auto& s = generators::autoschedule_settings();
  load_plugin_once();
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  // Pinned once: other threads of a build may read the environment while compiling.
  static std::once_flag pinned;
  std::call_once(pinned, pin_environment);
  // Adams2019's progress on std::cerr, kept out of the build's output.
  with_cerr_captured([&] { pipeline.auto_schedule(s.autoscheduler, target, s.machine_params()); });
  return guard_split_tails(pipeline);
}

std::string funcs_by_name(const std::string& source, Halide::Pipeline pipeline) {
  static const std::regex by_index(R"(pipeline\.get_func\((\d+)\))");
  std::string out;
  auto at = source.cbegin();
  for (std::sregex_iterator m(source.begin(), source.end(), by_index), end; m != end; ++m) {
    const std::string name = pipeline.get_func(std::stoul((*m)[1].str())).name();
    if (name.find('$') != std::string::npos)
      throw std::runtime_error("Func '" + name + "' has no exact name: a schedule file cannot " +
                               "find it in another process (define it with an exact name)");
    out.append(at, (*m)[0].first);
    out += "::opforge::generators::pipeline_func(pipeline, \"" + name + "\")";
    at = (*m)[0].second;
  }
  return out.append(at, source.cend());
}

std::string schedule_file_path(const std::string& dir, const std::string& variant) {
  return dir + "/" + variant + ".schedule.h";
}

std::optional<std::string> compiled_schedule_source(const std::string& variant) {
  const generators::AutoSchedule* s = generators::find_auto_schedule(variant);
  if (!s) return std::nullopt;
  return s->source;
}

std::string auto_variant_id(const std::string& hand_id) {
  return generators::auto_variant_id(hand_id);
}

std::string autoschedule_settings_text() {
  const auto& s = generators::autoschedule_settings();
  return s.autoscheduler + " (" + s.plugin + "), machine params " + s.machine_params_text() + ", " +
         s.env_text();
}

std::string generate_schedule_file(const AutoscheduledVariant& v) {
  const auto& s = generators::autoschedule_settings();
  load_plugin_once();
  const Halide::Target target =
      Halide::Target(v.isa.halide_target).with_feature(Halide::Target::NoRuntime);
  dsl::KernelPipeline p = dsl::build_pipeline(v.op, {}, target, /*scheduled=*/false);
  // One autoscheduler run at a time: the environment and std::cerr are process-wide.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  pin_environment();
  // Adams2019 reports its passes on std::cerr: kept out of the tool's output.
  Halide::AutoSchedulerResults r;
  with_cerr_captured(
      [&] { r = p.pipeline.auto_schedule(s.autoscheduler, target, s.machine_params()); });
  if (r.schedule_source.empty()) {
    throw std::runtime_error(v.variant + ": " + s.autoscheduler + " returned no schedule");
  }
  TailRewrites tails;
  const std::string body = funcs_by_name(guard_tails(r.schedule_source, &tails), p.pipeline);

  std::string set, unset;
  for (const auto& [k, val] : s.env) set += " " + k + "=" + val;
  for (const auto& k : s.unset) unset += " " + k;
  std::ostringstream f;
  f << "// " << s.autoscheduler << " schedule of " << v.variant << ":\n"
    << "// op " << v.op.name() << ", attrs " << attrs_text(v.op) << ", ISA " << v.isa.name
    << ";\n// the autoscheduled twin of " << v.hand << ".\n"
    << "// Generated by `opforge autoschedule " << v.op.name()
    << "`: regenerate rather than edit; the same Halide\n"
    << "// and settings give these bytes again. `opforge build` applies it as it stands, and its\n"
    << "// SHA-256 is part of the variant's cache key (an edit recompiles the variant).\n"
    << "//\n"
    << "// Pinned HL_* environment (set, then unset), whatever the caller's:\n"
    << wrap("//  ", set) << wrap("//  ", unset) << "// Machine params: " << r.machine_params_string
    << " (parallelism, last-level cache bytes, balance).\n"
    << "// Estimates: every tensor 1048576 elements (1 << 20), every scalar 1.\n"
    << "// Halide " << OPFORGE_HALIDE_VERSION
    << ", Adams2019 plugin with its built-in baseline weights.\n"
    << "//\n"
    << "// opforge rewrote " << tails.shift_inwards << " ShiftInwards and " << tails.round_up
    << " RoundUp tail strategies to GuardWithIf: the kernels\n"
    << "// run in place (input and output buffers aliased), and a ShiftInwards tail recomputes\n"
    << "// its last elements from inputs it has already overwritten (wrong results; below one\n"
    << "// tile it reads before the start); RoundUp would write past the end of the buffers.\n"
    << "// Funcs are looked up by name (generators/pipeline_func.h), not by their index in the\n"
    << "// pipeline's function list.\n"
    << "\n"
    << "#ifndef OPFORGE_" << v.variant << "_SCHEDULE_H\n"
    << "#define OPFORGE_" << v.variant << "_SCHEDULE_H\n"
    << "\n"
    << "// MACHINE GENERATED -- DO NOT EDIT\n"
    << "// This schedule was automatically generated by " << s.autoscheduler << "\n"
    << "// for target=" << target_text(target) << "  // NOLINT\n"
    << "// with machine_params=" << r.machine_params_string << "\n"
    << "\n"
    << "#include \"Halide.h\"\n"
    << "#include \"generators/pipeline_func.h\"\n"
    << "\n"
    << "namespace opforge::schedules {\n"
    << "\n"
    << "inline void apply_schedule_" << v.variant << "(\n"
    << "    ::Halide::Pipeline pipeline,\n"
    << "    ::Halide::Target target\n"
    << ") {\n"
    << "    using ::Halide::Func;\n"
    << "    using ::Halide::MemoryType;\n"
    << "    using ::Halide::RVar;\n"
    << "    using ::Halide::TailStrategy;\n"
    << "    using ::Halide::Var;\n"
    << indent(body, "    ") << "}\n"
    << "\n"
    << "}  // namespace opforge::schedules\n"
    << "\n"
    << "#endif  // OPFORGE_" << v.variant << "_SCHEDULE_H\n";
  return f.str();
}

}  // namespace opforge::builder
