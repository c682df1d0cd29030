#include "registry/cli/commands.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "opforge/runtime.hpp"
#include "registry/builder/tuning.h"
#include "registry/cache/compile_cache.h"
#include "registry/cli/bench/bench_model.h"

namespace opforge::cli {

namespace fs = std::filesystem;

OptionSpec registry_option() {
  return {"registry", "DIR",
          "op registry (default: $OPFORGE_REGISTRY or " + Registry::default_dir() + ")"};
}
OptionSpec cache_option() {
  return {"cache-dir", "DIR",
          "compile cache (default: $OPFORGE_CACHE_DIR, $XDG_CACHE_HOME/opforge, ~/.cache/opforge)"};
}
// A directory option's value (or its default, from the environment): absent (commands that
// create it do) or a directory; never a file, which commands would misreport as an empty
// registry or cache.
std::string checked_dir(const std::string& what, const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw UsageError(what + " " + dir + ": not a directory");
  }
  return dir;
}

std::string registry_dir(const Args& a) {
  return checked_dir("op registry", a.get("registry", Registry::default_dir()));
}
std::string cache_dir(const Args& a) {
  return checked_dir("compile cache",
                     a.has("cache-dir") ? a.get("cache-dir") : cache::CompileCache::default_root());
}

OptionSpec variant_option() {
  return {"variant", "ID",
          "this variant by id (e.g. an autoscheduled ..._avx512__auto) instead of --attr/--isa"};
}

Kernel& op_kernel(Registry& reg, const Args& a, const std::string& op) {
  if (!a.has("variant")) return reg.select(op, attr_options(a), a.get("isa"));
  if (a.has("attr") || a.has("isa"))
    throw UsageError("--variant picks attrs and ISA: drop --attr/--isa");
  // The op first, from the index: naming another op's variant is a usage error even where
  // that variant cannot load (an avx512 variant on an AVX2 host).
  for (const auto& e : reg.index().variants) {
    if (e.variant == a.get("variant") && e.op != op) {
      throw UsageError("variant " + e.variant + " is a variant of " + e.op + ", not of " + op);
    }
  }
  return reg.load(a.get("variant"));
}

std::string host_summary() {
  const std::string model = builder::this_machine().cpu_model;
  const CpuFeatures& c = cpu_features();
  std::string s = "host: " + model + ", CPU features:";
  for (const auto& f : c.visible) s += " " + f;
  if (c.visible.empty()) s += " none";
  if (!c.mask.empty()) {
    std::string hidden;
    for (const auto& f : c.host) {
      if (std::find(c.visible.begin(), c.visible.end(), f) == c.visible.end()) hidden += " " + f;
    }
    s += ", masked by OPFORGE_CPU_FEATURES=" + c.mask +
         (hidden.empty() ? " (hides nothing)" : " (hides" + hidden + ")");
  }
  return s;
}

nlohmann::json host_json() {
  const CpuFeatures& c = cpu_features();
  nlohmann::json j = {{"cpu_model", builder::this_machine().cpu_model},
                      {"cpu_features", c.visible}};
  if (!c.mask.empty()) j["features_mask"] = c.mask;
  return j;
}

void check_writable_file(const std::string& what, const std::string& path, bool make_dirs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p = fs::absolute(path, ec);
  if (ec || path.empty()) throw UsageError(what + " '" + path + "': not a file path");
  if (fs::is_directory(p, ec)) throw UsageError(what + " " + path + ": is a directory, not a file");
  fs::path dir = p.parent_path();
  if (make_dirs) {
    fs::create_directories(dir, ec);
    if (ec)
      throw UsageError(what + " " + path + ": cannot make " + dir.string() + ": " + ec.message());
    // A file made and removed beside it: the write at the end will succeed (root passes access()).
    std::string probe = (dir / ".opforge-probe-XXXXXX").string();
    const int fd = ::mkstemp(probe.data());
    if (fd < 0) throw UsageError(what + " " + path + ": cannot write in " + dir.string());
    ::close(fd);
    ::unlink(probe.c_str());
    return;
  }
  while (!dir.empty() && !fs::exists(dir, ec)) dir = dir.parent_path();
  if (!fs::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0) {
    throw UsageError(what + " " + path + ": cannot write in " + dir.string());
  }
}

void check_scalar_names(const registry::Descriptor& d, const std::map<std::string, double>& given,
                        bool extents) {
  for (const auto& [name, v] : given) {
    const registry::Input* in = d.find_input(name);
    if (in && in->role == registry::Input::Role::scalar) continue;
    const size_t dot = name.find(".extent.");
    if (extents && dot != std::string::npos && name.size() > dot + 8 &&
        name.find_first_not_of("0123456789", dot + 8) == std::string::npos) {
      const std::string arg = name.substr(0, dot);
      const bool output = std::any_of(d.outputs.begin(), d.outputs.end(),
                                      [&](const auto& o) { return o.name == arg; });
      if (d.find_input(arg) || output) continue;
    }
    std::vector<std::string> known;
    for (const auto& x : d.inputs) {
      if (x.role == registry::Input::Role::scalar) known.push_back(x.name);
    }
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw UsageError("--scalar '" + name + "': " + d.op + " has no such scalar argument" +
                     (extents ? " or input extent (NAME.extent.D)" : "") +
                     " (its scalars: " + (list.empty() ? "none" : list) + ")");
  }
}

std::string tuning_text(const registry::Descriptor& d) {
  if (d.schedule.tuning_machine.empty()) return "recipe defaults";
  return "machine tuning " + d.schedule.tuning_machine + " (family " + d.schedule.tuning_family +
         ")";
}

OptionSpec json_option() {
  return {"json", "", "machine-readable output"};
}
OptionSpec unchecked_scalars_option() {
  return {"unchecked-scalars", "",
          "pass scalars outside the domains their descriptors declare (NaN, inf, a beta of 1): "
          "experiments only"};
}
void apply_unchecked_scalars(const Args& a) {
  if (a.has("unchecked-scalars")) set_scalar_checks(false);
}

OptionSpec attr_option() {
  return {"attr", "NAME=VALUE", "select the variant with this attr", true};
}
OptionSpec isa_option() {
  return {"isa", "ISA",
          "force an ISA variant (avx512, avx2; avx512_bf16 for the bf16 activations of the "
          "memory-bound NN ops); default: $OPFORGE_ISA, else the best one the CPU (as "
          "$OPFORGE_CPU_FEATURES masks it) runs"};
}

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      build_command(),   list_command(),   describe_command(),   inspect_command(),
      diff_command(),    report_command(), run_command(),        bench_command(),
      profile_command(), check_command(),  tune_command(),       autoschedule_command(),
      new_command(),     cache_command(),  completion_command(),
  };
  return table;
}

}  // namespace opforge::cli
