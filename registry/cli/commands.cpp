#include "registry/cli/commands.h"

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
          "force an ISA variant (avx512, avx2); default: $OPFORGE_ISA, else the best one the CPU "
          "(as $OPFORGE_CPU_FEATURES masks it) runs"};
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
