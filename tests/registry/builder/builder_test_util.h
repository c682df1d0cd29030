// Shared by the builder tests: a scratch directory and a build of some ops into it.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "registry/builder/registry_builder.h"

namespace opforge::builder::testing {

namespace fs = std::filesystem;

// A fresh directory under /tmp, removed with everything in it at scope end.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/opforge-builder-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// build_registry of `only` (and the ops of the rule files `rules`) into `reg` through `cache`.
inline BuildReport build(const fs::path& reg, const fs::path& cache, std::vector<std::string> only,
                         std::vector<std::string> rules = {}) {
  BuildOptions o;
  o.registry_dir = reg.string();
  o.cache_dir = cache.string();
  o.only = std::move(only);
  o.rules = std::move(rules);
  return build_registry(o);
}

}  // namespace opforge::builder::testing
