#include "dsl/math.h"

namespace opforge::dsl {

using Halide::Expr;

Expr select(const Expr& condition, Expr a, Expr b) {
  if (a.type() != b.type() && a.type().is_float() && b.type().is_float()) {
    const Halide::Type wide = a.type().bits() >= b.type().bits() ? a.type() : b.type();
    a = Halide::cast(wide, a);
    b = Halide::cast(wide, b);
  }
  return Halide::select(condition, a, b);
}

Expr sign(const Expr& x) {
  Halide::Type t = x.type();
  return Halide::select(x > 0, Halide::cast(t, 1), x < 0, Halide::cast(t, -1), Halide::cast(t, 0));
}

namespace {

// The placeholder reciprocal() leaves for lower_fp32_math.
constexpr const char* kReciprocal = "opforge_reciprocal_f32";

// dsl/table_lookup.c's AVX-512 form of the estimate below (vrcp14ps, vfpclassps).
constexpr const char* kReciprocal14 = "opforge_rcp14";

Expr estimated_reciprocal(const Expr& x) {
  Expr r0 = Halide::fast_inverse(x);
  Expr r1 = r0 * (2.0f - x * r0);
  // For 0, denormals, inf and NaN the Newton step gives NaN; the estimate itself is exact
  // there. The test is on the bits: Halide's simplifier assumes finite floats, and both
  // `x == inf` and is_nan() were optimized into wrong tests. An exponent of 0 or 255, in one
  // signed compare: the bits doubled (the sign dropped, the exponent on top) plus 0x81000000
  // (wrapping, unsigned) fall below 0x82000000 as int32 exactly then. Against the shift, mask
  // and two compares it replaced (AVX2, in cache, one thread): Adam 0.88x the time, AdamW
  // 0.92x, 8-bit Adam 0.97x (linear map) and 0.99x (dynamic).
  const Halide::Type u32 = Halide::UInt(32), i32 = Halide::Int(32);
  const Expr u = Halide::reinterpret(u32, x);
  const Expr w = Halide::reinterpret(
      i32, u + u + Halide::Internal::make_const(u32, static_cast<uint64_t>(0x81000000u)));
  const Expr below = Halide::reinterpret(
      i32, Halide::Internal::make_const(u32, static_cast<uint64_t>(0x82000000u)));
  return Halide::select(w < below, r0, r1);
}

class LowerFp32Math : public Halide::Internal::IRMutator {
 public:
  explicit LowerFp32Math(Fp32Math how) : how_(how) {}

 protected:
  using IRMutator::visit;
  Expr visit(const Halide::Internal::Call* op) override {
    using Halide::Internal::Call;
    if (op->call_type != Call::PureExtern || op->args.size() != 1) return IRMutator::visit(op);
    if (op->name == kReciprocal) {
      Expr x = mutate(op->args[0]);
      if (how_.divide) return 1.0f / x;
      return how_.rcp14 ? Call::make(Halide::Float(32), kReciprocal14, {x}, Call::PureExtern)
                        : estimated_reciprocal(x);
    }
    if (op->name == "sqrt_f32")
      return Call::make(op->type, "llvm.sqrt.f32", {mutate(op->args[0])}, Call::PureExtern);
    return IRMutator::visit(op);
  }

