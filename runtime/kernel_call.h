// Internal to the runtime: what the registry (loading) and the kernel (calling) share, and the
// steps of a kernel call that check its arguments and lay its tensors out as Halide buffers.
#pragma once

#include <HalideRuntime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <shared_mutex>
#include <string>
#include <vector>

#include "opforge/runtime.hpp"

namespace opforge {

constexpr size_t kMaxArgs = 32;

// The Halide runtime's error handler: keeps the message for the failing call's error.
void capture_halide_error(void*, const char* msg);

// Kernel invocations hold it shared; Registry::set_num_threads holds it exclusively, so the
// shared Halide thread pool is never shut down under a running kernel (it hung or aborted
// when it was). One per process, as the Halide runtime is.
std::shared_mutex& thread_pool_mutex();

inline halide_type_t halide_type_of(registry::DType t) {
  using registry::DType;
  switch (t) {
    case DType::f16:
      return {halide_type_float, 16, 1};
    case DType::bf16:
      return {halide_type_bfloat, 16, 1};
    case DType::f32:
      return {halide_type_float, 32, 1};
    case DType::f64:
      return {halide_type_float, 64, 1};
    case DType::i32:
      return {halide_type_int, 32, 1};
    case DType::i64:
      return {halide_type_int, 64, 1};
    case DType::b8:
    case DType::u8:
    case DType::f8e4m3:  // FP8 bits, decoded by the kernel
    case DType::f8e5m2:
      return {halide_type_uint, 8, 1};
  }
  return {halide_type_float, 32, 1};
}

// The most elements one kernel call may take: the descriptor's limit, and never more than a
// halide_dimension_t extent holds.
inline int64_t call_limit(const registry::Descriptor& d) {
  return std::min<int64_t>(d.shape.max_elements, std::numeric_limits<int32_t>::max());
}

extern const char* const kNotSplittable;

// A tensor's data as a halide_buffer_t host. Never null: Halide reads a null host as a bounds
// query, computes nothing and returns 0, and a zero-size numpy array or torch tensor has a
// null data pointer (`linear` with K = 0 returned zeros instead of its bias). A zero-element
// tensor gets a valid address no kernel may read (a kernel that reads it fails its bounds
// check, loudly).
inline uint8_t* host_of(void* data) {
  alignas(64) static uint8_t empty[64];
  return data ? static_cast<uint8_t*>(data) : empty;
}

inline std::vector<int64_t> shape_of(const TensorView& t) {
  return std::vector<int64_t>(t.shape, t.shape + t.rank);
}

// "op '<op>': <msg>", the form of every argument error.
Error op_error(const registry::Descriptor& d, const std::string& msg);

// A kernel's argument slots: tensors (inputs, then NN outputs) and scalars, descriptor order.
struct Slots {
  const registry::Descriptor& d;
  const std::vector<const registry::Input*>& tensors;
  const std::vector<const registry::Input*>& scalars;
  const std::vector<registry::ScalarDomain>& domains;  // by scalar slot
};

// The slot of the tensor argument `name` (tensors.size() when there is none).
size_t slot_of(const Slots& s, const std::string& name);

// One call's arguments by slot, with each tensor's element count.
struct CallArgs {
  const TensorView* t_at[kMaxArgs] = {};
  double s_at[kMaxArgs];
  int64_t elements[kMaxArgs];
};

// Matches the caller's tensors and scalars to slots: known names, each once, dtypes and
// ranks as declared, no scalar missing.
void match_arguments(const Slots& s, const TensorView* tensors, size_t n_tensors,
                     const ScalarView* scalars, size_t n_scalars, CallArgs& a);

// Element counts: every tensor given, no negative dims, no int64 overflow, within the
// per-call limit unless the op runs in slices, data present.
void count_elements(const Slots& s, CallArgs& a);

// Halide dims per tensor of an optimizer or bandwidth op: elementwise ops flatten to 1-D;
// multi-tensor ops see (chunk, chunks); sparse ops see states as (cols, rows), gradients as
// (cols, len(indices)) and indices as 1-D.
struct Layout {
  halide_dimension_t dims[kMaxArgs][2];
  int rank[kMaxArgs];
  bool result[kMaxArgs];  // found_inf and the like: one element, whatever the rest's shape
};

// Checks the tensors' shapes (and segment table or indices) against each other and fills
// `l`; false when there is nothing to compute.
bool plan_layout(const Slots& s, const CallArgs& a, Layout& l);

// In-place updates assume distinct arguments do not overlap.
void check_no_overlap(const Slots& s, const CallArgs& a);

// NN ops: each output has the shape its dims say and overlaps no other argument; true when
// an output is empty (nothing to compute).
bool check_named_outputs(const Slots& s, size_t n_in, const TensorView* const* t_at,
                         const std::vector<std::vector<int64_t>>& output_shapes,
                         const std::vector<registry::Input>& output_slots);

}  // namespace opforge
