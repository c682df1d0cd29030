#include "registry/cli/bench/bench_regime.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace opforge::cli {

namespace {
Regime current;
}  // namespace

std::string Regime::text() const {
  if (!idle) return "awake (back-to-back calls)";
  char b[64];
  std::snprintf(b, sizeof b, "idle (%.0f us between calls)", gap_us);
  return b;
}

const Regime& set_regime(const Args& a) {
  Regime r;
  const std::string name = a.get("regime", "awake");
  if (name != "awake" && name != "idle")
    throw UsageError("--regime: awake (back-to-back calls) or idle (a sleep between calls), got '" +
                     name + "'");
  r.idle = name == "idle";
  if (a.has("idle-gap")) {
    if (!r.idle) throw UsageError("--idle-gap goes with --regime idle");
    const std::string s = a.get("idle-gap");
    char* end = nullptr;
    const double us = std::strtod(s.c_str(), &end);
    if (s.empty() || *end || !(us >= 1 && us <= 1e6))
      throw UsageError("--idle-gap: microseconds from 1 to 1000000, got '" + s + "'");
    r.gap_us = us;
  }
  current = r;
  return current;
}

void set_regime(const Regime& r) {
  current = r;
}

const Regime& regime() {
  return current;
}

double timed_seconds(const std::function<void()>& f) {
  if (current.idle) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(current.gap_us));
  }
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace opforge::cli
