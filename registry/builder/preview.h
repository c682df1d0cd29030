// Schedule previews: a registered variant recompiled with some schedule params changed
// (`opforge inspect OP --set vector=8`), into the compile cache only. The registry is not
// touched; the preview's artifacts (schedule.json, stmt, asm, ...) are read from the entry.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "opforge/descriptor.h"
#include "registry/cache/compile_cache.h"

namespace opforge::builder {

struct PreviewResult {
  registry::Descriptor descriptor;  // as the registry would describe the preview
  std::string key;
  bool hit = false;
  double compile_ms = 0;
  cache::Entry entry;
};

// `registered`: the descriptor of a registry variant (built-in op, or an op of the rule files
// under `rules`): an optimizer op's elementwise or sparse-row recipe, or an NN op's algorithm.
// `set`: schedule params to override, by name (checked against the recipe's declared ranges;
// an unknown name or an out-of-range value throws std::invalid_argument naming it).
PreviewResult preview_variant(const registry::Descriptor& registered,
                              const std::map<std::string, int64_t>& set,
                              const std::string& cache_dir,
                              const std::vector<std::string>& rules = {});

// The previews of `registered` with each of `sets`, compiled into the compile cache `jobs` at a
// time (0: one per hardware thread), for a caller that loads them one by one afterwards
// (`opforge tune`, which times on a quiet machine). Returns how many were compiled (the others
// were cached). Throws as preview_variant does, naming the variant, once all have finished.
int compile_previews(const registry::Descriptor& registered,
                     const std::vector<std::map<std::string, int64_t>>& sets,
                     const std::string& cache_dir, const std::vector<std::string>& rules = {},
                     int jobs = 0);

}  // namespace opforge::builder
