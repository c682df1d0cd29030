#include "dsl/quant8.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace opforge::dsl {

using Halide::Expr;

namespace {

constexpr int kDecades = 7;  // 10^-6 ... 10^0

// Values per decade i: 2^i (signed; the sign bit takes one) or 2^(i+1) (unsigned).
int per_decade(bool is_signed, int i) {
  return 1 << (is_signed ? i : i + 1);
}

double dynamic_value(bool is_signed, int i, int j) {
  return std::pow(10.0, i - 6) * (0.1 + 0.9 * (j + 0.5) / per_decade(is_signed, i));
}

// The nonnegative dynamic values, ascending (0 and 1.0 excluded), as fp32.
std::vector<float> dynamic_positive(bool is_signed) {
  std::vector<float> v;
  for (int i = 0; i < kDecades; ++i) {
    for (int j = 0; j < per_decade(is_signed, i); ++j) {
      v.push_back(static_cast<float>(dynamic_value(is_signed, i, j)));
    }
  }
  return v;
}

// A constant of float type t (fp32 kernels, the fp64 golden).
Expr lit(const Halide::Type& t, double v) {
  return Halide::Internal::make_const(t, v);
}

Expr midpoint(float a, float b, const Halide::Type& t) {
  return lit(t, (static_cast<double>(a) + b) / 2);
}

// fp32 `value` with its sign bit flipped where the Int(32) `by` is negative: -value exactly
// (a compare and a blend fewer than a select on AVX2), +0 stays +0 where by >= 0.
Expr flip_sign_by(const Expr& value, const Expr& by) {
  const Expr bit =
      Halide::cast<uint32_t>(by) & Halide::Internal::make_const(Halide::UInt(32), 0x80000000u);
  return Halide::reinterpret<float>(Halide::reinterpret<uint32_t>(value) ^ bit);
}

// 10^x for an integer Expr x in [0, 7], exact in fp32 (10^7 < 2^24): a product of the
// powers its bits select, no per-lane table.
Expr pow10_exact(const Expr& x) {
  return Halide::select((x & 1) != 0, 10.f, 1.f) * Halide::select((x & 2) != 0, 100.f, 1.f) *
         Halide::select((x & 4) != 0, 10000.f, 1.f);
}

// The dynamic map's code of y from k1, the 1-based index among the positive values of the
// value nearest |y| = a: 0 below half the smallest value, 1.0 above half-way to it, and the sign.
Expr dynamic_code(bool is_signed, const Expr& y, const Expr& a, const Expr& k1) {
  const std::vector<float> pos = dynamic_positive(is_signed);
  const Halide::Type t = y.type();
  const Expr zero = midpoint(0.f, pos.front(), t), one = midpoint(pos.back(), 1.f, t);
  const int n = static_cast<int>(pos.size());  // 127 (signed) or 254
  // Magnitude index: 0 for 0, 1..n for the values, n + 1 for 1.0.
  const Expr mag = Halide::select(a < zero, 0, Halide::select(a >= one, n + 1, k1));
  if (!is_signed) return Halide::cast<uint8_t>(mag);
  // Sorted: 127 negatives (no -1.0: -absmax goes to the largest negative), 0 at 127, then
  // the positives and 1.0 at 255.
  return Halide::cast<uint8_t>(Halide::select(y < 0, 127 - Halide::min(mag, n), 127 + mag));
}

Expr encode_dynamic(bool is_signed, const Expr& y, bool mask_compares) {
  const Halide::Type t = y.type();
  const std::vector<float> pos = dynamic_positive(is_signed);
  const Expr a = Halide::abs(y);
  // Decade d: how many of the midpoints between one decade's last value and the next one's
  // first lie at or below |y|.
  Expr d = 0;
  int first = 0;
  std::vector<int> firsts;
  for (int i = 0; i < kDecades; ++i) {
    firsts.push_back(first);
    first += per_decade(is_signed, i);
  }
  // With mask registers (AVX-512) a compare counted into a vector is a compare into a mask,
  // vpmovm2d and a subtract, 12 of the 18 on the mask ports; the sign bit of edge - |y| (1
  // when |y| > edge; equal to the edge is a midpoint, where either neighbour is nearest)
  // takes a subtract, a shift and an add on the vector ports: 8-bit Adam (dynamic map) 0.90x
  // the time in cache, 0.96x at 1e7. Without them (AVX2) a compare is already a vector of
  // -1 or 0, and the sign bit cost 1.05x.
  for (int i = 0; i + 1 < kDecades; ++i) {
    const int last = firsts[i + 1] - 1;
    const Expr edge = midpoint(pos[last], pos[last + 1], t);
    if (mask_compares && t == Halide::Float(32)) {
      d += Halide::cast<int>(Halide::reinterpret<uint32_t>(edge - a) >> 31);
    } else {
      d += Halide::select(a >= edge, 1, 0);
    }
  }
  // Inside decade d the midpoints between neighbours are the bin edges of
  // 10^(d-6) * [0.1, 1] cut into `per` equal bins.
  const Expr scale = Halide::cast(t, pow10_exact(6 - d));
  const Expr per = Halide::cast<int>(1) << (is_signed ? d : d + 1);
  // Truncation, not floor: the two differ only below 0, which the clamp takes to 0 either
  // way; a float -> int conversion is one instruction where floor is a round per 8 lanes.
  // Times 1 / 0.9 as Halide's simplifier rewrites x / 0.9 (the reciprocal of the type's
  // 0.9), spelled out: the kernels encode under strict_float, which keeps a division.
  const double nine_tenths = t == Halide::Float(32) ? static_cast<double>(0.9f) : 0.9;
  Expr j =
      Halide::cast<int>((a * scale - lit(t, 0.1)) * Halide::cast(t, per) * lit(t, 1 / nine_tenths));
  j = Halide::clamp(j, 0, per - 1);
  // Index among the positive values: decade d starts at per - 1 (signed) or per - 2.
  const Expr k = per + j - (is_signed ? 1 : 2);
  return dynamic_code(is_signed, y, a, k + 1);
}

// The six decade edges of a dynamic map (fp32): edge i lies between decade i's last value and
// decade i + 1's first.
std::vector<float> decade_edges(bool is_signed) {
  const std::vector<float> pos = dynamic_positive(is_signed);
  std::vector<float> edges;
  for (int i = 0, last = -1; i + 1 < kDecades; ++i) {
    last += per_decade(is_signed, i);
    edges.push_back(static_cast<float>((static_cast<double>(pos[last]) + pos[last + 1]) / 2));
  }
  return edges;
}

// How many decade edges lie at or below x.
int edges_at_or_below(const std::vector<float>& edges, double x) {
  return static_cast<int>(
      std::count_if(edges.begin(), edges.end(), [x](float edge) { return edge <= x; }));
}

// (m, c, s) such that (e m + c) >> s counts the decade edges at or below 2^(e - 127) for every
// biased exponent e from that of the zero code's threshold up to 127 (smaller |y| take code 0
// whatever the count): the smallest s that has one, found by search.
struct BinadeShift {
  int m, c, s;
};

BinadeShift binade_decade_shift(bool is_signed, const std::vector<float>& edges) {
  const int first = std::ilogb(dynamic_positive(is_signed).front() / 2.0) + 127;
  for (int s = 1; s <= 16; ++s) {
    const int m0 = static_cast<int>(std::lround(std::log10(2.0) * (1 << s)));
    for (int m = m0 - 1; m <= m0 + 1; ++m) {
      int64_t lo = INT32_MIN, hi = INT32_MAX;  // c in [lo, hi]
      for (int e = first; e < 128; ++e) {
        const int below = edges_at_or_below(edges, std::ldexp(1.0, e - 127));
        lo = std::max<int64_t>(lo, (int64_t{below} << s) - int64_t{e} * m);
        hi = std::min<int64_t>(hi, (int64_t{below + 1} << s) - int64_t{e} * m - 1);
      }
      if (lo <= hi) return {m, static_cast<int>((lo + hi) / 2), s};
    }
  }
  throw std::logic_error("quant8: no integer binade-to-decade map");
}

// Per binade of the 32 from 2^-31 to 2 (biased exponent 96 + b for index b): how many decade
// edges lie at or below its start, and the one edge inside it (4, above every |y|, if none).
// Each binade holds at most one edge (decades are 10x wide; checked). Below 2^-31 every |y|
// is under the zero code's threshold, so those binades may alias these (a lookup reads its
// index's low 5 bits).
struct BinadeDecades {
  std::vector<Expr> below, next_edge;
};

BinadeDecades binade_decades(const std::vector<float>& edges) {
  BinadeDecades t;
  for (int b = 0; b < 32; ++b) {
    const double lo = std::ldexp(1.0, b + 96 - 127), hi = 2 * lo;
    int inside = 0;
    float next = 4.f;
    for (float x : edges) {
      if (x > lo && x < hi) ++inside, next = x;
    }
    if (inside > 1) throw std::logic_error("quant8: two decade edges in one binade");
    t.below.push_back(edges_at_or_below(edges, lo));
    t.next_edge.push_back(next);
  }
  return t;
}

// The permuted encode's bin, gain * a + offset truncated, needs no clamp at 0 if it is
// comfortably positive at each decade's lower bound (the zero code's threshold for decade 0,
// else the edge below it): about 0.2 of a bin there, 0.14 for the unsigned map's first decade,
// where fp32 rounding errs by about 1e-4 of a bin.
void check_bins_start_above_zero(bool is_signed, const std::vector<float>& edges,
                                 const std::vector<Expr>& gain, const std::vector<Expr>& offset) {
  const std::vector<float> pos = dynamic_positive(is_signed);
  for (int i = 0; i < kDecades; ++i) {
    const double lower = i == 0 ? pos.front() / 2.0 : edges[i - 1];
    const double g = *Halide::Internal::as_const_float(gain[i]);
    const double o = *Halide::Internal::as_const_float(offset[i]);
    if (!(lower * g + o > 0.05)) throw std::logic_error("quant8: a decade's first bin below 0");
  }
}

// encode_dynamic for an fp32 y with permutes (dsl/quant8.h encode8). Each binade [2^k, 2^(k+1))
// holds at most one decade edge (decades are 10x wide), so the count of edges below the binade
// plus one compare against the next edge gives the decade; inside it the bin is one multiply-add
// by the decade's constants. With AVX-512 the count and the edge come from two 32-entry lookups
// by the exponent (a vpermi2d and a vpermi2ps, independent of each other); with AVX2's 8-entry
// permutes the count is an integer multiply-add and shift of the exponent and the edge a lookup
// by the count.
Expr encode_dynamic_permuted(bool is_signed, const Expr& y, Permutes permutes) {
  const std::vector<float> edges = decade_edges(is_signed);
  const Expr a = Halide::abs(y);
  const Expr e = Halide::reinterpret<int>(a) >> 23;  // a >= 0: its biased exponent
  Expr d;
  if (permutes == Permutes::avx512) {
    const BinadeDecades t = binade_decades(edges);
    d = table_lookup(t.below, e) + Halide::select(a >= table_lookup(t.next_edge, e), 1, 0);
  } else {
    // In integers, unclamped: below the zero code's threshold the count is any value, and the
    // 8-entry lookups read its low 3 bits.
    const BinadeShift k = binade_decade_shift(is_signed, edges);
    const Expr below = (e * k.m + k.c) >> k.s;
    std::vector<Expr> next_edge;
    for (float x : edges) next_edge.push_back(x);
    next_edge.push_back(4.f);  // above the last edge: none
    d = below + Halide::select(a >= table_lookup(next_edge, below), 1, 0);
  }
  // Bin j of decade d: (a 10^(6-d) - 0.1) per / 0.9, as gain * a + offset; top = per - 1.
  std::vector<Expr> gain, offset, top;
  for (int i = 0; i < kDecades; ++i) {
    const double per = per_decade(is_signed, i);
    gain.push_back(static_cast<float>(std::pow(10.0, 6 - i) * per / 0.9));
    offset.push_back(static_cast<float>(-0.1 * per / 0.9));
    top.push_back(static_cast<int>(per) - 1);
  }
  // No clamp at 0 (checked): below decade 0 (the zero code's threshold) j is not used.
  check_bins_start_above_zero(is_signed, edges, gain, offset);
  const Expr last = table_lookup(top, d);
  const Expr j =
      Halide::min(Halide::cast<int>(a * table_lookup(gain, d) + table_lookup(offset, d)), last);
  // 1-based index as encode_dynamic's: decade d's values start at per (signed) or per - 1.
  return dynamic_code(is_signed, y, a, j + last + (is_signed ? 1 : 0));
}

Expr encode_linear(bool is_signed, const Expr& y, bool prescaled) {
  const Halide::Type t = y.type();
  if (t == Halide::Float(32)) {
    // The rounded value from the bits of y * 127 (255 unsigned) + 1.5 * 2^23, below 2^22 in
    // magnitude: the sum's low mantissa bits hold it, ties to even as round(); integers from
    // there. Halide 14 emits round() on AVX-512 as two ymm vroundps and the joins: 8-bit Adam
    // with the linear map took 0.91x the time, in cache and at 1e7 (AVX2, one vroundps
    // already: 1.00x). strict: fast math could fold the addition into the conversion.
    const Expr scaled = prescaled ? y : y * (is_signed ? 127.f : 255.f);
    const Expr r = Halide::reinterpret<int>(Halide::strict_float(scaled + 12582912.f)) - 0x4B400000;
    return Halide::cast<uint8_t>(is_signed ? Halide::clamp(r + 127, 0, 254)
                                           : Halide::clamp(r, 0, 255));
  }
  if (is_signed) {
    const Expr c = Halide::round(y * lit(t, 127)) + lit(t, 127);
    return Halide::cast<uint8_t>(Halide::clamp(c, lit(t, 0), lit(t, 254)));
  }
  const Expr c = Halide::round(y * lit(t, 255));
  return Halide::cast<uint8_t>(Halide::clamp(c, lit(t, 0), lit(t, 255)));
}

}  // namespace

