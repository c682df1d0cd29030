// Row-wise ops over the last axis of x[R, C] (Halide sees x(c, r)): layer_norm, rms_norm,
// softmax. One algorithm each, one schedule shared by all three (row_schedule below).
//
// Algorithm: per row, the reductions the op needs (sum, sum of squares, max), each one pass
// over the row, then the output pass. Sums accumulate in a vector of `lanes` partial sums
// (lane u adds elements u, u + lanes, ...), folded once per row, plus a scalar tail for the
// last C % lanes elements: no predicated loads in the hot loop and no reads past the row.
//
// Numerics (fp32 throughout, as torch's CPU kernels):
// - layer_norm is two-pass from the cached row, in the frame shifted by the row's first
//   element: d = x - x[0], mean_d = sum(d) / C, var = sum((d - mean_d)^2) / C (biased), never
//   E[x^2] - E[x]^2, which cancels for rows with |mean| >> std. The shift keeps the rounding
//   error proportional to the row's spread rather than its mean (x - mean computed as
//   d - mean_d does not pay for rounding mean to fp32): rows with mean 3, std 0.01, C = 8192
//   are as accurate as zero-mean rows (unshifted: 2.5x over the tolerance there).
// - softmax subtracts the row max before exp; exp(x - max) is computed once into a per-row
//   scratch row (4 KB at C = 1024, in L1) and scaled by 1/sum, instead of computing exp twice.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/double_buffer.h"
#include "dsl/math.h"
#include "dsl/output_prefetch.h"
#include "dsl/schedule_params.h"
#include "generators/nn_ops.h"

