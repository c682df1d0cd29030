// opforge build: the main job.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "opforge/runtime.hpp"
#include "registry/builder/registry_builder.h"
#include "registry/cli/commands.h"

namespace opforge::cli {

namespace {

// Loads every variant through the runtime: the kernel's metadata is checked against its
// descriptor, so a registry that does not load fails the build, not a later user.
void verify_loadable(const std::string& dir) {
  auto reg = Registry::open(dir);
  for (const auto& e : reg->index().variants) {
    registry::Descriptor d = reg->descriptor(e.variant);
    bool runs_here = true;
    for (const auto& f : d.target.cpu_features) runs_here = runs_here && cpu_supports(f);
    if (runs_here) reg->load(e.variant);
  }
}

}  // namespace

int cmd_build(const Args& a) {
  builder::BuildOptions o;
  o.registry_dir = registry_dir(a);
  o.cache_dir = cache_dir(a);
  o.jobs = static_cast<int>(a.get_int("jobs", 0));
  o.only = a.all("only");
  o.rules = a.all("rules");
  builder::BuildReport r = builder::build_registry(o);
  verify_loadable(r.registry_dir);

  int hits = 0;
  for (const auto& v : r.variants) hits += v.hit;
  if (a.has("json")) {
    nlohmann::json j = {{"registry", r.registry_dir},
                        {"cache", r.cache_dir},
                        {"seconds", r.seconds},
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
  std::printf("%-52s %-7s %-5s %9s %8s\n", "variant", "isa", "cache", "ms", "bytes");
  auto row = [&](const builder::VariantResult& v) {
    std::printf("%-52s %-7s %-5s %9.1f %8zu\n", v.variant.c_str(), v.isa.c_str(),
                v.hit ? "hit" : "miss", v.compile_ms, v.kernel_bytes);
    if (a.has("explain")) {
      std::printf("    key %.16s  %s\n", v.key.c_str(),
                  v.hit ? "hit: same key as an entry in the cache" : ("miss: " + v.why).c_str());
    }
  };
  row(r.runtime);
  for (const auto& v : r.variants) row(v);
  std::printf("built %zu variants (%d cache hits, %zu compiled) + runtime in %.2f s\n",
              r.variants.size(), hits, r.variants.size() - hits, r.seconds);
  std::printf("registry: %s\ncache:    %s\n", r.registry_dir.c_str(), r.cache_dir.c_str());
  return 0;
}

}  // namespace opforge::cli
