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

// 1/x in an update rule. For fp32 the schedule chooses how (its `divide` param; see
// lower_fp32_math): the divider is the bottleneck of sqrt-heavy updates, and which way is
// faster depends on the CPU, not the ISA. For other float types (the fp64 golden) it is 1/x.
Halide::Expr reciprocal(const Halide::Expr& x);

// Resolves the fp32 math an update leaves to its schedule, over the whole Expr `e`:
//  - each reciprocal(): with `divide` false, the hardware estimate (rcpps) and one
//    Newton-Raphson step: within 2 ulp for normal x; exact for 0, +-inf and NaN; +-inf for
//    denormal x (rcpps flushes them); may differ by an ulp between CPU vendors (rcpps tables
//    differ). With `divide` true, the exact IEEE 1/x. Measured, apply_adam: on Sapphire Rapids
//    (AVX-512) the estimate moved Adam from 85% to 100% of the same-traffic bandwidth kernel at
//    N = 1e6 and from 3.0x to 2.1x its time at N = 1e4; on an AMD EPYC (family 26) the divide
//    is faster, one thread, same run (opforge bench --set divide=1): AVX-512 1.73 vs 2.08 us at
//    1e4, 17.8 vs 19.8 us at 1e5, 213 vs 228 us at 1e6; AVX2 2.94 vs 3.01, 27.1 vs 27.7, 270 vs
//    289 us. Hence a param `opforge tune` searches; default false. At DRAM-bound sizes the
//    same AVX-512 core lost 5-12% with the divide (1e7), so the schedule can also split by
//    N (`divide_below`: the two forms, each in loop nests specialized on N).
//  - each sqrt: LLVM's sqrt intrinsic, which the x86 backend emits at the vector's full width.
//    Halide 14 maps sqrt to its x86 runtime's 8-lane AVX routine, so a 16-lane (AVX-512) sqrt
//    was split into two ymm halves with an extract and an insert each; full width took Adam
//    from 2.60 to 2.10 us at N = 1e4 and 25.0 to 20.0 us at 1e5 (one thread, same run, same
//    EPYC). Same values: both are the correctly rounded sqrt.
//  - with `rcp14` (AVX-512 targets at the skylake level, the schedule's `divide` false): the
//    estimate is vrcp14ps and the special inputs are found by vfpclassps, through
//    dsl/table_lookup.c's opforge_rcp14 (linked as the lookups are): the same contract, one
//    instruction for the estimate where Halide's fast_inverse takes two 8-lane vrcpps, an
//    extract and an insert on AVX-512, and a vfpclassps for the special inputs where the
//    bits test takes three. Measured (one thread, 5e4, in cache, preview / registered):
//    scripts/BENCHMARKS.md ("The reciprocal by vrcp14ps").
// Every fp32 update must pass through it (the optimizer pipeline does): an unresolved
// reciprocal would be an undefined extern call.
struct Fp32Math {
  bool divide = false;
  bool rcp14 = false;
};
Halide::Expr lower_fp32_math(const Halide::Expr& e, Fp32Math how);

// exp and log for update rules: Halide::exp / Halide::log with the special values Halide 14
// gets wrong (its fp32 versions, measured): exp(+inf), exp(x >= 2^31 ln 2) and exp(NaN) give
// 0 (the integer power of two wraps), log(+inf) gives 88.7 and log(NaN) a finite value (the
// range reduction reads their exponent as a number), log of a denormal is off by its missing
// exponent bits. Here: exp gives +inf and NaN; log gives +inf, NaN, and denormals' logs
// through x 2^24. Other types (the fp64 golden) go to Halide's, which calls libm.
Halide::Expr exp(const Halide::Expr& x);
Halide::Expr log(const Halide::Expr& x);

