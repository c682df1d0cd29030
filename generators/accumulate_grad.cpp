// Gradient accumulation over micro-batches: acc += grad (scaled: acc += grad * scale), the fp32
// accumulator updated in place. With bf16g/f16g storage the micro-batch gradients arrive in
// bf16/f16 and are widened exactly, so only the fp32 sum rounds: the reason to accumulate in
// fp32 at all (N bf16 additions would lose the small gradients' low bits N times).
#include "generators/ops.h"

namespace opforge::generators {

const dsl::OptimizerDecl& accumulate_grad() {
  static const dsl::Condition scaled{"scaled", "true"};
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("accumulate_grad")
          .summary(
              "Gradient accumulation into an fp32 buffer, in place (micro-batch gradients in "
              "fp32, bf16 or f16), optionally scaled")
          .reference(
              "torch autograd p.grad += g; DeepSpeed BF16_Optimizer.update_hp_grads (fp32 "
              "hp_grad += lp.grad); CANN has no such op (closest: aclnnInplaceAdd, self += "
              "alpha*other)")
          .formula(
              "acc += grad; scaled: acc += grad * scale (e.g. 1/N over N micro-batches, or "
              "1/loss_scale)")
          .state("acc", "fp32 gradient accumulator, in place")
          .grad("grad", "This micro-batch's gradient")
          .scalar("scale", "Multiplies grad before it is added", scaled)
          .typical("scale", 0.125)
          .attr_bool("scaled", false, "multiply grad by the scalar `scale` (adds the argument)")
          // One fp32 rounding of the exact acc + grad*scale (an fma); atol covers a target that
          // rounds the product separately (|grad*scale| <= 1 in the tests).
          .tolerance(1e-7, 1e-7)
          .update([](const dsl::UpdateContext& c) {
            const dsl::Expr g = c.attr_bool("scaled") ? c["grad"] * c["scale"] : c["grad"];
            return dsl::Updates{{"acc", c["acc"] + g}};
          });
  return d;
}

}  // namespace opforge::generators
