// The per-thread block cache behind halide_malloc / halide_free (runtime/halide_alloc.h):
// alignment, reuse, its bounds, blocks freed by another thread, pointers it did not allocate,
// and that a registry installs it in the shared Halide runtime.
//
// test_runtime_tsan builds this file under ThreadSanitizer too.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/halide_alloc.h"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

namespace ha = opforge::halide_alloc;

void drain() {
  ha::trim();
}

TEST_CASE("halide_alloc: aligned, writable, reused by the next allocation that fits") {
  drain();
  void* p = ha::allocate(nullptr, 300000);
  REQUIRE(p);
  CHECK(reinterpret_cast<uintptr_t>(p) % ha::kAlignment == 0);
  std::memset(p, 1, 300000 + 8);  // Halide may touch a few bytes past the end
  ha::release(nullptr, p);
  CHECK(ha::cached_blocks() == 1);
  CHECK(ha::allocate(nullptr, 290000) == p);  // fits, not twice the size
  CHECK(ha::cached_blocks() == 0);
  ha::release(nullptr, p);
  void* small = ha::allocate(nullptr, 1000);  // the 300 KB block is over twice that
  CHECK(small != p);
  ha::release(nullptr, small);
  ha::release(nullptr, nullptr);  // as free(): nothing
  CHECK(ha::allocate(nullptr, SIZE_MAX) == nullptr);
  CHECK(ha::allocate(nullptr, SIZE_MAX - 100) == nullptr);
  CHECK(ha::cached_blocks() == 2);
  drain();
  CHECK(ha::cached_blocks() == 0);
}

TEST_CASE("halide_alloc: at most kBlocks blocks and kBytes bytes per thread, big ones freed") {
  drain();
  std::vector<void*> ps;
  for (int i = 0; i < ha::kBlocks + 4; ++i) ps.push_back(ha::allocate(nullptr, 100000));
  for (void* p : ps) ha::release(nullptr, p);
  CHECK(ha::cached_blocks() == ha::kBlocks);
  drain();
  ps.clear();
  const size_t big = ha::kMaxBlock - 4096;  // three of them exceed kBytes
  for (int i = 0; i < 3; ++i) ps.push_back(ha::allocate(nullptr, big));
  for (void* p : ps) ha::release(nullptr, p);
  CHECK(ha::cached_bytes() <= ha::kBytes);
  CHECK(ha::cached_blocks() < 3);
  drain();
  void* huge = ha::allocate(nullptr, ha::kMaxBlock + 1);
  REQUIRE(huge);
  ha::release(nullptr, huge);
  CHECK(ha::cached_blocks() == 0);
}

TEST_CASE("halide_alloc: a block freed on another thread goes to that thread's cache") {
  drain();
  constexpr int kThreads = 4, kRounds = 200;
  std::vector<std::thread> threads;
  std::vector<void*> handoff(kThreads);
  std::vector<int> after_handoff(kThreads), at_end(kThreads), intact(kThreads, 1);
  for (int t = 0; t < kThreads; ++t) handoff[t] = ha::allocate(nullptr, 200000 + 4096 * t);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ha::release(nullptr, handoff[t]);  // allocated by the main thread
      after_handoff[t] = ha::cached_blocks();
      for (int r = 0; r < kRounds; ++r) {
        const size_t n = 150000 + 64 * r;
        auto* p = static_cast<unsigned char*>(ha::allocate(nullptr, n));
        p[0] = static_cast<unsigned char>(t);
        p[n - 1] = static_cast<unsigned char>(r);
        if (p[0] != t || p[n - 1] != static_cast<unsigned char>(r)) intact[t] = 0;
        ha::release(nullptr, p);
      }
      at_end[t] = ha::cached_blocks();
    });  // its cache is freed as it exits
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    CHECK(after_handoff[t] == 1);
    CHECK(at_end[t] >= 1);
    CHECK(intact[t] == 1);
  }
  CHECK(ha::cached_blocks() == 0);
}

int foreign_frees = 0;
void count_free(void*, void*) {
  ++foreign_frees;
}

TEST_CASE("halide_alloc: a pointer it did not allocate goes to the previous halide_free") {
  drain();
  ha::set_previous_free(count_free);
  std::vector<uint64_t> buf(64, 0);  // no tag before element 8
  foreign_frees = 0;
  ha::release(nullptr, buf.data() + 8);
  CHECK(foreign_frees == 1);
  CHECK(ha::cached_blocks() == 0);
  ha::set_previous_free(ha::release);  // ignored: never loops back into itself
  ha::release(nullptr, buf.data() + 8);
  CHECK(foreign_frees == 2);
  ha::set_previous_free(nullptr);
}

TEST_CASE("halide_alloc: a registry installs it in the shared Halide runtime") {
  auto reg = Registry::open(test_registry_dir());
  AdamData d(1000);
  Kernel& k = reg->select("apply_adam", {});
  k.call(d.tensors({1000}), adam_scalars());  // loads the runtime
  void* h = dlopen("libopforge_halide_runtime.so", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(h);
  auto hmalloc = reinterpret_cast<void* (*)(void*, size_t)>(dlsym(h, "halide_malloc"));
  auto hfree = reinterpret_cast<void (*)(void*, void*)>(dlsym(h, "halide_free"));
  REQUIRE((hmalloc && hfree));
  drain();
  void* p = hmalloc(nullptr, 500000);
  REQUIRE(p);
  CHECK(reinterpret_cast<uintptr_t>(p) % ha::kAlignment == 0);
  hfree(nullptr, p);
  CHECK(ha::cached_blocks() == 1);
  CHECK(hmalloc(nullptr, 500000) == p);
  hfree(nullptr, p);
  drain();
  dlclose(h);
}

}  // namespace
}  // namespace opforge::testing
