// The cache keys of opforge's compiled artifacts, as ccache keys a compilation: a
// length-prefixed serialization (KeyBuilder) of everything that determines the bytes. The
// builder gathers the values (registry/builder/registry_builder.h kernel_key); which parts a
// key has, their names, order and canonical text are fixed here, so equal inputs give equal
// keys in every process and `opforge build` can say which part changed on a miss.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "opforge/descriptor.h"
#include "registry/cache/compile_cache.h"

namespace opforge::cache {

// What one kernel's key is made of.
struct KernelKeyParts {
  std::string artifacts;  // the artifact list an entry holds (the compiler's)
  std::string halide;     // libHalide: "<version> <sha256 of the library>"
  std::string target;     // canonical Halide target string
  std::string entry;      // the kernel's entry point (its variant id)
  std::vector<registry::KernelArg> arguments;
  std::string algorithm;  // exact text of every definition (floats as hex)
  std::string schedule_recipe;
  std::map<std::string, int64_t> schedule_params;  // resolved
  std::string dsl_sources;                         // fingerprint of the DSL sources
  // Appended in this order after the fixed parts: what else decides the code of some kernels
  // (an NN op's schedule sources; an autoscheduled variant's settings and schedule file).
  std::vector<std::pair<std::string, std::string>> extra = {};
};

// Parts: format ("opforge-cache/<kFormatVersion>/<artifacts>"), halide, target, entry,
// arguments ("name:kind:dtype:dims;" each), algorithm, schedule ("<recipe>{k=v,...}"),
// dsl_sources, then `extra`.
KeyBuilder kernel_key(const KernelKeyParts& p);

// The key of the shared Halide runtime: format, halide, target, entry "runtime".
KeyBuilder runtime_key(const std::string& artifacts, const std::string& halide,
                       const std::string& target);

}  // namespace opforge::cache