namespace opforge::generators {

using dsl::NnArgs;
using dsl::NnKernel;
using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::RDom;
using Halide::TailStrategy;
using Halide::Var;

// exp(d) for d <= 0 (softmax's x - max), NaN -> NaN: Cody-Waite reduction d = n ln2 + r,
// |r| <= ln2/2, and the degree-5 minimax polynomial of Cephes' expf (S. L. Moshier, Cephes
// Math Library 2.2, expf.c; about 1 ulp), scaled by 2^n on the exponent bits. d < -87
// gives 0 (exp(-87) = 1.6e-38, at the edge of the normal range; -inf -> 0 as torch).
// Why not Halide::exp: it handles the whole range (overflow selects) and softmax took
// 27.0 us with it, 24.3 us with this one, for 64 x 1024 (1 thread, L2-resident; 10.2 us
// without any exp; Halide::fast_exp 22.6 us but about 5 bits short and undefined below -87).
// Attention uses it; softmax now uses softmax_exp, the same code with a shorter polynomial
// and a one-FMA reduction; silu uses exp_bounded, Cephes' polynomial, one-FMA reduction.
namespace {

// exp(d) as 2^n (1 + r + r^2 q(r)), d = n ln2 + r, |r| <= ln2/2, q a polynomial (coefficients
// highest degree first), for d whose n stays in [-127, 127] (d in [-87.3, 88.0]; the caller
// clamps or selects outside). `fma_reduction`: r = d - n ln2 in one FMA, whose error
// |n| * |ln2 - fp32(ln2)| (1.9e-9 per unit of n) adds at most 2.4e-7 relative at |d| = 88
// (0.2 ulp at |d| = 10); else Cody-Waite's two steps, exact to 2^-32 of r.
Expr exp_reduced(const Expr& d, const std::vector<float>& q, bool fma_reduction) {
  const Expr n = Halide::round(d * 1.44269504088896341f);
  // strict: Halide's simplifier would fold the two steps into one product with C1 - C2
  const Expr r = fma_reduction ? d - n * 0.693147180559945f
                               : Halide::strict_float(d - n * 0.693359375f + n * 2.12194440e-4f);
  Expr p = q[0];
  for (size_t i = 1; i < q.size(); ++i) p = p * r + q[i];
  p = p * (r * r) + r + 1.0f;
  const Expr scale = Halide::reinterpret<float>((Halide::cast<int32_t>(n) + 127) << 23);
  return p * scale;
}

// Cephes' q of expf (degree 5).
const std::vector<float> cephes_exp_q = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

// exp(d) for d <= 0 as exp_reduced, plus its underflow: d < -87 gives 0.
Expr exp_nonpositive_with(const Expr& d, const std::vector<float>& q, bool fma_reduction) {
  // d in [-inf, -87) -> 0; NaN of either sign stays NaN through p.
  return Halide::select(below_negative(d, -87.0f), 0.0f, exp_reduced(d, q, fma_reduction));
}

}  // namespace

Expr below_negative(const Expr& x, float bound) {
  // Tested on the bits: a float compare lost NaN (under fast math `NaN < -87` came out true and
  // NaN became 0). As signed integers a negative float's bits grow with its magnitude (-0 is
  // INT32_MIN, -inf 0xff800000); +0, the positive floats and NaN of either sign fall outside
  // (bound, -inf]. AVX2 has no unsigned compare: the unsigned form took two more instructions
  // per compare (see softmax's schedule comment for the measurement).
  int32_t bits;
  std::memcpy(&bits, &bound, sizeof bits);
  const Expr u = Halide::reinterpret<int32_t>(x);
  return u > Expr(bits) && u <= Expr(int32_t(0xff800000u));  // -inf
}

Expr exp_nonpositive(const Expr& d) {
  return exp_nonpositive_with(d, cephes_exp_q, false);
}

Expr exp_bounded(const Expr& d) {
  // Bounds that bfloat16 cannot hold: with -87 and 89 (both bf16 values) Halide 14 narrowed
  // the clamp of a widened bf16 activation to bf16 arithmetic, emulated with a round trip
  // (ten more instructions per vector; silu bf16 on AVX-512 took 1.2x the time).
  return exp_reduced(Halide::clamp(d, -87.01f, 88.9f), cephes_exp_q, true);
}

namespace {

// softmax's exp: exp_nonpositive with q of degree 4 instead of Cephes' 5 (one FMA less per
// element), interpolated at the Chebyshev nodes of [-ln2/2, ln2/2] (q(r) = (e^r - 1 - r) / r^2,
// fitted in long double, rounded to fp32). Evaluated in fp32 with FMA over d in [-87, 0] in
// steps of 1e-4: worst relative error 8.7e-8 (Cephes': 8.2e-8); with exp_reduced's one-FMA
// reduction (three instructions fewer than the strict two-step one) 3.0e-7, at d near -87,
// against softmax's rtol of 1e-5.
Expr softmax_exp(const Expr& d) {
  return exp_nonpositive_with(
      d, {1.3926213142e-3f, 8.3632031456e-3f, 4.1666556150e-2f, 1.6666576266e-1f, 0.5f}, true);
}

// Tunables of the row schedule, declared once (descriptor schedule_params, `--set` previews;
// defaults from the measurements in row_schedule's comment).
const std::vector<dsl::ScheduleParamDecl>& row_param_decls() {
  static const std::vector<dsl::ScheduleParamDecl> d = {
      {"vector", 0, 1, 64,
       "fp32 lanes of the output pass (default: the target's natural width; 32 for the norms' "
       "bf16 stores on AVX2)"},
      {"lanes", 0, 1, 256,
       "partial sums per row, a multiple of vector (default: max(2 * vector, 32))"},
      {"tasks", 8, 1, 1024, "parallel blocks of rows, ceil(R / tasks) rows each"},
      {"serial_below", 1 << 15, 0, 1 << 30,
       "R * C below which one serial loop runs (no thread-pool dispatch)"},
      // Off: see row_schedule's measurements.
      {"double_buffer", 0, 0, 1,
       "stage the input rows per block of db_rows rows in two slots, filled by an async "
       "producer task while the row passes run on the other (dsl/double_buffer.h)"},
      {"db_rows", 8, 1, 4096, "rows per double-buffer slot"},
      {"prefetch_output", 1, 0, 1,
       "softmax: prefetch each output line while its exp is computed, so the output pass "
       "finds the line in cache (dsl/output_prefetch.h); replaces the next-row loads"},
      {"prefetch_rows", 1, 0, 64,
       "the norms and softmax: the output pass prefetches the input lines (x, and residual) "
       "of the row this many rows ahead, one prefetcht0 per line (0: none)"},
  };
  return d;
}

struct RowParams {
  int vector;          // fp32 lanes (16 on AVX-512, 8 on AVX2)
  int lanes;           // partial sums per row: lanes / vector independent vector accumulators
  int tasks;           // parallel blocks of rows, ceil(R / tasks) rows each (sized at run time)
  int serial_below;    // R * C below which one serial loop runs (no thread-pool dispatch)
  bool double_buffer;  // stage x (and residual) per db_rows rows, async
  int db_rows;
  bool prefetch_output;  // softmax: its exp pass prefetches y's lines (build_softmax)
  int prefetch_rows;     // the output pass prefetches row r + prefetch_rows (with_next_rows)
  // `softmax`: with prefetch_output, which only softmax has (the norms refuse it, as a param
  // they do not have, rather than carry a setting that does nothing).
  std::map<std::string, int64_t> as_map(bool softmax = false) const {
    std::map<std::string, int64_t> m = {{"vector", vector},
                                        {"lanes", lanes},
                                        {"tasks", tasks},
                                        {"serial_below", serial_below},
                                        {"double_buffer", double_buffer},
                                        {"db_rows", db_rows},
                                        {"prefetch_rows", prefetch_rows}};
    if (softmax) m["prefetch_output"] = prefetch_output;
    return m;
  }
  std::string summary() const {
    std::string s = "rows in " + std::to_string(tasks) + " parallel blocks" +
                    "; per row: reductions in " + std::to_string(lanes) +
                    " fp32 lanes (scalar tail), then the output in " + std::to_string(vector) +
                    "-wide vectors; serial below R*C = " + std::to_string(serial_below);
    if (double_buffer) s += "; " + dsl::double_buffer_summary("input rows", db_rows, "rows");
    if (prefetch_rows > 0)
      s +=
          "; the output pass prefetches the input rows " + std::to_string(prefetch_rows) + " ahead";
    return s;
  }
};

// `norm`: the norms take four AVX2 vectors a step where they store bf16: the output's pack to
// 16 bits is then one vpackusdw (per 128-bit lane) and a vpermq per 16 values instead of an
// extract and a pack per 8. AVX2, bf16 activations, vector 32 (lanes 64) / 8 (lanes 32), per
// pair (AMD EPYC family 26): in cache (64 x 1024, 1 thread) layer_norm 0.92x the time,
// rms_norm 0.88x; cold (4096 x 1024, 2 threads) layer_norm 0.95-0.97x, rms_norm 0.85-0.93x,
// add_layer_norm 0.92-0.93x, add_rms_norm 0.84-0.92x. Not taken: softmax (1.02-1.04x in
// cache), fp32 (0.98-1.04x), AVX-512 bf16 (0.94-1.02x).
// `rms`: rms_norm or add_rms_norm, which keep prefetch_rows 0 with fp32 activations (at 97-100%
// of the copy without it; add_rms_norm AVX2 1.07-1.30x the time with it: with_next_rows).
RowParams row_params(const NnArgs& a, bool norm = false, bool rms = false) {
  int natural = a.target.natural_vector_size(Halide::Float(32));
  bool bf16_out = false;
  for (const auto& [name, t] : a.output_dtypes) bf16_out = bf16_out || t == registry::DType::bf16;
  if (norm && bf16_out && natural == 8) natural = 32;
  auto given_vector = a.schedule.find("vector");
  const int64_t vector = given_vector != a.schedule.end() ? given_vector->second : natural;
  const auto q = dsl::resolve_params(row_param_decls(), a.schedule, "the row recipe",
                                     {{"vector", natural},
                                      {"lanes", std::max<int64_t>(2 * vector, 32)},
                                      {"prefetch_rows", rms && !bf16_out ? 0 : 1}});
  RowParams p;
  p.vector = static_cast<int>(q.at("vector"));
  p.lanes = static_cast<int>(q.at("lanes"));
  p.tasks = static_cast<int>(q.at("tasks"));
  p.serial_below = static_cast<int>(q.at("serial_below"));
  p.double_buffer = q.at("double_buffer") != 0;
  p.db_rows = static_cast<int>(q.at("db_rows"));
  p.prefetch_output = q.at("prefetch_output") != 0;
  p.prefetch_rows = static_cast<int>(q.at("prefetch_rows"));
  if (p.lanes % p.vector != 0) {
    throw std::invalid_argument("schedule param 'lanes' = " + std::to_string(p.lanes) +
                                " is not a multiple of vector = " + std::to_string(p.vector) +
                                " (the row recipe)");
  }
  return p;
}

// A per-row reduction of f(c, r) over c in [0, C): sum (op '+') or max (op 'm'; Halide's max
// may drop a NaN: softmax catches it in exp and the row sum instead, see build_softmax).
// `acc(u, r)` holds `lanes` partials; `total(r)` folds them and adds the tail.
struct RowReduce {
  Func acc, total;
  Var u, r;
  Halide::RVar k;
};

RowReduce row_reduce(const std::string& name, Func f, const Expr& C, int lanes, char op) {
  RowReduce rr{Func(name + "_lanes"), Func(name), Var("u"), Var("r")};
  const Expr init = op == '+' ? Expr(0.0f) : Expr(-INFINITY);
  RDom k(0, C / lanes, name + "_k");
  rr.k = k.x;
  rr.acc(rr.u, rr.r) = init;
  const Expr v = f(k * lanes + rr.u, rr.r);
  rr.acc(rr.u, rr.r) = op == '+' ? rr.acc(rr.u, rr.r) + v : Halide::max(rr.acc(rr.u, rr.r), v);
  RDom ru(0, lanes, name + "_u");
  RDom tail((C / lanes) * lanes, C % lanes, name + "_t");
  rr.total(rr.r) = init;
  if (op == '+') {
    rr.total(rr.r) += rr.acc(ru, rr.r);
    rr.total(rr.r) += f(tail, rr.r);
  } else {
    rr.total(rr.r) = Halide::max(rr.total(rr.r), rr.acc(ru, rr.r));
    rr.total(rr.r) = Halide::max(rr.total(rr.r), f(tail, rr.r));
  }
  return rr;
}

// Schedule shared by the row-wise ops: rows in parallel blocks; per row, each reduction
// (compute_at the row loop) and then the output. The first pass reads the row (4 KB at
// C = 1024) from DRAM, the other passes find it in L1, so the op moves a copy's traffic
// (read x, write y). Measured at 4096 x 1024 fp32, 2 threads, medians of 80-100 interleaved
// runs, as % of a same-run Halide copy y = x (best of 4 copy schedules), on a shared 2-vCPU
// host under load 4-9 (ratios move +-10% between runs):
//   - partial sums per row (`lanes`): 16 (one vector accumulator) 85 / 78%, 32 (two) 94 / 88%,
//     64 (four) 92 / 88% for layer_norm in two runs: two accumulators hide the add latency.
//     On AVX2, 32 lanes (four 8-wide accumulators) instead of 16 (two): 64 x 1024,
//     L2-resident, 1 thread, three alternating runs: softmax 55 / 53 / 60 us -> 41 / 43 / 57
//     us (the max and sum passes were latency-bound), rms_norm 15 / 12 / 14 -> 11 / 14 / 11
//     us, layer_norm, add_layer_norm, add_rms_norm within noise; softmax 4096 x 1024 cold, 2
//     threads, host at load 6-8: 58 / 63 / 62% -> 66 / 79 / 65% of the copy (layer_norm 78 /
//     89 / 86% -> 75 / 89 / 83%). AVX-512 with 64 lanes: within noise (softmax, layer_norm).
//   - rows per task, fixed: 4: 80 / 78%, 16: 94 / 88%, 64: 92 / 87% (layer_norm, loaded host).
//     On a quieter host (copy at 43-65 GB/s) 8 blocks of ceil(R/8) rows beat 16-row blocks:
//     layer_norm 88 / 86% vs 76 / 76%, rms_norm 105 / 98% vs 88 / 89%, softmax 59 / 54% vs
//     50 / 47%; 2, 4, 8 or 16 blocks all within noise of each other (long contiguous streams
//     per thread, as the best copy: 8 chunks of a flat loop beat 16-row blocks by 12-25%).
//   - prefetching the next row (Func::prefetch at the row loop): layer_norm 51 / 33%,
//     rms_norm 52 / 43%, softmax 45 / 34%, against 94 / 100, 90 / 89, 48 / 55% without:
//     Halide 14 emits prefetchnta every 64 elements (256 B, a quarter of the lines). One
//     line per output vector, one row ahead (NonFaulting): rms_norm within noise, layer_norm
//     and softmax slower. None kept.
//   - double buffering the input row (a staging Func, store_at the task, fold_storage(r, 2),
//     async): 35-38 ms instead of 1.2-7 ms for all three (a semaphore hand-off per 4 KB row);
//     staged without async: layer_norm 57 / 56% against 80 / 73% unstaged. Not kept.
//   - double buffering as the recipe's `double_buffer` param, slots of `db_rows` rows (x, and
//     residual, staged; 2026-12-04, AMD EPYC 2 vCPUs, 4096 x 1024, cold, `opforge bench OP
//     --set double_buffer=1 --set db_rows=K`, the registered schedule in the same run), time
//     on / off: layer_norm 1 thread 2.8-4.5x at 8-32 rows, 1.5x (AVX2) and 2.5x (AVX-512) at
//     128 rows, 2.1-2.3x at 512; softmax 1 thread 1.4x (AVX2) and 2.1x (AVX-512) at 32-128
//     rows, 2.7-3.0x at 8; 2 threads 2.9-4.7x everywhere; rms_norm and the add_ ops alike.
//     Each slot is a task pair and a semaphore wake, 7-17 us: what a slot hides is less. Off.
// Softmax stays below the copy: its exp (0.22 us of the 0.38 us per row, one thread,
// L2-resident) is the long compute pass, and one core alone draws only about half the copy's
// bandwidth, so what of the streaming does not overlap it shows; build_softmax loads the next
// row during that pass (measured there). The same next-row loads in layer_norm's variance
// pass did not pay (1 thread, thread CPU time, same run, model 207: AVX-512 0.99x, AVX2 1.06x
// the time without; with four vector accumulators per row as well: 1.03x, 1.06x).
// Small tensors (R*C < serial_below) run one serial loop: a thread-pool wake costs 3-47 us.
//
// `fused`: further outputs over the same [R, C] (add_*_norm's sum), scheduled like y without
// the serial specialization (Halide allows none on a Func computed with another) and computed
// with y at its vector loop over the row: both take y's branches, parallel or serial, and one
// loop writes both rows.
void row_schedule(Func y, const std::vector<RowReduce>& reductions,
                  const std::vector<Func>& row_scratch, const RowParams& p,
                  const std::vector<Func>& fused = {}, const std::vector<Func>& stage = {}) {
  Var c = y.args()[0], r = y.args()[1];
  // ro: a task's block of rows; rb: a slot's rows (double buffering); ri: one row.
  Var ro("ro"), rs("rs"), rb("rb"), ri("ri");
  const bool staged = p.double_buffer && !stage.empty();
  const Expr R = y.output_buffers()[0].dim(1).extent();
  const Expr C = y.output_buffers()[0].dim(0).extent();
  Func yf = y;
  auto rows = [&](Halide::Stage s, const Var& rv, const Var& cv) {
    const Expr per_task = Halide::max(1, (R + p.tasks - 1) / p.tasks);
    if (staged) {
      s.split(rv, ro, rs, per_task, TailStrategy::GuardWithIf)
          .split(rs, rb, ri, p.db_rows, TailStrategy::GuardWithIf);
    } else {
      s.split(rv, ro, ri, per_task, TailStrategy::GuardWithIf);
    }
    s.vectorize(cv, p.vector, TailStrategy::GuardWithIf);
  };
  Halide::Stage big = y.specialize(R * C >= p.serial_below);
  rows(big, r, c);
  big.parallel(ro);
  rows(y, r, c);
  for (Func f : fused) {
    rows(f, f.args()[1], f.args()[0]);
    f.compute_with(yf, c);
  }
  for (RowReduce rr : reductions) {
    // Lanes innermost (the vector accumulators interleaved), the row's k outside them: the
    // default order ran the k loop once per vector accumulator (strided passes over the row).
    Var uo("uo"), ui("ui");
    rr.acc.compute_at(yf, ri).vectorize(rr.u, p.vector);
    rr.acc.update().split(rr.u, uo, ui, p.vector).reorder(ui, uo, rr.k).vectorize(ui).unroll(uo);
    rr.total.compute_at(yf, ri);
  }
  for (Func s : row_scratch) {
    // One row of storage per task, reused by every row of it (fold_storage(r, 1)): computed
    // per row without store_at, the row was a heap allocation per row (softmax 7.4 ms
    // instead of 2.6 ms; the same staging in a copy kernel: 5.6 ms vs 1.6 ms unstaged).
    // Double-buffered, the row is stored per slot (rb): stored per task, Halide folded over
    // the slot loop and slid the row's window across the slot, recomputing the row max of
    // every earlier row of the slot at each row (softmax 18-30x the time at 32 rows a slot).
    s.store_at(yf, staged ? rb : ro)
        .compute_at(yf, ri)
        .fold_storage(s.args()[1], 1)
        .vectorize(s.args()[0], p.vector, TailStrategy::GuardWithIf);
  }
  // The input rows of the next slot are loaded by a producer task while this slot's rows
  // run their passes (dsl/double_buffer.h).
  for (Func s : stage) dsl::double_buffer(s, yf, ro, rb, s.args()[1], p.db_rows, p.vector);
}

// The inputs double buffering stages (global wrappers: every pass reads the staged rows);
// none when it is off.
std::vector<Func> staged_rows(const RowParams& p, const std::vector<Func>& inputs) {
  std::vector<Func> out;
  if (p.double_buffer) {
    for (Func f : inputs) out.push_back(f.in());
  }
  return out;
}

// A row of the normalized ops' input, src(c, r): x, or x + residual for the fused add_* ops.
using RowSource = std::function<Expr(const Expr& c, const Expr& r)>;

// A row op's output value at (c, r), marked to prefetch the lines of x (and residual) at (c, r +
// p.prefetch_rows), clamped to the last row (dsl/output_prefetch.h with_input_prefetch): the
// output pass of row r is compute and stores from L1, with no load of its own in flight, and
// one core of a 2-vCPU Xeon (family 6 model 207) fetched the next row's first pass from
// memory only after it. 4096 x 1024, cold, 2 threads, that host, time with / without (one row
// ahead; scripts/BENCHMARKS.md, "The norms' next rows prefetched"): bf16 activations
// 0.72-0.85x (every norm, AVX-512, AVX2 and the avx512_bf16 tier), fp32 layer_norm 0.89-0.93x
// (to 92-95% of the copy), add_layer_norm 0.96-0.98x, rms_norm 0.98-0.99x, add_rms_norm
// 0.99-1.00x on AVX-512 and 1.07-1.30x on AVX2: the fp32 rms forms keep 0 (row_params).
// Two rows ahead did as one, four 0.95x of none.
Expr with_next_rows(const Expr& value, const NnArgs& a, const RowParams& p, const Var& c,
                    const Var& r) {
  if (p.prefetch_rows <= 0) return value;
  Expr v = value;
  for (const char* name : {"x", "residual"}) {
    auto it = a.tensors.find(name);
    if (it == a.tensors.end()) continue;
    const ImageParam& im = it->second;
    const Expr row = Halide::min(r + p.prefetch_rows, im.dim(1).extent() - 1);
    const Expr at =
        (c - im.dim(0).min()) * im.dim(0).stride() + (row - im.dim(1).min()) * im.dim(1).stride();
    v = dsl::with_input_prefetch(v, im, at, Halide::Internal::const_true());
  }
  return v;
}

// layer_norm of the rows of src (algorithm only; the caller schedules).
Func layer_norm_rows(const RowSource& src, const Expr& C, ImageParam gamma, ImageParam beta,
                     const Expr& eps, const RowParams& p, std::vector<RowReduce>& reductions,
                     const NnArgs& a) {
  Var c("c"), r("r");
  // Algorithm, in the frame shifted by the row's first element: d = x - x[0] is exact
  // (Sterbenz) wherever x is within a factor 2 of x[0], i.e. for rows whose mean dwarfs their
  // spread, so mean and variance of d lose nothing to the magnitude of the mean.
  Func d("d");
  d(c, r) = src(c, r) - src(0, r);
  RowReduce s = row_reduce("d_sum", d, C, p.lanes, '+');
  Func mean_d("mean_d");  // mean(x) - x[0]
  mean_d(r) = s.total(r) / Halide::cast<float>(C);
  Func dev("dev");
  // strict_float: Halide's simplifier reassociates (x - x0) - mean_d into x - (x0 + mean_d)
  // and undoes the shift (measured: no speed cost at 4096 x 1024).
  dev(c, r) = Halide::strict_float(src(c, r) - src(0, r) - mean_d(r));  // x - mean(x)
  Func dev2("dev2");
  dev2(c, r) = dev(c, r) * dev(c, r);
  RowReduce v = row_reduce("dev2_sum", dev2, C, p.lanes, '+');
  Func rstd("rstd");
  rstd(r) = 1.0f / Halide::sqrt(v.total(r) / Halide::cast<float>(C) + eps);
  Func y = dsl::output_func("y");
  y(c, r) = with_next_rows(a.store("y", dev(c, r) * rstd(r) * gamma(c) + beta(c)), a, p, c, r);
  // Schedule (the caller's row_schedule): mean and rstd are inlined into their per-row
  // consumers.
  reductions = {s, v};
  return y;
}

// rms_norm of the rows of src (algorithm only).
Func rms_norm_rows(const RowSource& src, const Expr& C, ImageParam gamma, const Expr& eps,
                   const RowParams& p, std::vector<RowReduce>& reductions, const NnArgs& a) {
  Var c("c"), r("r");
  Func sq("sq");
  sq(c, r) = src(c, r) * src(c, r);
  RowReduce s = row_reduce("sum_sq", sq, C, p.lanes, '+');
  Func rstd("rstd");
  rstd(r) = 1.0f / Halide::sqrt(s.total(r) / Halide::cast<float>(C) + eps);
  Func y = dsl::output_func("y");
  y(c, r) = with_next_rows(a.store("y", src(c, r) * rstd(r) * gamma(c)), a, p, c, r);
  reductions = {s};
  return y;
}

NnKernel build_layer_norm(const NnArgs& a) {
  Func x = a.f32("x");
  const RowParams p = row_params(a, true);
  std::vector<RowReduce> reductions;
  Func y = layer_norm_rows([x](const Expr& c, const Expr& r) { return x(c, r); },
                           a.tensors.at("x").dim(0).extent(), a.tensors.at("gamma"),
                           a.tensors.at("beta"), a.scalars.at("eps"), p, reductions, a);
  row_schedule(y, reductions, {}, p, {}, staged_rows(p, {x}));
  return NnKernel{{y}, "layer_norm: " + p.summary(), p.as_map()};
}

NnKernel build_rms_norm(const NnArgs& a) {
  Func x = a.f32("x");
  const RowParams p = row_params(a, true, true);
  std::vector<RowReduce> reductions;
  Func y = rms_norm_rows([x](const Expr& c, const Expr& r) { return x(c, r); },
                         a.tensors.at("x").dim(0).extent(), a.tensors.at("gamma"),
                         a.scalars.at("eps"), p, reductions, a);
  row_schedule(y, reductions, {}, p, {}, staged_rows(p, {x}));
  return NnKernel{{y}, "rms_norm: " + p.summary(), p.as_map()};
}

// add_layer_norm / add_rms_norm: sum = x + residual (the new residual stream) and
// y = norm(sum), in one pass over each row. The sum is recomputed from x and residual in every
// pass (one fp32 add, the same value each time: the reductions, y and the stored sum all see
// the rounded fp32 sum), never read back from the `sum` output: the row's x and residual
// (8 KB at C = 1024) stay in L1 between the passes as the plain ops' row does, and a Func
// reading the output would be a separate whole-tensor pass (Halide computes outputs at root).
// Schedule: row_schedule's, with `sum` fused into y's loop over the row (compute_with at c):
// the last pass reads x and residual once and writes both outputs. Measured (`opforge bench`,
// 4096 x 1024, 2 threads, cold caches, medians of 130-230 interleaved calls, Intel Xeon
// family 6 model 207 (Emerald Rapids class), 2 vCPUs, shared host), % of the same-run copy
// of 2RC elements (the same bytes: read x and residual, write sum and y):
//                    AVX-512   AVX2    (layer_norm / rms_norm alone, same session)
//   add_layer_norm    100%     77%     (89% / 85%)
//   add_rms_norm      100%    101%     (102% / 97%)
// oneDNN 2.6 has neither (peers::onednn_missing).
NnKernel build_add_norm(const NnArgs& a, bool layer) {
  Func x = a.f32("x"), res = a.f32("residual");
  const Expr C = a.tensors.at("x").dim(0).extent();
  const RowParams p = row_params(a, true, !layer);
  const RowSource src = [x, res](const Expr& c, const Expr& r) { return x(c, r) + res(c, r); };
  std::vector<RowReduce> reductions;
  Func y =
      layer ? layer_norm_rows(src, C, a.tensors.at("gamma"), a.tensors.at("beta"),
                              a.scalars.at("eps"), p, reductions, a)
            : rms_norm_rows(src, C, a.tensors.at("gamma"), a.scalars.at("eps"), p, reductions, a);
  Var c("c"), r("r");
  Func sum = dsl::output_func("sum");
  sum(c, r) = a.store("sum", src(c, r));
  row_schedule(y, reductions, {}, p, {sum}, staged_rows(p, {x, res}));
  return NnKernel{{sum, y},
                  std::string(layer ? "add_layer_norm" : "add_rms_norm") + ": " + p.summary() +
                      "; sum computed with y (one loop over the row)",
                  p.as_map()};
}

// Schedule: row_schedule's, with the exp pass prefetching y's lines (prefetch_output, the
// default): e(c, r) carries a marker that dsl/output_prefetch.h turns into one prefetch of
// y(c, r) per vector. The output pass then stores into lines already in cache; before, each
// of its stores waited for its line's read-for-ownership from memory in a short loop with
// nothing to overlap it, while the exp pass (the long compute) had no memory traffic of its
// own. oneDNN's softmax gets the same effect by writing exp into y itself. Measured on a
// 2-vCPU AMD EPYC (family 25 model 17, Zen 4), 4096 x 1024, cold, `opforge bench softmax
// --set prefetch_output=1` (the previous schedule registered, same run), 2026-12-06:
//   2 threads: AVX2 0.88-0.93x the time (80-82% -> 90% of the copy), AVX-512 0.84-0.87x
//   (79% -> 91-92%); 1 thread: AVX2 0.73x, AVX-512 0.60x (103% of the copy); bf16 0.92-0.95x;
//   warm 64 x 1024 AVX2 0.90x, AVX-512 1.00x; 32768 x 17 0.93x / 1.00x.
// A C model of the passes first (AVX2, same host): scratch row + next-row loads 78-94% of
// the copy, the same with y prefetched in the exp pass (any hint: t0, nta, prefetchw)
// 92-104%, and with the next-row loads kept as well 77-99%: the prefetches replace them.
// The same prefetch of y (and sum) in the norms' first pass did not pay: layer_norm and
// rms_norm AVX2 0.97-0.98x, AVX-512 1.06-1.07x the time, add_layer_norm 1.11-1.14x (their
// first pass streams x from memory with little compute to hide the extra lines under).
// Before it (prefetch_output=0), e's second element loaded row r + 1 during row r's exp
// pass (a copy into the scratch row that nothing reads: a real load, which Halide 14's
// prefetchnta was not, see row_schedule; stores to L1 cost less than the exposed DRAM time).
// Measured on the 4096 x 1024 example, 1 thread, cold caches, medians of 31-41 interleaved
// calls timed in thread CPU time (the shared 2-vCPU host ran at load 9-12, where wall-clock
// medians were 5-15x a quiet host's), Intel Xeon family 6 model 207, three same-run
// comparisons per ISA, op time / copy time:
//                         AVX-512                 AVX2
//   before                5.09-5.54 ms (65%)      6.38-6.88 ms (48-52%)
//   next-row loads        0.90-0.93x the time     0.88-0.92x
//   + softmax_exp         0.87-0.90x (72-76%)     0.86-0.87x (55-59%)
// L2-resident (64 x 1024, warm), where only the compute counts: 34 -> 31 us (AVX-512),
// 48 -> 44 us (AVX2); oneDNN 2.6 (its AVX-512 kernel) 34 us. Dropped: round-to-nearest by
// adding 1.5 * 2^23 (n from the sum's bits, no vroundps / vcvttps2dq): 1.04x (AVX-512),
// 0.98x (AVX2) the time of softmax_exp's round, within noise.
// Then the exp's reduction in one FMA and its underflow test as signed compares (AVX2 has no
// unsigned one): L2-resident, 1 thread, two interleaved runs per ISA (another session's
// baseline): AVX-512 31 -> 27 us and 40 -> 35 us, AVX2 66 -> 58 us (0.87-0.88x). 4096 x 1024,
// 2 threads, cold, `opforge bench`, three alternating runs on the host at load 8-9 (copy
// ratios move +-15% there): AVX2 57 / 62 / 60% -> 73 / 72 / 70% of the copy; AVX-512 69 / 66
// / 84% -> 80 / 68 / 73%, within that noise. Not measurable on that host, so not kept: loading
// row r + 2 instead of r + 1 (L2-resident the same; cold runs 62-80% either way).
NnKernel build_softmax(const NnArgs& a) {
  Func x = a.f32("x");
  const RowParams p = row_params(a);
  Var c("c"), r("r");
  const Expr C = a.tensors.at("x").dim(0).extent();
  Func xf("xf");
  xf(c, r) = x(c, r);
  RowReduce m = row_reduce("row_max", xf, C, p.lanes, 'm');
  // e: exp(x - max) of row r, one row at a time (row_schedule's scratch). Its values carry
  // the prefetch of y(c, r) (prefetch_output, the schedule comment above). With
  // prefetch_output=0, the previous schedule: a second element copies row r + 1 of x (the
  // last row: itself) beside it, for its loads, which bring the next row in while this row's
  // exp computes. Double-buffered, the staged slot holds the next rows already: the exp alone.
  Func e("e");
  const Expr ex = softmax_exp(x(c, r) - m.total(r));
  const bool prefetch_y = p.prefetch_output && !p.double_buffer;
  const bool next_row_loads = !p.prefetch_output && !p.double_buffer;
  if (next_row_loads) {
    const Expr next_row = Halide::min(r + 1, a.tensors.at("x").dim(1).extent() - 1);
    e(c, r) = {ex, x(c, next_row)};
  } else {
    e(c, r) = prefetch_y ? dsl::with_output_prefetch(ex, "y", {c, r}) : ex;
  }
  Func e_row("e_row");
  e_row(c, r) = next_row_loads ? e(c, r)[0] : Expr(e(c, r));
  RowReduce s = row_reduce("exp_sum", e_row, C, p.lanes, '+');
  // As torch: a NaN anywhere in the row makes the sum NaN (exp keeps NaN); a row holding +inf
  // or only -inf has a non-finite max and is NaN throughout (decided once per row, on bits).
  // NaN-keeping maximum (dsl::maximum) in the max pass instead: softmax 32.0 us vs 24.3 us
  // for 64 x 1024, 1 thread.
  Func inv("inv_sum");
  inv(r) = Halide::select(
      dsl::is_finite(m.total(r)), 1.0f / s.total(r),
      Halide::reinterpret<float>(Halide::Internal::UIntImm::make(Halide::UInt(32), 0x7fc00000u)));
  Func y = dsl::output_func("y");
  // The next row's x prefetched in this pass as in the norms (with_next_rows): 4096 x 1024,
  // cold, 2 threads, Intel Xeon family 6 model 207, time with / without, 60 pairs: fp32
  // 0.91x (AVX-512) and 0.90x (AVX2), bf16 0.89x, 0.97x and 0.90x (avx512_bf16).
  y(c, r) = with_next_rows(a.store("y", e_row(c, r) * inv(r)), a, p, c, r);
  row_schedule(y, {m, s}, {e}, p, {}, staged_rows(p, {x}));
  return NnKernel{{y},
                  "softmax: " + p.summary() +
                      (p.double_buffer ? ""
                       : prefetch_y    ? "; the exp pass prefetches the output's lines"
                                       : "; the exp pass loads row r + 1 ahead"),
                  p.as_map(true)};
}

}  // namespace

const dsl::NnOpDecl& layer_norm() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl d("layer_norm");
    d.input("x", {"R", "C"}, "Rows to normalize (leading dims flattened into R)")
        .input("gamma", {"C"}, "Scale (weight)")
        .input("beta", {"C"}, "Shift (bias)")
        .scalar("eps", "Added to the variance (torch default 1e-5)")
        .domain("eps", "[0, inf)")
        .output("y", {"R", "C"}, "Normalized rows")
        .activations({"x", "y"})
        .algorithm("", "", 0, "two-pass mean and biased variance per row, then the output",
                   build_layer_norm)
        .estimate("R", 4096)
        .estimate("C", 1024)
        .cost("8*R*C", "(bytes_x + bytes_y)*R*C + 4*2*C")
        .example("x=4096,1024 gamma=1024 beta=1024 eps=1e-05")
        .bandwidth_op("bandwidth_copy")
        .summary("Layer normalization over the last axis")
        .formula("y = (x - mean) / sqrt(var + eps) * gamma + beta; mean, biased var over C")
        .reference("torch.nn.functional.layer_norm(x, (C,), gamma, beta, eps)")
        // fp32 sums of C terms in 32 lanes and an fp32 rsqrt: a few ulp on y, plus the row
        // statistics' rounding scaled by |x - mean| / std; atol for y near 0 (where beta
        // cancels the normalized term). Worst seen: 0.11x this bound (C = 8192, mean 10,
        // std 1), 0.03x at mean 3, std 0.01 thanks to the shifted frame.
        .tolerance(1e-5, 1e-5);
    return d;
  }();
  return d;
}

