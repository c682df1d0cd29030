// opforge cache stats|verify|prune|clear|config
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "registry/cache/cache_config.h"
#include "registry/cache/compile_cache.h"
#include "registry/cli/commands.h"

namespace opforge::cli {

namespace {

uint64_t size_option(const Args& a, const std::string& name) {
  try {
    return cache::parse_size(a.get(name), "--" + name);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

void no_more_words(const Args& a, size_t allowed) {
  if (a.positional.size() > allowed) {
    throw UsageError("cache " + a.positional[0] + ": unexpected '" + a.positional[allowed] + "'");
  }
}

int stats(cache::CompileCache& c, const Args& a) {
  no_more_words(a, 1);
  if (a.has("zero")) {
    c.zero_stats();
    std::printf("statistics zeroed (%s)\n", c.root().c_str());
    return 0;
  }
  const cache::Stats s = c.stats();
  const cache::EffectiveSize max = cache::effective_max_size(c.root());
  if (a.has("json")) {
    std::cout << nlohmann::json{{"root", c.root()},
                                {"entries", s.entries},
                                {"bytes", s.bytes},
                                {"max_size", max.bytes},
                                {"max_size_source", max.source},
                                {"hits", s.hits},
                                {"misses", s.misses},
                                {"corrupt", s.corrupt}}
                     .dump(2)
              << "\n";
    return 0;
  }
  const uint64_t lookups = s.hits + s.misses;
  std::printf("cache %s\n", c.root().c_str());
  std::printf("  entries %llu, %s of max-size %s", (unsigned long long)s.entries,
              cache::format_size(s.bytes).c_str(), cache::format_limit(max.bytes).c_str());
  if (max.bytes) std::printf(" (%.1f%%)", 100.0 * s.bytes / max.bytes);
  std::printf(", max-size from %s\n", max.source.c_str());
  std::printf("  hits %llu, misses %llu", (unsigned long long)s.hits, (unsigned long long)s.misses);
  if (lookups) std::printf(" (%.1f%% hits)", 100.0 * s.hits / lookups);
  std::printf(", corrupt entries dropped %llu\n", (unsigned long long)s.corrupt);
  return 0;
}

int config(cache::CompileCache& c, const Args& a) {
  no_more_words(a, 3);
  if (a.positional.size() == 2)
    throw UsageError("cache config " + a.positional[1] + ": needs a VALUE");
  if (a.positional.size() == 3) {
    try {
      cache::set_config(c.root(), a.positional[1], a.positional[2]);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    std::printf("%s = %s (%s)\n", a.positional[1].c_str(), a.positional[2].c_str(),
                cache::config_path(c.root()).c_str());
    return 0;
  }
  const cache::EffectiveSize max = cache::effective_max_size(c.root());
  std::printf("max-size = %s (%s; from %s)\n", max.bytes ? std::to_string(max.bytes).c_str() : "0",
              cache::format_limit(max.bytes).c_str(), max.source.c_str());
  return 0;
}

}  // namespace

int cmd_cache(const Args& a) {
  const std::string verb = a.positional.at(0);
  if (a.has("zero") && verb != "stats") throw UsageError("--zero is an option of cache stats");
  if ((a.has("max-size") || a.has("max-age")) && verb != "prune") {
    throw UsageError(std::string("--") + (a.has("max-size") ? "max-size" : "max-age") +
                     " is an option of cache prune (persistent: cache config max-size SIZE)");
  }
  const std::string dir = cache_dir(a);
  // Reading or removing a cache that is not there is a typo's likelier cause than an empty
  // cache: said, not reported as done (config makes the directory: it sets a setting). Checked
  // after the action's own options.
  auto require_cache = [&] {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      throw UsageError("no compile cache at " + dir + " (nothing to " + verb + ")");
  };
  if (verb == "stats" || verb == "verify" || verb == "clear") require_cache();
  cache::CompileCache c(dir);
  if (verb == "stats") return stats(c, a);
  if (verb == "config") return config(c, a);
  no_more_words(a, 1);
  if (verb == "verify") {
    cache::VerifyResult r = c.verify();
    std::printf("%llu entries intact, %zu corrupt (removed)\n", (unsigned long long)r.ok,
                r.bad.size());
    for (const auto& b : r.bad) std::printf("  removed %s\n", b.c_str());
    return r.bad.empty() ? 0 : 1;
  }
  if (verb == "prune") {
    // Without limits: down to the configured max-size, as after a build.
    const uint64_t bytes = a.has("max-size")  ? size_option(a, "max-size")
                           : a.has("max-age") ? 0
                                              : cache::effective_max_size(c.root()).bytes;
    const uint64_t age = static_cast<uint64_t>(a.get_int("max-age", 0, 0, 36500)) * 86400;
    require_cache();
    std::printf("removed %llu entries\n", (unsigned long long)c.prune(bytes, age));
    return 0;
  }
  if (verb == "clear") {
    c.clear();
    std::printf("cleared %s\n", c.root().c_str());
    return 0;
  }
  throw UsageError("unknown action '" + verb + "' (stats, verify, prune, clear, config)");
}

Command cache_command() {
  return {{"cache",
           "stats|verify|prune|clear|config [NAME] [VALUE]",
           "Manage the compile cache; config NAME VALUE sets a persistent setting (max-size: "
           "pruned to it after every build, default 2G; $OPFORGE_CACHE_MAXSIZE overrides), config "
           "alone prints them",
           {cache_option(),
            {"zero", "", "stats: reset the hit/miss statistics"},
            {"max-size", "SIZE", "prune: keep at most this much (K/M/G/T; default: the max-size)"},
            {"max-age", "DAYS", "prune: drop entries unused for longer"},
            json_option()}},
          cmd_cache};
}

}  // namespace opforge::cli