std::string StateQuant::name() const {
  return std::string(map == QuantMap::dynamic ? "dynamic" : "linear") +
         (is_signed ? "_signed" : "_unsigned");
}

std::array<float, 256> StateQuant::table() const {
  std::array<float, 256> t{};
  if (map == QuantMap::linear) {
    for (int c = 0; c < 256; ++c) {
      t[c] = is_signed ? (c == 255 ? 1.f : static_cast<float>((c - 127) / 127.0))
                       : static_cast<float>(c / 255.0);
    }
    return t;
  }
  std::vector<float> v = dynamic_positive(is_signed);
  if (is_signed) {
    for (size_t k = 0, n = v.size(); k < n; ++k) v.push_back(-v[k]);
  }
  v.push_back(0.f);
  v.push_back(1.f);
  std::sort(v.begin(), v.end());
  std::copy(v.begin(), v.end(), t.begin());
  return t;
}

namespace {

// The signed linear map's code c as (c - 127), with code 255 (1.0, as 254 is) taken to 254: a
// byte minimum instead of a compare and a select per vector (AVX2: four ops per 8 lanes).
Expr centred_signed(const Expr& code) {
  return Halide::cast<float>(Halide::cast<int>(Halide::min(code, Halide::cast<uint8_t>(254))) -
                             127);
}

// The dynamic map's value of code c, computed rather than looked up where there are no AVX-512
// permutes: Halide's 256-entry table lookup is a gather, which LLVM emits as 16 scalar loads per
// vector on these targets (8-bit Adam at 1e7, AVX-512: 14 ms with the lookups, 9.5 ms computed,
// 2 threads), and AVX2's 8-entry permutes would take 32 per vector. Value k of a decade i with p
// values (p = 2^i signed, 2^(i+1) unsigned; k = p + j) is 10^(i-6) * (0.1 + 0.9 (j + 0.5) / p) =
// (18k - 16p + 9) / (2p * 10^(7-i)): numerator and denominator are exact fp32 integers, so the one
// division gives the table's fp32 value (tests/dsl/test_quant8.cpp checks all codes).
Expr decode_dynamic(bool is_signed, const Expr& code, Permutes permutes) {
  const Expr c = Halide::cast<int>(code);
  Expr k, zero, one;
  if (is_signed) {
    const Expr s = c - 127;
    // 0 .. 128, as Int: Halide's abs is UInt, whose conversion to fp32 AVX2 emulates (six
    // instructions per vector instead of one).
    k = Halide::cast<int>(Halide::abs(s));
    zero = k == 0;
    one = k == 128;
  } else {
    k = c + 1;  // the decade values are codes 1 .. 254: k = 2 .. 255
    zero = c == 0;
    one = c == 255;
  }
  // The largest power of two <= k (its leading bit, from the exponent of k as fp32) is p.
  const Expr kf = Halide::cast<float>(Halide::max(k, 1));
  const Expr bits = Halide::reinterpret<int>(kf) & 0x7f800000;
  const Expr pf = Halide::reinterpret<float>(bits);
  const Expr e = bits >> 23;  // 127 + log2(p)
  Expr den;                   // 2p * 10^(7-i), an exact fp32 integer
  if (permutes != Permutes::none) {
    // By log2(p) in 0..7 from an 8-entry lookup (AVX2; AVX-512 looks the whole map up): the
    // power of ten's three selects and the two products by one vpermps.
    std::vector<Expr> table;
    for (int l = 0; l < 8; ++l) {
      const int tens = std::clamp((is_signed ? 7 : 8) - l, 1, 7);
      table.push_back(static_cast<float>(2.0 * (1 << l) * std::pow(10.0, tens)));
    }
    den = table_lookup(table, e - 127);
  } else {
    const Expr tens = Halide::clamp((is_signed ? 7 + 127 : 8 + 127) - e, 1, 7);  // 7 - i
    den = 2.f * pf * pow10_exact(tens);
  }
  const Expr v = (18.f * kf - 16.f * pf + 9.f) / den;
  const Expr out = Halide::select(zero, 0.f, Halide::select(one, 1.f, v));
  // The sign as a bit flip (AVX2, 8-bit Adam and momentum in cache: 0.98-0.995x the time of
  // a select).
  return is_signed ? flip_sign_by(out, c - 127) : out;
}

// (c - 127) / 127 and c / 255 by one fp32 division, strict: IEEE division rounds once, so
// it gives the table's value for every code (tests/dsl/test_quant8.cpp checks them all),
// where Halide would otherwise compile x / 127.f as x * (1 / 127.f), two roundings that miss
// 126 of the 256 values. The offset is taken in integers. Against the widening to fp64 this
// replaced (two conversions each way and two fp64 multiplies per 16 codes), 8-bit Adam with
// the linear map took 0.86-0.89x the time in cache (2-vCPU AMD EPYC, AVX-512 and AVX2).
Expr decode_linear(bool is_signed, const Expr& code) {
  if (!is_signed) return Halide::strict_float(Halide::cast<float>(code) / 255.f);
  return Halide::strict_float(centred_signed(code) / 127.f);
}

}  // namespace

