// Elementwise math for update rules, beyond what Halide 14 offers or where its default is
// slow for optimizers.
#pragma once

#include <Halide.h>

namespace opforge::dsl {

// Halide::select with both branches brought to the wider type: literals are fp32, and the fp64
// golden (opforge check) evaluates the same update with fp64 values.
Halide::Expr select(const Halide::Expr& condition, Halide::Expr a, Halide::Expr b);

// sign(x): 1, -1 or 0 (TensorFlow's sign(0) == 0). Halide 14 has no sign().
Halide::Expr sign(const Halide::Expr& x);

// 1/x for fp32 from the hardware estimate (rcpps) and one Newton-Raphson step: within 2 ulp
// for normal x; exact for 0, +-inf and NaN; +-inf for denormal x (rcpps flushes them). Why: sqrt
// and divide share one divider unit; in apply_adam, replacing the divide moved fp32 Adam from 85%
// to 100% of the same-traffic bandwidth kernel at N = 1e6 (L3-resident) and from 3.0x to 2.1x its
// time at N = 1e4 (L2-resident), same runs. Results may differ by an ulp between CPU vendors (rcpps
// tables differ). For other float types (the fp64 golden) it is the exact 1/x.
Halide::Expr reciprocal(const Halide::Expr& x);

// True where x is neither infinite nor NaN, as an integer test on the exponent bits (fp32, and
// fp64 for the golden): no float comparison for Halide's simplifier to fold (it broke
// `x == inf` and is_nan tests in earlier ops). Call it qualified: Halide has an is_finite too.
Halide::Expr is_finite(const Halide::Expr& x);

}  // namespace opforge::dsl
