// How `opforge bench` spaces its timed calls (--regime):
//   awake  back to back, as a training loop calling one op after another: the thread pool's
//          workers are still spinning when the next call starts;
//   idle   a sleep before every timed call (--idle-gap, default 2 ms, far past the pool's spin
//          period), as an optimizer step between a forward and a backward pass: the workers
//          have gone to sleep and each call pays their wake-up (OpenMP's passive policy, or
//          Halide's pool after its spin).
// The sleep is never inside the timed interval. Process-wide: one bench command per process.
#pragma once

#include <functional>
#include <string>

#include "registry/cli/args.h"

namespace opforge::cli {

struct Regime {
  bool idle = false;
  double gap_us = 2000;
  std::string text() const;  // "awake (back-to-back calls)" / "idle (2000 us between calls)"
};

// From --regime awake|idle and --idle-gap US (UsageError naming a bad value); sets it.
const Regime& set_regime(const Args& a);
void set_regime(const Regime& r);  // `opforge tune` times both, one after the other
const Regime& regime();

// Seconds `f` takes, steady_clock, after the regime's gap.
double timed_seconds(const std::function<void()>& f);

}  // namespace opforge::cli
