// What this host can execute, as the runtime sees it (opforge::cpu_supports, so
// $OPFORGE_CPU_FEATURES masks apply), and one uniform line for what a test leaves out:
//   skipped: avx512 variants, CPU lacks avx512dq (hidden by OPFORGE_CPU_FEATURES=avx2)
// Tests run everything the host can execute and still check, on any host, what needs no
// execution (compiling, descriptors, inspect, variant-id errors).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "opforge/runtime.hpp"

namespace opforge::testing {

// The first of `features` the runtime does not see; "" when it sees them all.
inline std::string first_missing(const std::vector<std::string>& features) {
  for (const auto& f : features) {
    if (!cpu_supports(f)) return f;
  }
  return "";
}

// "CPU lacks F" (with the mask when it is the mask that hides F); "" when nothing is missing.
inline std::string lacks_text(const std::vector<std::string>& features) {
  const std::string f = first_missing(features);
  if (f.empty()) return "";
  const CpuFeatures& c = cpu_features();
  const bool masked = std::find(c.host.begin(), c.host.end(), f) != c.host.end();
  return "CPU lacks " + f + (masked ? " (hidden by OPFORGE_CPU_FEATURES=" + c.mask + ")" : "");
}

// Says "skipped: WHAT, WHY" as a doctest MESSAGE, once per process per distinct line.
inline void note_skipped(const std::string& what, const std::string& why) {
  static std::mutex m;
  static std::set<std::string> said;
  const std::string line = "skipped: " + what + ", " + why;
  {
    std::lock_guard<std::mutex> lock(m);
    if (!said.insert(line).second) return;
  }
  MESSAGE(line);
}

// True when a variant with these features runs here; otherwise says so (once) and is false.
inline bool runs_here(const std::string& what, const std::vector<std::string>& features) {
  const std::string why = lacks_text(features);
  if (why.empty()) return true;
  note_skipped(what, why);
  return false;
}

inline bool runs_here(const registry::Descriptor& d) {
  return runs_here(d.target.isa + " variants", d.target.cpu_features);
}

// ISAs (name, CPU features) split into what runs here and what does not.
struct HostIsas {
  std::vector<std::string> runnable;  // in the order given
  std::vector<std::string> skipped;
  std::string skip_reason;  // "skipped: avx512 variants, CPU lacks avx512dq" or ""
  bool runs(const std::string& isa) const {
    return std::find(runnable.begin(), runnable.end(), isa) != runnable.end();
  }
};

// Notes the skipped ISAs once (note_skipped).
inline HostIsas host_isas(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& isas) {
  HostIsas h;
  for (const auto& [name, features] : isas) {
    const std::string why = lacks_text(features);
    if (why.empty()) {
      h.runnable.push_back(name);
      continue;
    }
    h.skipped.push_back(name);
    const std::string what = name + " variants";
    h.skip_reason += (h.skip_reason.empty() ? "skipped: " : "; ") + what + ", " + why;
    note_skipped(what, why);
  }
  return h;
}

// The ISAs of a registry, or of one op's variants in it (a tier ISA such as avx512_bf16 holds
// a few ops only), with the features their descriptors name (first variant of each).
inline HostIsas host_isas(const Registry& reg, const std::string& op = "") {
  std::vector<std::pair<std::string, std::vector<std::string>>> isas;
  for (const auto& e : reg.index().variants) {
    if (!op.empty() && e.op != op) continue;
    const bool seen =
        std::any_of(isas.begin(), isas.end(), [&](const auto& i) { return i.first == e.isa; });
    if (!seen) isas.emplace_back(e.isa, reg.descriptor(e.variant).target.cpu_features);
  }
  return host_isas(isas);
}

}  // namespace opforge::testing
