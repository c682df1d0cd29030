// What `opforge bench` and `opforge profile` share: seeded tensors and scalars for one kernel
// call (dense or sparse), timing one call, medians, bytes moved, and the same-traffic
// bandwidth kernel an op is compared with.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "opforge/runtime.hpp"
#include "registry/cli/bench/bench_regime.h"
#include "registry/cli/bench/bench_stats.h"

namespace opforge::cli {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
// A tensor's storage, 64-byte aligned, of the descriptor's dtype (f32, f16 or bf16).
using Buffer = std::unique_ptr<void, AlignedFree>;

// fp32 -> bf16 / f16 bits, round to nearest even, for the finite normal values workloads use.
uint16_t bf16_bits(float x);
uint16_t f16_bits_normal(float x);

// Scalars not given: the descriptor's typical value, else its default (a rule's hyper), else
// 0.5, or 1 for integer ones (a step count).
double default_scalar(const registry::Input& in);

// Tensors and scalars for one dense kernel, `n` elements per tensor (multi-tensor forms: n
// rounded up to whole chunks, one model tensor): positive values keep
// sqrt() and divisions tame. Each tensor has its descriptor dtype: f16/bf16 tensors hold the
// same draws rounded to nearest even. The views point into the object: neither copyable nor
// movable.
struct Workload {
  std::vector<Buffer> buffers;
  std::vector<TensorView> tensors;  // views: the timed call allocates nothing
  std::vector<ScalarView> scalars;
  int64_t n;
  const int64_t one = 1;  // the shape of results (found_inf, ...)
  int64_t chunks = 0;     // multi-tensor forms: the chunk table's length
  int64_t blocks = 0;     // 8-bit states: the absmax tensors' length, ceil(n / block)

  Workload(const registry::Descriptor& d, int64_t n_, const std::map<std::string, double>& given);
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;
};

// Sparse ops: states [rows, cols], `count` gradient rows at seeded random indices (duplicates
// possible).
struct SparseWorkload {
  std::vector<std::vector<float>> f32;
  std::vector<int64_t> idx64;
  std::vector<int32_t> idx32;
  std::vector<int64_t> state_shape, grad_shape, index_shape;
  std::vector<TensorView> tensors;
  std::vector<ScalarView> scalars;

  SparseWorkload(const registry::Descriptor& d, int64_t rows, int64_t cols, int64_t count,
                 const std::map<std::string, double>& given);
  SparseWorkload(const SparseWorkload&) = delete;
  SparseWorkload& operator=(const SparseWorkload&) = delete;
};

// One kernel call's arguments as views (time_call takes any tensors/scalars holder), e.g. a
// bandwidth kernel's views onto an op's buffers.
struct ArgViews {
  std::vector<TensorView> tensors;
  std::vector<ScalarView> scalars;
};

// The bandwidth kernel's views onto the op's own buffers: bandwidth_sS_gG has one state per op
// state and one gradient per other tensor (bandwidth_for), so the same memory is read and
// written. False when the shapes of the argument lists differ.
bool share_buffers(const registry::Descriptor& bw, const Workload& w,
                   const registry::Descriptor& op, ArgViews& out);

// A comma-separated list of positive counts, each an integer ("1048576", "1e6") or a power of
// two ("2^20"), for option `option` (UsageError naming it and the item otherwise).
std::vector<int64_t> count_list(const std::string& text, const std::string& option);

// Seconds one call of `k` on `w` (a Workload or a SparseWorkload) takes, steady_clock, after
// the bench regime's gap (bench_regime.h).
template <class W>
double time_call(Kernel& k, W& w) {
  return timed_seconds(
      [&] { k.call(w.tensors.data(), w.tensors.size(), w.scalars.data(), w.scalars.size()); });
}

// Bytes read plus written per element of the op's tensors (per element of the touched rows
// for sparse ops), from the descriptor's traffic.
double bytes_per_element(const registry::Descriptor& d);

// Whether one dense call's buffers fit in the L3 cache the OS reports (`l3_bytes`; 0: not
// reported, never fits). Where they do, back-to-back calls of one kernel run partly from cache
// and its GB/s are not the memory's (an AMD EPYC VM reported 508 MiB: Adam at N = 1e7, 160 MB
// of buffers, ran its bandwidth kernel 11% faster back to back than interleaved with the op).
// The footprint is the bytes read per call (in-place ops write what they read).
struct CacheFit {
  double footprint_bytes = 0;
  bool fits = false;
  int64_t dram_n = 0;  // the smallest power of ten N whose footprint is 2x the L3 (0: unknown)
};
CacheFit cache_fit(const registry::Descriptor& d, int64_t n, int64_t l3_bytes);

// The bandwidth kernel that moves the same bytes per element as `d`, on d's ISA: the
// descriptor's bandwidth_op; for ops without one (sparse ops), the registry's bandwidth kernel
// with the same traffic, if any (nullptr otherwise).
Kernel* bandwidth_kernel(Registry& reg, const registry::Descriptor& d);

}  // namespace opforge::cli
