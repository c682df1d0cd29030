#include "registry/cli/inspected_kernel.h"

#include <cmath>

#include "opforge/runtime.hpp"
#include "registry/builder/preview.h"
#include "registry/cli/commands.h"
#include "registry/format/schedule_view.h"

namespace opforge::cli {

std::map<std::string, int64_t> set_options(const Args& a) {
  std::map<std::string, int64_t> out;
  for (const auto& s : a.all("set")) {
    auto [name, text] = split_assignment(s, "set");
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    std::string rest = text.substr(used);
    if (rest == "K" || rest == "k") v *= 1024, rest.clear();
    if (rest == "M") v *= 1024 * 1024, rest.clear();
    if (used == 0 || !rest.empty() || v != std::floor(v)) {
      throw UsageError("--set " + name + "=" + text + ": the value must be an integer");
    }
    if (!out.emplace(name, static_cast<int64_t>(v)).second) {
      throw UsageError("--set " + name + " given twice");
    }
  }
  return out;
}

InspectedKernel inspect_kernel(const Args& a, const std::string& name,
                               const std::map<std::string, int64_t>& set) {
  auto reg = Registry::open(registry_dir(a));
  InspectedKernel k;
  bool is_variant = false;
  for (const auto& e : reg->index().variants) is_variant = is_variant || e.variant == name;
  if (is_variant) {
    if (a.has("attr") || a.has("isa")) {
      throw UsageError(name + " is a variant id: --attr and --isa select among an op's variants");
    }
  } else if (a.has("variant")) {
    throw UsageError("registry " + reg->dir() + " has no variant '" + name + "'");
  }
  if (is_variant) {
    k.descriptor = reg->descriptor(name);
  } else {
    // Descriptor and cache entry only: no load, so any ISA's variant reads on any host.
    k.descriptor = reg->choose(name, attr_options(a), a.get("isa"));
  }
  if (set.empty()) {
    cache::CompileCache cache(cache_dir(a));
    std::string why;
    auto entry = cache.lookup(k.descriptor.cache_key, &why);
    if (!entry) {
      throw std::runtime_error("variant " + k.descriptor.variant + ": its cache entry " +
                               k.descriptor.cache_key.substr(0, 16) + "... is " + why + " in " +
                               cache.root() +
                               "; run `opforge build` with this cache to recreate it");
    }
    k.entry = std::move(*entry);
    k.origin = "registry";
  } else {
    builder::PreviewResult p =
        builder::preview_variant(k.descriptor, set, cache_dir(a), a.all("rules"));
    k.descriptor = std::move(p.descriptor);
    k.entry = std::move(p.entry);
    k.changed = set;
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.0f ms", p.compile_ms);
    k.origin = std::string("preview (cache only, not in the registry; ") +
               (p.hit ? "cache hit" : std::string("compiled in ") + ms) + ")";
  }
  auto it = k.entry.artifacts.find("schedule.json");
  if (it == k.entry.artifacts.end()) {
    throw std::runtime_error("cache entry of " + k.descriptor.variant +
                             " has no schedule.json (built by an older opforge): rebuild it");
  }
  k.schedule = nlohmann::json::parse(it->second);
  registry::check_schedule(k.schedule, "schedule.json of " + k.descriptor.variant);
  return k;
}

}  // namespace opforge::cli
