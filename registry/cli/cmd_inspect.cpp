// opforge inspect: a registered kernel's schedule, from the compile cache entry its
// descriptor's cache key names.
#include <cstdio>
#include <iostream>

#include "opforge/runtime.hpp"
#include "registry/cache/atomic_file.h"
#include "registry/cache/compile_cache.h"
#include "registry/cli/commands.h"

namespace opforge::cli {

int cmd_inspect(const Args& a) {
  auto reg = Registry::open(registry_dir(a));
  const registry::Descriptor d =
      reg->select(a.positional.at(0), attr_options(a), a.get("isa")).descriptor();
  cache::CompileCache cache(cache_dir(a));
  std::string why;
  auto entry = cache.lookup(d.cache_key, &why);
  if (!entry) {
    throw std::runtime_error("variant " + d.variant + ": its cache entry " +
                             d.cache_key.substr(0, 16) + "... is " + why + " in " + cache.root() +
                             "; run `opforge build` with this cache to recreate it");
  }
  auto artifact = [&](const char* name) { return entry->artifacts.at(name); };
  if (a.has("stmt")) return std::cout << artifact("kernel.stmt"), 0;
  if (a.has("asm")) return std::cout << artifact("kernel.s"), 0;
  if (a.has("header")) return std::cout << artifact("kernel.h"), 0;
  if (a.has("html")) {
    cache::write_file_atomic(a.get("html"), artifact("kernel.stmt.html"));
    std::printf("wrote %s (Halide stmt_html of %s)\n", a.get("html").c_str(), d.variant.c_str());
    return 0;
  }
  std::printf("variant:  %s\nisa:      %s (%s)\ntarget:   %s\nschedule: %s", d.variant.c_str(),
              d.target.isa.c_str(), d.target.cpu_features.empty() ? "" : "needs cpu features",
              d.target.halide_target.c_str(), d.schedule.recipe.c_str());
  for (const auto& [k, v] : d.schedule.params) std::printf(" %s=%s", k.c_str(), v.c_str());
  std::printf("\n          %s\ncache key %s\n\nloop nest:\n%s", d.schedule.summary.c_str(),
              d.cache_key.c_str(), artifact("loop_nest.txt").c_str());
  return 0;
}

}  // namespace opforge::cli