// pow(x, y) for update rules, with C99's special values (Annex F, as libm's powf and torch's
// pow): pow(x, +-0) = 1 and pow(1, y) = 1 even for NaN; pow(-1, +-inf) = 1; a finite negative
// x to a finite non-integer y is NaN; +-0 and -inf keep their sign for odd integer y; the
// limits at +-inf. Halide 14's fp32 pow is exp(log|x| y) on its exp and log, so it inherits
// their specials (pow(+inf, 2.5) finite, pow(NaN, 2.5) finite, pow(x, inf) wrong); this is
// the same formula on dsl::exp and dsl::log, the specials decided on the bits (fast math may
// fold float compares with inf or NaN). Accuracy as Halide's: |x|^y is exp of t = y log|x|,
// whose absolute rounding grows with |t|, so the relative error is a few ulp plus about
// |t| ulp (tests/dsl/test_math.cpp measures it). Cost: FTRL's general lr_power path (two pows
// per element) took 1.23-1.28x its time on Halide's pow (1e6, 2 threads, Zen 4). A constant
// integer y is Halide's product of squares; other types (the fp64 golden) call libm.
Halide::Expr pow(const Halide::Expr& x, const Halide::Expr& y);

// True where x is neither infinite nor NaN, as an integer test on the exponent bits (fp32, and
// fp64 for the golden): no float comparison for Halide's simplifier to fold (it broke
// `x == inf` and is_nan tests in earlier ops). Call it qualified: Halide has an is_finite too.
Halide::Expr is_finite(const Halide::Expr& x);

// True where x is a NaN, on the exponent and mantissa bits (fp32, and fp64 for the golden).
// Call it qualified: Halide has an is_nan too.
Halide::Expr is_nan(const Halide::Expr& x);

// max(a, b) that keeps a NaN of either argument, as torch.maximum does. Halide's max leaves
// NaN unspecified: AMSGrad's max(v_max, v) with a NaN v kept v_max in some variants (avx512
// bf16ms AdamW) and gave NaN in others.
Halide::Expr maximum(const Halide::Expr& a, const Halide::Expr& b);

// Storage conversions for mixed precision (arithmetic stays fp32). Both narrowings round to
// nearest, ties to even, and keep NaN a NaN; both are written on the integer bits of the fp32
// value (reinterpret<uint32>), never with float compares: Halide's simplifier assumes finite
// floats and folds NaN tests away.
//
// fp32 -> bfloat16: round-to-nearest-even on the bits ((u + 0x7fff + lsb) >> 16), which is
// exact for subnormals (same exponent range as fp32; the host's vcvtneps2bf16 would flush
// them) and overflows to +-inf past the largest bf16. NaN becomes the quiet NaN
// (u >> 16) | 0x0040: same sign, the payload's top bits, quiet bit set (never inf).
// A non-fp32 argument is first cast to fp32.
Halide::Expr f32_to_bf16(Halide::Expr x);

// The same rounding for computed values (the NN ops' bf16 stores), two integer min ops instead
// of f32_to_bf16's NaN test and select: every quiet NaN stays a NaN (its sign kept, its payload
// rounded) where the bare rounding (Halide 14's cast) carried NaN bits 0x7fff8000.. into the
// sign and wrapped 0xffff8000.. to 0 (a NaN weight stored as 0). A signalling NaN with its
// payload in the low 15 bits rounds to inf, as in Halide's cast; x86 arithmetic never
// produces one (it quiets every NaN it computes). Cost: dsl/nn_op_decl.cpp's NnArgs::store.
Halide::Expr f32_to_bf16_computed(Halide::Expr x);

// fp32 -> IEEE binary16: Halide's cast (round to nearest even, overflow to +-inf, f16
// subnormals exact; Halide 14 emits it as integer code here, not F16C's vcvtps2ph, which is
// why f16m trails bf16m), except NaN: Halide 14 turns NaN into inf (0x7c00), so NaN is
// mapped explicitly to the quiet NaN 0x7e00 | sign.
Halide::Expr f32_to_f16(Halide::Expr x);

// fp32 -> the storage type `t` (Float(16), BFloat(16), or Float(32): unchanged).
Halide::Expr to_storage(const Halide::Type& t, Halide::Expr x);

// Storage -> fp32 compute: exact for f16 and bf16 (every value, NaN payloads included, is
// representable in fp32). Returns fp32 `x` unchanged.
Halide::Expr from_storage(const Halide::Expr& x, const Halide::Type& compute = Halide::Float(32));

}  // namespace opforge::dsl
