// The yardsticks of the memory-bound NN ops, out of place:
//   bandwidth_copy: y = x, one read and one write per element (layer_norm, rms_norm, softmax,
//                   gelu, silu, group_norm read x once and write y once; add_layer_norm and
//                   add_rms_norm read two tensors and write two: a copy of twice as many)
//   bandwidth_add:  y = a + b, two reads and one write per element (silu_mul)
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
  const auto p = dsl::ElementwiseSchedule::resolve(a.schedule, a.target);
  dsl::ElementwiseSchedule::apply(y, i, p, {}, Halide::Expr(),
                                  dsl::ElementwiseSchedule::staged_inputs({x}, y, p));
  return {{y}, "copy: " + dsl::ElementwiseSchedule::summary(p), p};
}

dsl::NnKernel build_add(const dsl::NnArgs& a) {
  Halide::ImageParam x = a.tensors.at("a"), b = a.tensors.at("b");
  Halide::Func y = dsl::output_func("y");
  Halide::Var i("i");
  y(i) = x(i) + b(i);
  // Schedule: the copy's (the shared 1-D elementwise recipe).
  const auto p = dsl::ElementwiseSchedule::resolve(a.schedule, a.target);
  dsl::ElementwiseSchedule::apply(y, i, p, {}, Halide::Expr(),
                                  dsl::ElementwiseSchedule::staged_inputs({x, b}, y, p));
  return {{y}, "add: " + dsl::ElementwiseSchedule::summary(p), p};
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

const dsl::NnOpDecl& bandwidth_add() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl o("bandwidth_add");
    o.kind("bandwidth")
        .summary("y = a + b: two reads and one write per element, the yardstick of silu_mul")
        .formula("y[i] = a[i] + b[i]")
        .input("a", {"N"}, "First source")
        .input("b", {"N"}, "Second source")
        .output("y", {"N"}, "Sum")
        .estimate("N", 1 << 22)
        .cost("", "12 * N")
        .example("a=4194304 b=4194304")
        .tolerance(0, 0)
        .algorithm("", "", 0, "add", build_add);
    return o;
  }();
  return d;
}

}  // namespace opforge::generators
