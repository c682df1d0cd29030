// torch.cuda.amp.GradScaler's dynamic loss-scale update (aten _amp_update_scale_, CANN
// AmpUpdateScale), per element so several scalers (e.g. one per parameter group) update in one
// call; the usual call has one element:
//   found_inf != 0 (NaN counts): scale *= backoff_factor; growth_tracker = 0
//   else: t = growth_tracker + 1
//         t == growth_interval: g = float(scale * growth_factor);
//                               scale = isfinite(g) ? g : scale; growth_tracker = 0
//         else: growth_tracker = t
// Products are taken in double and rounded to fp32, as torch does with its double factors
// (the factors themselves arrive as fp32 scalars: torch's defaults 2.0 and 0.5 are exact).
// growth_tracker is an fp32 tensor here (torch: int32): counts are exact up to 2^24.
#include "generators/ops.h"

namespace opforge::generators {

using Halide::Expr;

const dsl::OptimizerDecl& amp_update_scale() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("amp_update_scale")
          .summary("Dynamic loss-scale update of mixed-precision training (GradScaler.update)")
          .reference("torch.cuda.amp.GradScaler.update (aten::_amp_update_scale_)")
          .formula(
              "found_inf: scale *= backoff_factor, growth_tracker = 0; else growth_tracker + 1 "
              "== growth_interval: scale *= growth_factor (kept when not finite), "
              "growth_tracker = 0; else growth_tracker += 1")
          .state("scale", "Loss scale, in place")
          .state("growth_tracker", "Consecutive steps without inf/NaN, in place (fp32 count)")
          .grad("found_inf", "Nonzero (or NaN) where this step's gradients had an inf/NaN")
          .scalar("growth_factor", "Scale multiplier after growth_interval clean steps (2.0)")
          .typical("growth_factor", 2.0)
          .scalar("backoff_factor", "Scale multiplier after a step with inf/NaN (0.5)")
          .typical("backoff_factor", 0.5)
          .scalar_i64("growth_interval", "Clean steps between growths (2000)")
          .typical("growth_interval", 2000)
          .tolerance(1e-7, 1e-38)  // one fp32 rounding of a double product
          .update([](const dsl::UpdateContext& c) {
            const Expr scale = c["scale"], tracker = c["growth_tracker"];
            auto times = [&](const Expr& factor) {  // fp32(double(scale) * factor)
              return Halide::cast(Halide::Float(32), Halide::cast(Halide::Float(64), scale) *
                                                         Halide::cast(Halide::Float(64), factor));
            };
            // Anything but +0/-0 backs off, NaN included (torch: `if (*found_inf)`). Tested on
            // the bits: Halide's simplifier may fold float compares involving NaN.
            const Expr found =
                (Halide::reinterpret(Halide::UInt(32),
                                     Halide::cast(Halide::Float(32), c["found_inf"])) &
                 Halide::cast(Halide::UInt(32), 0x7fffffff)) != 0;
            const Expr next = tracker + 1;
            const Expr grow = next == Halide::cast(tracker.type(), c["growth_interval"]);
            const Expr grown = times(c["growth_factor"]);
            const Expr zero = Halide::cast(tracker.type(), 0);
            return dsl::Updates{
                {"scale", dsl::select(found, times(c["backoff_factor"]),
                                      dsl::select(grow && dsl::is_finite(grown), grown, scale))},
                {"growth_tracker", dsl::select(found || grow, zero, next)}};
          });
  return d;
}

}  // namespace opforge::generators