Expr decode8(const StateQuant& q, const Expr& code, const Halide::Type& compute,
             Permutes permutes) {
  if (permutes == Permutes::avx512 && q.map == QuantMap::dynamic && compute == Halide::Float(32) &&
      code.type() == Halide::UInt(8)) {
    const std::array<float, 256> t = q.table();
    if (!q.is_signed)
      return lookup_float(std::vector<float>(t.begin(), t.end()), Halide::cast<int>(code));
    // The signed map is odd about code 127 (0): code 127 + u is P[|u| - 1] with the sign of u,
    // P the 128 values from the smallest positive one to 1.0 (the negatives stop at -P[126]),
    // so 4 of lookup_float's 32-entry lookups instead of 8 and a sign flip (24 instructions per
    // 16 codes in 8-bit Adam's decode loop instead of 33). u = 0's index, -1, takes P[127]
    // from the lookups; the select makes it 0.
    const Expr u = Halide::cast<int>(code) - 127;
    // |u| - 1 as max(u - 1, -u - 1): Halide's abs of 16 int32 lanes is two ymm vpabsd.
    const Expr mag =
        lookup_float(std::vector<float>(t.begin() + 128, t.end()), Halide::max(u - 1, ~u));
    return Halide::select(u == 0, 0.f, flip_sign_by(mag, u));
  }
  // The golden's codes are fp64 values: clamped to the codes' range first.
  const Expr c =
      code.type() == Halide::UInt(8)
          ? code
          : Halide::cast<uint8_t>(Halide::clamp(code, lit(code.type(), 0), lit(code.type(), 255)));
  const Expr v =
      q.map == QuantMap::dynamic
          ? decode_dynamic(q.is_signed, c, compute == Halide::Float(32) ? permutes : Permutes::none)
          : decode_linear(q.is_signed, c);
  return Halide::cast(compute, v);
}

Expr dequantize8(const StateQuant& q, const Expr& code, const Expr& absmax,
                 const Halide::Type& compute, Permutes permutes) {
  if (q.map != QuantMap::linear || compute != Halide::Float(32) || code.type() != Halide::UInt(8))
    return decode8(q, code, compute, permutes) * absmax;
  const Expr step = Halide::strict_float(absmax / (q.is_signed ? 127.f : 255.f));
  if (!q.is_signed) return Halide::cast<float>(code) * step;
  return centred_signed(code) * step;
}

Expr encode8(const StateQuant& q, const Expr& y, bool mask_compares, bool prescaled,
             Permutes permutes) {
  if (q.map == QuantMap::linear) return encode_linear(q.is_signed, y, prescaled);
  if (permutes != Permutes::none && y.type() == Halide::Float(32))
    return encode_dynamic_permuted(q.is_signed, y, permutes);
  return encode_dynamic(q.is_signed, y, mask_compares);
}

double encode_gain(const StateQuant& q, const Halide::Type& t) {
  if (q.map != QuantMap::linear || t != Halide::Float(32)) return 1;
  return q.is_signed ? 127 : 255;
}

}  // namespace opforge::dsl
