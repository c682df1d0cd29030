// A schedule preview run in this process: a registered variant recompiled with some recipe
// params changed (builder::preview_variant, into the compile cache, never the registry), for
// `opforge bench --set` and `opforge tune`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "opforge/runtime.hpp"

namespace opforge::cli {

struct LoadedPreview {
  Kernel* kernel = nullptr;
  bool hit = false;  // the compile cache had it
  double compile_ms = 0;
};

// Compiles (or finds) the preview, copies its kernel to a temp file, loads it on `reg`'s
// Halide runtime and removes the file. Throws std::invalid_argument naming a bad param.
LoadedPreview load_preview(Registry& reg, const registry::Descriptor& registered,
                           const std::map<std::string, int64_t>& set, const std::string& cache_dir,
                           const std::vector<std::string>& rules = {});

// "tasks=2 unroll=4": a --set list as text.
std::string set_text(const std::map<std::string, int64_t>& set);

}  // namespace opforge::cli