const dsl::NnOpDecl& rms_norm() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl d("rms_norm");
    d.input("x", {"R", "C"}, "Rows to normalize (leading dims flattened into R)")
        .input("gamma", {"C"}, "Scale (weight)")
        .scalar("eps", "Added to the mean square (LLaMA uses 1e-6 / 1e-5)")
        .domain("eps", "[0, inf)")
        .output("y", {"R", "C"}, "Normalized rows")
        .activations({"x", "y"})
        .algorithm("", "", 0, "sum of squares per row, then the output", build_rms_norm)
        .estimate("R", 4096)
        .estimate("C", 1024)
        .cost("4*R*C", "(bytes_x + bytes_y)*R*C + 4*C")
        .example("x=4096,1024 gamma=1024 eps=1e-06")
        .bandwidth_op("bandwidth_copy")
        .summary("RMS normalization over the last axis (LLaMA RMSNorm)")
        .formula("y = x / sqrt(mean(x^2) + eps) * gamma")
        .reference("LlamaRMSNorm: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w")
        // One fp32 sum of C squares and a rescale: worst seen 0.02x this bound.
        .tolerance(1e-5, 1e-6);
    return d;
  }();
  return d;
}

// The fused residual forms: a transformer block's `h = x + residual; y = norm(h)`, with both
// h (the next block's residual) and y out. Formulas, eps and numerics as layer_norm / rms_norm
// on the fp32 sum. Traffic: read x and residual, write sum and y, the bytes of a copy of 2RC
// elements (bandwidth_copy); measured in the schedule comment of build_add_norm.
const dsl::NnOpDecl& add_layer_norm() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl d("add_layer_norm");
    d.input("x", {"R", "C"}, "Rows to add (leading dims flattened into R)")
        .input("residual", {"R", "C"}, "Residual stream, same shape as x")
        .input("gamma", {"C"}, "Scale (weight)")
        .input("beta", {"C"}, "Shift (bias)")
        .scalar("eps", "Added to the variance (torch default 1e-5)")
        .domain("eps", "[0, inf)")
        .output("sum", {"R", "C"}, "x + residual (the new residual stream)")
        .output("y", {"R", "C"}, "layer_norm(x + residual)")
        .activations({"x", "residual", "sum", "y"})
        .algorithm("", "", 0,
                   "the sum row, two-pass mean and biased variance per row, then both outputs",
                   [](const NnArgs& a) { return build_add_norm(a, true); })
        .estimate("R", 4096)
        .estimate("C", 1024)
        .cost("9*R*C", "(bytes_x + bytes_residual + bytes_sum + bytes_y)*R*C + 4*2*C")
        .example("x=4096,1024 residual=4096,1024 gamma=1024 beta=1024 eps=1e-05")
        .bandwidth_op("bandwidth_copy")
        .summary("Residual add fused with layer normalization over the last axis")
        .formula(
            "sum = x + residual; y = (sum - mean) / sqrt(var + eps) * gamma + beta; mean, biased "
            "var of sum over C")
        .reference(
            "h = x + residual; torch.nn.functional.layer_norm(h, (C,), gamma, beta, eps) "
            "(both returned)")
        // layer_norm's, on the fp32 sum (sum itself is exact: one rounded add).
        .tolerance(1e-5, 1e-5);
    return d;
  }();
  return d;
}

