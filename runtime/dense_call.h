// The call path of dense elementwise kernels (the optimizer ops) over a compact copy of their
// argument table. Why: a call after the calling thread slept (an optimizer step between a
// model's passes) finds the caches cold, and the full path's walk over the descriptor's Input
// records, strings and heap vectors then cost 6-28 us, against 0.4-1.8 us for the kernel itself
// (apply_adam at 16 and 1000 elements after 2 ms sleeps, AMD EPYC Zen 4): DeepSpeed's CPUAdam
// was faster than opforge there. This path keeps what a call reads in a few cache lines.
//
// It only accepts: any argument it does not accept as it stands (an error of any kind, slices
// past the per-call limit, precision dumps) goes to the full path (kernel_args.cpp), which
// accepts it or names the error. So each of its checks must be one the full path makes, and it
// must make all of them; tests/runtime/test_dense_call.cpp holds the two paths to that.
#pragma once

#include <HalideRuntime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "opforge/runtime.hpp"
#include "opforge/scalar_domain.h"
#include "runtime/kernel_call.h"

namespace opforge {

class DenseCall {
 public:
  // A kernel argument: a tensor slot (its Halide buffer) or a scalar slot (its value).
  struct Arg {
    bool scalar;
    int slot;
  };
  union Value {
    float f32;
    double f64;
    int32_t i32;
    int64_t i64;
  };
  // Storage for one call's Halide arguments.
  struct Frame {
    halide_buffer_t bufs[kMaxArgs];
    halide_dimension_t dims[kMaxArgs];
    Value values[kMaxArgs];
    void* argv[3 * kMaxArgs];
  };

  // Null when this kernel's calls are not ones the path takes: NN ops (named dims), sparse
  // and multi-tensor ops, names of 32 characters or more.
  static std::unique_ptr<DenseCall> build(const registry::Descriptor& d,
                                          const std::vector<const registry::Input*>& tensors,
                                          const std::vector<const registry::Input*>& scalars,
                                          const std::vector<registry::ScalarDomain>& domains,
                                          const std::vector<Arg>& args);

  enum class Outcome {
    run,     // f.argv holds the call's arguments
    empty,   // accepted, nothing to compute
    decline  // the full path decides
  };
  Outcome prepare(const TensorView* tensors, size_t n_tensors, const ScalarView* scalars,
                  size_t n_scalars, Frame& f) const;

 private:
  static constexpr size_t kName = 32;
  enum class Kind : uint8_t { same_shape, block_scale, result };
  struct TensorSlot {
    char name[kName];
    registry::DType dtype;
    int bytes;
    Kind kind;
  };
  struct ScalarSlot {
    char name[kName];
    registry::DType dtype;
    registry::ScalarDomain domain;
  };
  TensorSlot tensors_[kMaxArgs];
  ScalarSlot scalars_[kMaxArgs];
  Arg args_[3 * kMaxArgs];
  size_t n_tensors_ = 0, n_scalars_ = 0, n_args_ = 0;
  size_t first_ = 0;  // the slot whose shape the other same_shape tensors must have
  int64_t block_ = 0, limit_ = 0;
};

// Tests: `off` routes every call through the full path and `required` makes any call this path
// does not run an error (naming the variant), so that the two paths can be compared call by
// call and a test can tell that this one ran. `on` (the default): this path where it accepts.
enum class DenseCalls { off, on, required };
void set_dense_calls(DenseCalls mode);
DenseCalls dense_calls();

}  // namespace opforge
