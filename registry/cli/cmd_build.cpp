// opforge build: the main job.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "opforge/runtime.hpp"
#include "registry/builder/registry_builder.h"
#include "registry/cli/build_progress.h"
#include "registry/cli/commands.h"
#include "registry/cli/user_rules.h"

namespace opforge::cli {

namespace {

// Loads every variant through the runtime: the kernel's metadata is checked against its
// descriptor, so a registry that does not load fails the build, not a later user.
void verify_loadable(const std::string& dir) {
  auto reg = Registry::open(dir, std::string());
  for (const auto& e : reg->index().variants) {
    registry::Descriptor d = reg->descriptor(e.variant);
    bool runs_here = true;
    for (const auto& f : d.target.cpu_features) runs_here = runs_here && cpu_supports(f);
    if (runs_here) reg->load(e.variant);
  }
}

}  // namespace

int cmd_build(const Args& a) {
  const bool user = a.has("user");
  if (user && !a.has("rules")) throw UsageError("--user builds rule files: give --rules PATH");
  if (user && a.has("only")) throw UsageError("--user builds every op of --rules: drop --only");
  builder::BuildOptions o;
  o.registry_dir = registry_dir(a);
  o.cache_dir = cache_dir(a);
  o.cache_from = a.get("cache-from", "");
  o.jobs = static_cast<int>(a.get_int("jobs", 0, 1, kMaxThreads));
  o.only = a.all("only");
  o.rules = absolute_paths(a.all("rules"));
  o.tuning = a.get("tuning", "auto");
  const char* disable = std::getenv("OPFORGE_CACHE_DISABLE");
  if (disable && *disable && std::string(disable) != "0") {
    o.cache_mode = builder::CacheMode::disabled;
  } else if (a.has("recache")) {
    o.cache_mode = builder::CacheMode::recache;
  }
  const bool json = a.has("json");
  BuildProgress progress(
      BuildProgress::style_for(a.has("quiet") || json, a.has("explain"), STDOUT_FILENO),
      a.has("explain"), stdout, STDOUT_FILENO);
  o.on_variant = [&](const builder::VariantResult& v, size_t done, size_t total) {
    progress.variant(v, done, total);
  };
  builder::BuildReport r;
  try {
    r = user ? build_user_rules(o, o.rules, o.registry_dir) : builder::build_registry(o);
    verify_loadable(r.registry_dir);
  } catch (...) {
    progress.abort();
    throw;
  }

  for (const auto& w : r.cache_warnings) {
    std::fprintf(stderr, "opforge build: warning: cache: %s\n", w.c_str());
  }
  if (!json) {
    progress.summary(r);
    return 0;
  }
  int hits = r.runtime.hit;
  for (const auto& v : r.variants) hits += v.hit;
  const char* modes[] = {"use", "recache", "disabled"};
  nlohmann::json j = {{"registry", r.registry_dir},
                      {"cache", r.cache_dir},
                      {"cache_mode", modes[static_cast<int>(r.cache_mode)]},
                      {"runtime_key", r.runtime.key},
                      {"seconds", r.seconds},
                      {"hits", hits},
                      {"misses", static_cast<int>(r.variants.size()) + 1 - hits},
                      {"max_cache_size", r.max_cache_size},
                      {"pruned", r.pruned},
                      {"cache_warnings", r.cache_warnings},
                      {"rule_ops", r.rule_ops},
                      {"tuning", r.tuning_path},
                      {"tuned_variants", r.tuned_variants},
                      {"variants", nlohmann::json::array()}};
  for (const auto& v : r.variants) {
    j["variants"].push_back({{"variant", v.variant},
                             {"op", v.op},
                             {"isa", v.isa},
                             {"cache", v.hit ? "hit" : "miss"},
                             {"why", v.why},
                             {"ms", v.compile_ms},
                             {"bytes", v.kernel_bytes},
                             {"key", v.key}});
  }
  std::cout << j.dump(2) << "\n";
  return 0;
}

Command build_command() {
  return {
      {"build",
       "",
       "Regenerate the op library from the op table through the compile cache; print what it "
       "built",
       {registry_option(),
        cache_option(),
        {"only", "OP", "build only this op (keeps the registry's other ops)", true},
        {"rules", "PATH", "add the ops of a rule file, or of every *.rule in a directory", true},
        {"user", "",
         "build only the --rules ops, into the user registry ($OPFORGE_USER_REGISTRY, default "
         "<cache dir>/user-registry) that the runtime reads beside the op library; a rule "
         "named like an op of the op library (--registry) is refused"},
        {"jobs", "N", "parallel compiles (default: number of cores)"},
        {"cache-from", "DIR",
         "a second compile cache, only read: a kernel the cache lacks is copied from DIR when "
         "DIR has it, instead of compiled (the test registry takes the op library's kernels "
         "from the user's cache)"},
        {"tuning", "auto|none|FILE",
         "machine tuning (`opforge tune`): auto (default) applies <registry>/tuning/<this "
         "machine's fingerprint>.json when it exists; none builds the recipe defaults; FILE "
         "applies that file, which must be this machine's"},
        {"explain", "", "say per variant why it hit or missed the cache"},
        {"quiet", "", "print nothing but errors (no progress, no summary)"},
        {"recache", "",
         "compile every variant and overwrite its cache entry (OPFORGE_CACHE_DISABLE=1: "
         "compile without reading or writing the cache)"},
        json_option()}},
      cmd_build};
}

}  // namespace opforge::cli