const dsl::NnOpDecl& add_rms_norm() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl d("add_rms_norm");
    d.input("x", {"R", "C"}, "Rows to add (leading dims flattened into R)")
        .input("residual", {"R", "C"}, "Residual stream, same shape as x")
        .input("gamma", {"C"}, "Scale (weight)")
        .scalar("eps", "Added to the mean square (LLaMA uses 1e-6 / 1e-5)")
        .domain("eps", "[0, inf)")
        .output("sum", {"R", "C"}, "x + residual (the new residual stream)")
        .output("y", {"R", "C"}, "rms_norm(x + residual)")
        .activations({"x", "residual", "sum", "y"})
        .algorithm("", "", 0, "the sum row, its sum of squares per row, then both outputs",
                   [](const NnArgs& a) { return build_add_norm(a, false); })
        .estimate("R", 4096)
        .estimate("C", 1024)
        .cost("5*R*C", "(bytes_x + bytes_residual + bytes_sum + bytes_y)*R*C + 4*C")
        .example("x=4096,1024 residual=4096,1024 gamma=1024 eps=1e-06")
        .bandwidth_op("bandwidth_copy")
        .summary("Residual add fused with RMS normalization over the last axis (LLaMA)")
        .formula("sum = x + residual; y = sum / sqrt(mean(sum^2) + eps) * gamma")
        .reference(
            "h = x + residual; LlamaRMSNorm(h) = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) "
            "+ eps) * w (both returned; HF's fused add + RMSNorm)")
        .tolerance(1e-5, 1e-6);
    return d;
  }();
  return d;
}

const dsl::NnOpDecl& softmax() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl d("softmax");
    d.input("x", {"R", "C"}, "Rows (leading dims flattened into R)")
        .output("y", {"R", "C"}, "Softmax of each row")
        .activations({"x", "y"})
        .algorithm("", "", 0, "row max, exp(x - max) and its sum, then the scaled row",
                   build_softmax)
        .estimate("R", 4096)
        .estimate("C", 1024)
        .cost("", "(bytes_x + bytes_y)*R*C")
        .example("x=4096,1024")
        .bandwidth_op("bandwidth_copy")
        .summary("Softmax over the last axis, numerically stable (row max subtracted)")
        .formula("y = exp(x - max(x)) / sum(exp(x - max(x)))")
        .reference("torch.softmax(x, dim=-1)")
        // exp within ~1.5 ulp (softmax_exp), the fp32 row sum, one multiply: worst seen 0.02x;
        // atol for the tiny probabilities of a wide row.
        .tolerance(1e-5, 1e-7);
    return d;
  }();
  return d;
}

}  // namespace opforge::generators
