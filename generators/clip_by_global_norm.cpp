// global_norm: the global L2 norm of many tensors, read only; and gradient clipping by it.
//
// Gradient clipping by the global L2 norm of many tensors, in one call over their flat buffer
// (every tensor back to back, e.g. a multi-tensor layout): tf.clip_by_global_norm and
// torch.nn.utils.clip_grad_norm_ (norm_type 2), which disagree on the scale and on infinite
// norms, so the convention is an attr:
//   tf:    scale = clip_norm * min(1/n, 1/clip_norm), NaN when n is not finite (TF adds n - n)
//   torch: scale = min(clip_norm / (n + 1e-6), 1) (an infinite n zeroes the gradients, a NaN
//          n makes them NaN: clamp keeps NaN)
// n is summed in fp64 (the fused reduction pass), then rounded to fp32 like the frameworks'
// fp32 norm; the gradients are rewritten in place even when the scale is 1.
#include "generators/ops.h"

namespace opforge::generators {

using dsl::Expr;

namespace {

Expr u32(uint32_t v) {
  return Halide::Internal::make_const(Halide::UInt(32), v);
}

Expr nan_f32() {
  return Halide::reinterpret(Halide::Float(32), u32(0x7fc00000u));
}

// NaN test on the bits: Halide's simplifier may fold float compares against NaN.
Expr nan_bits(const Expr& x) {
  const Expr u = Halide::reinterpret(Halide::UInt(32), Halide::cast(Halide::Float(32), x));
  return (u & u32(0x7fffffffu)) > u32(0x7f800000u);
}

}  // namespace

const dsl::OptimizerDecl& clip_by_global_norm() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("clip_by_global_norm")
          .summary(
              "Clips gradients by their global L2 norm (all tensors, one flat buffer), "
              "in place; returns the norm")
          .reference("tf.clip_by_global_norm; torch.nn.utils.clip_grad_norm_ (norm_type=2)")
          .formula(
              "n = sqrt(sum(grad^2)) over the whole buffer; tf: grad *= clip_norm * min(1/n, "
              "1/clip_norm) (NaN when n is inf/NaN); torch: grad *= min(clip_norm/(n + 1e-6), 1); "
              "global_norm = n")
          .state("grad", "Gradients of every tensor, flat; clipped in place")
          .scalar("clip_norm", "Largest global norm kept (TF clip_norm, torch max_norm)")
          .typical("clip_norm", 1.0)
          .domain("clip_norm", "[0, inf]")
          .result("global_norm", "The global norm n before clipping (written)")
          .attr_string("convention", "tf", {"tf", "torch"},
                       "tf: scale clip_norm/max(n, clip_norm), NaN for a non-finite n; torch: "
                       "min(clip_norm/(n + 1e-6), 1)")
          .tolerance(3e-7, 1e-30)  // the scale (fp32 from an fp64 sum), then one product
          .update([](const dsl::UpdateContext& c) {
            const Expr n = c.norm2(c["grad"]), clip = c["clip_norm"];
            Expr scale;
            if (c.attr_string("convention") == "tf") {
              scale = clip * Halide::min(1.f / n, 1.f / clip);
              scale = dsl::select(dsl::is_finite(n), scale, nan_f32());
            } else {
              scale = Halide::min(clip / (n + 1e-6f), 1.f);
              scale = dsl::select(nan_bits(n), nan_f32(), scale);
            }
            return dsl::Updates{{"grad", c["grad"] * scale}, {"global_norm", n}};
          });
  return d;
}

// Read only: the norm of one call over a flat buffer of every tensor (zero padding adds
// nothing), or accumulated over calls, one per tensor, from 0: n = sqrt(n_old^2 + sum(x^2)).
const dsl::OptimizerDecl& global_norm() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("global_norm")
          .summary(
              "Global L2 norm of many tensors (one flat buffer, or calls accumulating), "
              "read only")
          .reference("tf.linalg.global_norm; torch.nn.utils.get_total_norm (norm_type=2)")
          .formula(
              "global_norm = sqrt(global_norm^2 + sum(grad^2)) (the sum in fp64); 0 on entry "
              "gives the norm of this call's tensors")
          .grad("grad", "Tensors of every model tensor, flat (padding zero), or one tensor")
          .result("global_norm", "Norm so far: set to 0 before the first call")
          .tolerance(3e-7, 1e-30)
          .update([](const dsl::UpdateContext& c) {
            const Expr old = c["global_norm"];
            return dsl::Updates{
                {"global_norm", Halide::sqrt(old * old + c.sum_all(c["grad"] * c["grad"]))}};
          });
  return d;
}

}  // namespace opforge::generators
