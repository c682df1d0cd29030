// Compiles one scheduled pipeline into the artifacts of a cache entry, and the one shared
// Halide runtime every kernel links against (kernels are no_runtime: one runtime per process
// means one thread pool).
#pragma once

#include <Halide.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "registry/cache/compile_cache.h"

namespace opforge::builder {

// File name (and soname) of the shared runtime inside a registry's lib/ directory.
constexpr const char* kRuntimeLibrary = "libopforge_halide_runtime.so";
// The target the shared runtime is built for: baseline x86-64, it runs on every ISA variant.
constexpr const char* kRuntimeTarget = "x86-64-linux";

// Artifacts: "kernel.so" (linked, DT_NEEDED on the runtime, rpath $ORIGIN/../lib),
// "kernel.o", "kernel.h", "kernel.stmt", "kernel.stmt.html", "kernel.s", "kernel.ll" (LLVM IR),
// "loop_nest.txt" (Halide's print_loop_nest) and "schedule.json" (schedule_description.h).
// `runtime_so` is a path to the shared runtime to link against.
cache::Entry compile_kernel(const Halide::Pipeline& pipeline,
                            const std::vector<Halide::Argument>& args, const std::string& entry,
                            const Halide::Target& target, const std::string& runtime_so);

// A scratch copy of the shared runtime (a compile_runtime entry) for kernels to link
// against, removed with the object.
class LinkRuntime {
 public:
  explicit LinkRuntime(const cache::Entry& runtime);
  ~LinkRuntime();
  LinkRuntime(const LinkRuntime&) = delete;
  LinkRuntime& operator=(const LinkRuntime&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

// Artifacts: "runtime.so".
cache::Entry compile_runtime();

// Runs fn with std::cerr captured, returning what it wrote: Halide's loop nest, Adams2019's
// progress. One capture at a time in the process (two swapping std::cerr's buffer at once would
// restore each other's, freed); every capture of std::cerr in the builder goes through here.
std::string with_cerr_captured(const std::function<void()>& fn);

// Names of the artifacts compile_kernel produces; part of the cache key.
std::string kernel_artifact_list();

// Removes the scratch directories ("opforge-build-*", "opforge-link-*" in the system temp
// directory) of builds killed more than `older_than` ago: no build keeps one that long.
// build_registry calls it with a day. Returns how many it removed.
int sweep_scratch_dirs(std::chrono::seconds older_than);

}  // namespace opforge::builder
