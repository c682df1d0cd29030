// bandwidth_copy: the yardstick of the memory-bound NN ops (layer_norm, rms_norm, softmax,
// gelu read x once and write y once): y = x, out of place.
#include "generators/op_table.h"

namespace opforge::generators {

namespace {

dsl::NnKernel build_copy(const dsl::NnArgs& a) {
  Halide::ImageParam x = a.tensors.at("x");
  Halide::Func y = dsl::output_func("y");
  Halide::Var i("i"), io("io"), ii("ii");
  y(i) = x(i);
  // Schedule: 16-lane vectors, parallel over 8192-element blocks (32 KB each: a dozen blocks
  // per thread at 1e6 elements, few enough that the per-task cost of ~5 us stays under 2%);
  // below one block, one serial vector loop. Out of place, so ShiftInwards tails are safe.
  const Halide::Expr n = x.dim(0).extent();
  y.specialize(n >= 8192)
      .split(i, io, ii, 8192, Halide::TailStrategy::ShiftInwards)
      .parallel(io)
      .vectorize(ii, 16);
  y.vectorize(i, 16, Halide::TailStrategy::GuardWithIf);
  return {{y}, "parallel 8192-element blocks, 16 lanes; serial below 8192", {{"block", 8192}}};
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