 private:
  Fp32Math how_;
};

}  // namespace

Expr reciprocal(const Expr& x) {
  if (x.type() != Halide::Float(32)) return 1.0f / x;  // fp64 golden builds: exact
  using Halide::Internal::Call;
  return Call::make(Halide::Float(32), kReciprocal, {x}, Call::PureExtern);
}

Expr lower_fp32_math(const Expr& e, Fp32Math how) {
  return e.defined() ? LowerFp32Math(how).mutate(e) : e;
}

namespace {

Expr f32_inf() {
  return Halide::reinterpret(Halide::Float(32), Halide::cast(Halide::UInt(32), 0x7f800000));
}

}  // namespace

Expr exp(const Expr& x) {
  if (x.type() != Halide::Float(32)) return Halide::exp(x);
  // exp(88.73) already overflows; Halide's own overflow select covers x up to 2^31 ln 2.
  return Halide::select(dsl::is_nan(x), x, x > 100.0f, f32_inf(), Halide::exp(x));
}

Expr log(const Expr& x) {
  if (x.type() != Halide::Float(32)) return Halide::log(x);
  const Expr bits = Halide::reinterpret(Halide::UInt(32), x);
  // +0 stays Halide's -inf through the scaling; -0 and the negatives keep its -inf and NaN.
  const Expr positive_denormal = bits < Halide::cast(Halide::UInt(32), 0x00800000);
  // One log of the scaled argument, not a select of two logs (both computed): FTRL's general
  // lr_power path (two pows per element) took 0.83x the time on AVX2 (1e6, 2 threads).
  const Expr finite = Halide::log(Halide::select(positive_denormal, x * 16777216.0f, x)) -
                      Halide::select(positive_denormal, 16.635532333438687f, 0.0f);  // 24 ln 2
  return Halide::select(dsl::is_nan(x), x, bits == Halide::cast(Halide::UInt(32), 0x7f800000),
                        f32_inf(), finite);
}

Expr pow(const Expr& x_in, const Expr& y_in) {
  if (x_in.type() != Halide::Float(32) || Halide::Internal::as_const_int(y_in))
    return Halide::pow(x_in, y_in);
  const Halide::Type u32 = Halide::UInt(32);
  auto bits = [&](uint32_t v) { return Halide::cast(u32, Expr(static_cast<uint64_t>(v))); };
  const Expr x = x_in, y = Halide::cast(Halide::Float(32), y_in);
  const Expr xb = Halide::reinterpret(u32, x), yb = Halide::reinterpret(u32, y);
  const Expr xm = xb & bits(0x7fffffff), ym = yb & bits(0x7fffffff);  // |x|, |y| bits
  // exp(y log|x|) is already right for NaN x or y, |x| = 0 or inf, and y = +-inf with |x| !=
  // 1 (dsl::exp and dsl::log keep inf and NaN). What is left, most of it on y alone (often a
  // scalar, hoisted): y = +-0; |x| = 1 with y inf or NaN; the sign; NaN for (-2)^0.5.
  const Expr y_finite = ym < bits(0x7f800000);
  const Expr y_small = ym < bits(0x4b800000);  // |y| < 2^24: from there every float is even
  const Expr y_integer = Halide::floor(y) == y;
  const Expr y_odd = y_small && y_finite && y_integer &&
                     (Halide::cast<int>(Halide::select(y_small, y, 0.0f)) & 1) == 1;
  // 1^y = 1 for any y; (-1)^+-inf = 1.
  const Expr one = xb == bits(0x3f800000) || (xm == bits(0x3f800000) && ym == bits(0x7f800000));
  // A finite negative x, -0 excluded, to a finite non-integer y.
  const Expr no_real_root =
      xb > bits(0x80000000) && xb < bits(0xff800000) && y_finite && !y_integer;
  const Expr magnitude = dsl::exp(dsl::log(Halide::abs(x)) * y);  // +-0 -> log -inf
  // The sign of x for odd y, as a bit (+-0 and -inf included: pow(-0, 3) = -0).
  const Expr sign = xb & Halide::select(y_odd, bits(0x80000000), bits(0));
  const Expr signed_magnitude =
      Halide::reinterpret(Halide::Float(32), Halide::reinterpret(u32, magnitude) | sign);
  const Expr nan = Halide::reinterpret(Halide::Float(32), bits(0x7fc00000));
  return Halide::select(ym == bits(0) || one, 1.0f, no_real_root, nan, signed_magnitude);
}

Halide::Expr is_finite(const Halide::Expr& x) {
  if (x.type().bits() == 64) {
    const Halide::Expr bits = Halide::reinterpret(Halide::UInt(64), x);
    const Halide::Expr exp = Halide::cast(Halide::UInt(64), 0x7ff) << 52;
    return (bits & exp) != exp;
  }
  const Halide::Expr bits =
      Halide::reinterpret(Halide::UInt(32), Halide::cast(Halide::Float(32), x));
  return (bits & Halide::cast(Halide::UInt(32), 0x7f800000)) !=
         Halide::cast(Halide::UInt(32), 0x7f800000);
}

namespace {

Expr f32_bits(Expr x) {
  if (x.type() != Halide::Float(32)) x = Halide::cast(Halide::Float(32), x);
  return Halide::reinterpret(Halide::UInt(32), x);
}

// |x| > inf on the bits: a NaN of either sign.
Expr is_nan_bits(const Expr& u) {
  return (u & Halide::cast(Halide::UInt(32), 0x7fffffff)) >
         Halide::cast(Halide::UInt(32), 0x7f800000);
}

}  // namespace

Expr is_nan(const Expr& x) {
  if (x.type().bits() == 64) {
    const Expr bits = Halide::reinterpret(Halide::UInt(64), x);
    const Expr magnitude = bits & ((Halide::cast(Halide::UInt(64), 1) << 63) - 1);
    return magnitude > (Halide::cast(Halide::UInt(64), 0x7ff) << 52);
  }
  return is_nan_bits(f32_bits(x));
}

Expr maximum(const Expr& a, const Expr& b) {
  return Halide::select(dsl::is_nan(a), a, Halide::select(dsl::is_nan(b), b, Halide::max(a, b)));
}

namespace {
// fp32 bits u rounded to nearest even at bit 16, the bf16 bits in the low half (a NaN's bits
// are rounded as a number: the callers deal with NaN).
Expr rne_bf16_bits(const Expr& u) {
  const Halide::Type u32 = Halide::UInt(32);
  return (u + Halide::cast(u32, 0x7fff) + ((u >> 16) & Halide::cast(u32, 1))) >> 16;
}
}  // namespace

Expr f32_to_bf16(Expr x) {
  const Halide::Type u32 = Halide::UInt(32);
  Expr u = f32_bits(std::move(x));
  Expr rounded = rne_bf16_bits(u);
  Expr quiet_nan = (u >> 16) | Halide::cast(u32, 0x0040);
  Expr bits = Halide::cast(Halide::UInt(16), Halide::select(is_nan_bits(u), quiet_nan, rounded));
  return Halide::reinterpret(Halide::BFloat(16), bits);
}

Expr f32_to_bf16_computed(Expr x) {
  const Halide::Type u32 = Halide::UInt(32), i32 = Halide::Int(32);
  // Below the NaN bits whose rounding would carry: 0x7fff7fff as int32 (positive floats are the
  // non-negative ints), 0xffff7fff as uint32 (negative floats are the upper half). Each min
  // leaves the other sign's values alone; both clamped values round to 0x7fff / 0xffff, NaNs.
  Expr s = Halide::min(Halide::reinterpret(i32, f32_bits(std::move(x))), Expr(0x7fff7fff));
  Expr u = Halide::min(Halide::reinterpret(u32, s), Expr(static_cast<uint32_t>(0xffff7fffu)));
  return Halide::reinterpret(Halide::BFloat(16), Halide::cast(Halide::UInt(16), rne_bf16_bits(u)));
}

Expr f32_to_f16(Expr x) {
  if (x.type() != Halide::Float(32)) x = Halide::cast(Halide::Float(32), x);
  Expr u = f32_bits(x);
  Expr h = Halide::reinterpret(Halide::UInt(16), Halide::cast(Halide::Float(16), x));
  Expr nan = Halide::cast(Halide::UInt(16), ((u >> 16) & Halide::cast(Halide::UInt(32), 0x8000)) |
                                                Halide::cast(Halide::UInt(32), 0x7e00));
  return Halide::reinterpret(Halide::Float(16), Halide::select(is_nan_bits(u), nan, h));
}

Expr to_storage(const Halide::Type& t, Expr x) {
  if (t == Halide::BFloat(16)) return f32_to_bf16(std::move(x));
  if (t == Halide::Float(16)) return f32_to_f16(std::move(x));
  return Halide::cast(t, std::move(x));
}

Expr from_storage(const Expr& x, const Halide::Type& compute) {
  return x.type() == compute ? x : Halide::cast(compute, x);
}

}  // namespace opforge::dsl
