// opforge cache stats|verify|prune|clear
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "registry/cache/compile_cache.h"
#include "registry/cli/commands.h"

namespace opforge::cli {

namespace {

uint64_t parse_size(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  double mult = 1;
  std::string suffix = end ? end : "";
  if (suffix == "K" || suffix == "k")
    mult = 1024;
  else if (suffix == "M" || suffix == "m")
    mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    throw UsageError("--max-size " + s + ": expected BYTES[K|M|G]");
  if (s.empty() || v < 0) throw UsageError("--max-size " + s + ": expected BYTES[K|M|G]");
  return static_cast<uint64_t>(v * mult);
}

}  // namespace

int cmd_cache(const Args& a) {
  const std::string verb = a.positional.at(0);
  cache::CompileCache c(cache_dir(a));
  if (verb == "stats") {
    cache::Stats s = c.stats();
    if (a.has("json")) {
      std::cout << nlohmann::json{{"root", c.root()},   {"entries", s.entries},
                                  {"bytes", s.bytes},   {"hits", s.hits},
                                  {"misses", s.misses}, {"corrupt", s.corrupt}}
                       .dump(2)
                << "\n";
    } else {
      std::printf(
          "cache %s\n  entries %llu, %.1f MiB\n  hits %llu, misses %llu, corrupt "
          "entries dropped %llu\n",
          c.root().c_str(), (unsigned long long)s.entries, s.bytes / 1048576.0,
          (unsigned long long)s.hits, (unsigned long long)s.misses, (unsigned long long)s.corrupt);
    }
    return 0;
  }
  if (verb == "verify") {
    cache::VerifyResult r = c.verify();
    std::printf("%llu entries intact, %zu corrupt (removed)\n", (unsigned long long)r.ok,
                r.bad.size());
    for (const auto& b : r.bad) std::printf("  removed %s\n", b.c_str());
    return r.bad.empty() ? 0 : 1;
  }
  if (verb == "prune") {
    if (!a.has("max-size") && !a.has("max-age")) {
      throw UsageError("cache prune needs --max-size and/or --max-age");
    }
    const uint64_t bytes = a.has("max-size") ? parse_size(a.get("max-size")) : 0;
    const uint64_t age = static_cast<uint64_t>(a.get_int("max-age", 0)) * 86400;
    std::printf("removed %llu entries\n", (unsigned long long)c.prune(bytes, age));
    return 0;
  }
  if (verb == "clear") {
    c.clear();
    std::printf("cleared %s\n", c.root().c_str());
    return 0;
  }
  throw UsageError("opforge cache: unknown action '" + verb + "' (stats, verify, prune, clear)");
}

}  // namespace opforge::cli
