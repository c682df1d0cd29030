// What a scheduled pipeline's directives are, as data: every Func's (Func::in wrappers'
// too) compute/store level, storage folding and async flag, and for each stage and each
// specialization its splits (factor, tail strategy) and loops (kind, vector/unroll width).
// Stored in the cache entry as schedule.json and rendered by registry/format/schedule_view.h
// (no libHalide needed there).
//
// Print_loop_nest shows neither specialization conditions nor tail strategies, and names loops
// with per-process counters; this keeps both and renames counters canonically (v84 -> v0), so
// two builds of the same schedule describe identically and `opforge diff` shows real changes.
#pragma once

#include <Halide.h>

#include <nlohmann/json.hpp>

namespace opforge::builder {

// Part of every kernel's cache key (through the artifact list): bump it whenever
// describe_schedule's output changes, so cached entries are described anew.
constexpr int kScheduleDescriptionVersion = 4;

// Schema "opforge.schedule/1" (see registry/format/schedule_view.h).
nlohmann::json describe_schedule(const Halide::Pipeline& pipeline);

// An Expr as a small evaluable tree: numbers, {"var": name}, or [op, operands...];
// anything else becomes ["?", text] (evaluates to unknown).
nlohmann::json expr_to_json(const Halide::Expr& e);

}  // namespace opforge::builder
