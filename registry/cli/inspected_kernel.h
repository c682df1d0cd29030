// What `opforge inspect` and `opforge diff` look at: a registered variant (named by variant id,
// or by op + --attr/--isa) and its compile-cache entry, or a preview of it with schedule
// params changed by --set (compiled into the cache, never into the registry).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "opforge/descriptor.h"
#include "registry/cache/compile_cache.h"
#include "registry/cli/args.h"

namespace opforge::cli {

struct InspectedKernel {
  registry::Descriptor descriptor;
  cache::Entry entry;
  nlohmann::json schedule;  // the entry's schedule.json
  std::string origin;       // "registry" or "preview (cache only; compiled in 812 ms)"
  std::map<std::string, int64_t> changed;  // the --set params of a preview
};

// --set NAME=VALUE ... as integers (1e4 and 64K accepted); UsageError when malformed.
std::map<std::string, int64_t> set_options(const Args& a);

// `name` is a variant id or an op (then --attr and --isa select the variant). With `set`
// non-empty, the variant is recompiled with those schedule params into the cache.
InspectedKernel inspect_kernel(const Args& a, const std::string& name,
                               const std::map<std::string, int64_t>& set);

}  // namespace opforge::cli
