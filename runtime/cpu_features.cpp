// CPU features: what the host has, and what OPFORGE_CPU_FEATURES leaves visible to selection.
#include <cpuid.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "opforge/runtime.hpp"
#include "opforge/suggest.hpp"

namespace opforge {

namespace {

bool cpuid_f16c() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

// The CPU itself, unmasked.
bool host_supports(const std::string& f) {
  __builtin_cpu_init();
  if (f == "sse4.1") return __builtin_cpu_supports("sse4.1");
  if (f == "sse4.2") return __builtin_cpu_supports("sse4.2");
  if (f == "avx") return __builtin_cpu_supports("avx");
  if (f == "avx2") return __builtin_cpu_supports("avx2");
  if (f == "fma") return __builtin_cpu_supports("fma");
  if (f == "f16c") return cpuid_f16c();
  if (f == "avx512f") return __builtin_cpu_supports("avx512f");
  if (f == "avx512cd") return __builtin_cpu_supports("avx512cd");
  if (f == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (f == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (f == "avx512dq") return __builtin_cpu_supports("avx512dq");
  if (f == "avx512ifma") return __builtin_cpu_supports("avx512ifma");
  if (f == "avx512vbmi") return __builtin_cpu_supports("avx512vbmi");
  if (f == "avx512vnni") return __builtin_cpu_supports("avx512vnni");
  if (f == "avx512bf16") return __builtin_cpu_supports("avx512bf16");
  return false;  // unknown feature: never assume it
}

// Mask levels. avx512 is generators/isa.cpp's avx512 ISA (Skylake-server AVX-512), avx512_bf16
// its tier with vcvtneps2bf16; the test suite checks that each registry ISA's features lie
// within its level.
const std::map<std::string, std::vector<std::string>>& cpu_levels() {
  // Each level is the one below it plus its own features.
  auto plus = [](std::vector<std::string> below, std::initializer_list<const char*> more) {
    below.insert(below.end(), more.begin(), more.end());
    return below;
  };
  static const std::vector<std::string> avx2 = {"sse4.1", "sse4.2", "avx", "avx2", "fma", "f16c"};
  static const std::vector<std::string> avx512 =
      plus(avx2, {"avx512f", "avx512cd", "avx512vl", "avx512bw", "avx512dq"});
  static const std::map<std::string, std::vector<std::string>> levels = {
      {"none", {}},
      {"avx2", avx2},
      {"avx512", avx512},
      {"avx512_bf16", plus(avx512, {"avx512ifma", "avx512vbmi", "avx512vnni", "avx512bf16"})},
  };
  return levels;
}

std::string known_names_text() {
  std::string s = "levels";
  for (const auto& [name, features] : cpu_levels()) s += " " + name;
  s += "; features";
  for (const auto& f : known_cpu_features()) s += " " + f;
  return s;
}

}  // namespace

const std::vector<std::string>& known_cpu_features() {
  static const std::vector<std::string> names = {
      "sse4.1",   "sse4.2",     "avx",        "avx2",       "fma",
      "f16c",     "avx512f",    "avx512cd",   "avx512vl",   "avx512bw",
      "avx512dq", "avx512ifma", "avx512vbmi", "avx512vnni", "avx512bf16"};
  return names;
}

std::vector<std::string> mask_cpu_features(const std::string& mask,
                                           const std::vector<std::string>& host) {
  const std::vector<std::string>& known = known_cpu_features();
  auto is_known = [&](const std::string& f) {
    return std::find(known.begin(), known.end(), f) != known.end();
  };
  auto fail = [&](const std::string& why) {
    throw Error("OPFORGE_CPU_FEATURES='" + mask + "': " + why + " (known: " + known_names_text() +
                ")");
  };
  std::set<std::string> allowed, removed;
  bool any_allowed = false;
  std::vector<std::string> items;  // every comma-separated item, empty ones included
  size_t at = 0;
  for (size_t comma; (comma = mask.find(',', at)) != std::string::npos; at = comma + 1) {
    items.push_back(mask.substr(at, comma - at));
  }
  items.push_back(mask.substr(at));
  for (std::string item : items) {
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (item.empty()) fail("empty item (two commas in a row, or one at an end)");
    if (item[0] == '-') {
      const std::string f = item.substr(1);
      // A removal names one feature: "-avx2" hides avx2 alone, not the whole level.
      if (!is_known(f)) {
        fail("'" + item + "': '" + f + "' is not a CPU feature" +
             (cpu_levels().count(f) ? " (a level: list the level to keep instead)"
                                    : did_you_mean(f, known)));
      }
      removed.insert(f);
      continue;
    }
    any_allowed = true;
    auto level = cpu_levels().find(item);
    if (level != cpu_levels().end()) {
      allowed.insert(level->second.begin(), level->second.end());
    } else if (is_known(item)) {
      allowed.insert(item);
    } else {
      std::vector<std::string> all;  // levels first: on a tie, "avx3" suggests the level avx2
      for (const auto& [name, features] : cpu_levels()) all.push_back(name);
      all.insert(all.end(), known.begin(), known.end());
      fail("unknown CPU feature or level '" + item + "'" + did_you_mean(item, all));
    }
  }
  std::vector<std::string> out;
  for (const auto& f : host) {
    if ((!any_allowed || allowed.count(f)) && !removed.count(f)) out.push_back(f);
  }
  return out;
}

const CpuFeatures& cpu_features() {
  struct State {
    CpuFeatures features;
    std::string error;
  };
  // Read once (thread-safe static): the mask cannot change under a process's selections.
  static const State state = [] {
    State s;
    for (const auto& f : known_cpu_features()) {
      if (host_supports(f)) s.features.host.push_back(f);
    }
    const char* env = std::getenv("OPFORGE_CPU_FEATURES");
    s.features.mask = env ? env : "";
    try {
      s.features.visible = s.features.mask.empty()
                               ? s.features.host
                               : mask_cpu_features(s.features.mask, s.features.host);
    } catch (const Error& e) {
      s.error = e.what();
    }
    return s;
  }();
  if (!state.error.empty()) throw Error(state.error);
  return state.features;
}

bool cpu_supports(const std::string& f) {
  const std::vector<std::string>& v = cpu_features().visible;
  return std::find(v.begin(), v.end(), f) != v.end();
}

}  // namespace opforge
