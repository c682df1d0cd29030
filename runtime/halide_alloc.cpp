// halide_malloc / halide_free with a per-thread cache of freed blocks (halide_alloc.h says why).
#include "runtime/halide_alloc.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace opforge::halide_alloc {

namespace {

// A block: kAlignment bytes of header, then `capacity` bytes for the caller, then kAlignment
// bytes of slack (Halide may read a little past the end). The header's last 16 bytes, just
// before the caller's pointer, hold a tag (ours, not the default allocator's) and the capacity.
constexpr uint64_t kTag = 0x6f70666f72676521ull;  // "opforge!"
constexpr size_t kGranule = 4096;                 // capacities are multiples of this

uint64_t& tag_of(void* p) {
  return static_cast<uint64_t*>(p)[-2];
}
uint64_t& capacity_of(void* p) {
  return static_cast<uint64_t*>(p)[-1];
}
void* raw_of(void* p) {
  return static_cast<char*>(p) - kAlignment;
}

// Trivially destructible, so a call after the thread's Flush ran (a kernel called from another
// thread_local's destructor) still finds valid storage; `closed` then bypasses the cache.
struct Cache {
  void* blocks[kBlocks];  // oldest first
  int n;
  size_t bytes;
  bool closed;
};
thread_local Cache cache;

void free_block(void* p) {
  std::free(raw_of(p));
}

void free_cached() {
  for (int i = 0; i < cache.n; ++i) free_block(cache.blocks[i]);
  cache.n = 0;
  cache.bytes = 0;
}

struct Flush {
  bool armed = false;
  ~Flush() {
    cache.closed = true;
    free_cached();
  }
};
thread_local Flush flush;

std::atomic<void (*)(void*, void*)> previous{nullptr};

}  // namespace

void* allocate(void*, size_t bytes) {
  if (bytes > SIZE_MAX / 2) return nullptr;
  const size_t need = (bytes + kGranule - 1) / kGranule * kGranule;
  // Best fit among the cached blocks, at most twice the size needed (a small buffer does not
  // hold on to a panel another task needs).
  int best = -1;
  for (int i = 0; i < cache.n; ++i) {
    const size_t cap = capacity_of(cache.blocks[i]);
    if (cap >= need && cap <= 2 * need && (best < 0 || cap < capacity_of(cache.blocks[best])))
      best = i;
  }
  if (best >= 0) {
    void* p = cache.blocks[best];
    for (int i = best; i + 1 < cache.n; ++i) cache.blocks[i] = cache.blocks[i + 1];
    --cache.n;
    cache.bytes -= capacity_of(p);
    return p;
  }
  void* raw = std::aligned_alloc(kAlignment, kAlignment + need + kAlignment);
  if (!raw) return nullptr;
  void* p = static_cast<char*>(raw) + kAlignment;
  tag_of(p) = kTag;
  capacity_of(p) = need;
  return p;
}

void release(void* user_context, void* p) {
  if (!p) return;
  if (tag_of(p) != kTag) {
    // Allocated before these were installed (by Halide's default allocator).
    if (auto prev = previous.load(std::memory_order_acquire)) prev(user_context, p);
    return;
  }
  const size_t cap = capacity_of(p);
  if (cache.closed || cap > kMaxBlock) {
    free_block(p);
    return;
  }
  flush.armed = true;  // the first use registers the thread's Flush (its destructor)
  while (cache.n > 0 && (cache.n == kBlocks || cache.bytes + cap > kBytes)) {
    cache.bytes -= capacity_of(cache.blocks[0]);
    free_block(cache.blocks[0]);
    for (int i = 0; i + 1 < cache.n; ++i) cache.blocks[i] = cache.blocks[i + 1];
    --cache.n;
  }
  cache.blocks[cache.n++] = p;
  cache.bytes += cap;
}

void set_previous_free(void (*previous_free)(void*, void*)) {
  if (previous_free != &release) previous.store(previous_free, std::memory_order_release);
}

int cached_blocks() {
  return cache.n;
}
size_t cached_bytes() {
  return cache.bytes;
}
void trim() {
  free_cached();
}

}  // namespace opforge::halide_alloc
