// bandwidth_copy: the yardstick of the memory-bound NN ops (layer_norm, rms_norm, softmax,
// gelu read x once and write y once): y = x, out of place.
#include "dsl/elementwise_schedule.h"
#include "generators/op_table.h"

namespace opforge::generators {

namespace {

dsl::NnKernel build_copy(const dsl::NnArgs& a) {
  Halide::ImageParam x = a.tensors.at("x");
  Halide::Func y = dsl::output_func("y");
  Halide::Var i("i");
  y(i) = x(i);
  // Schedule: the shared 1-D elementwise recipe, as gelu's (run-time-sized parallel chunks,
  // serial below 16K elements). A fixed 8192-element block per task was 0.70x of the op it
  // measures at 4096x1024 (layer_norm "142% of the copy"): 512 thread-pool tasks per call.
  const auto p = dsl::ElementwiseSchedule::resolve({}, a.target);
  dsl::ElementwiseSchedule::apply(y, i, p);
  return {{y}, "copy: " + dsl::ElementwiseSchedule::summary(p), p};
}

}  // namespace

const dsl::NnOpDecl& bandwidth_copy() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl o("bandwidth_copy");
    o.kind("bandwidth")
        .summary("y = x: one read and one write per element, the yardstick of memory-bound ops")
        .formula("y[i] = x[i]")
        .input("x", {"N"}, "Source")
        .output("y", {"N"}, "Copy")
        .estimate("N", 1 << 22)
        .cost("", "8 * N")
        .example("x=4194304")
        .tolerance(0, 0)
        .algorithm("", "", 0, "copy", build_copy);
    return o;
  }();
  return d;
}

}  // namespace opforge::generators
