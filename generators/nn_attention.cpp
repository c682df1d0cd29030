// scaled_dot_product_attention: o = softmax(q k^T * scale + causal mask) v, fp32, as
// torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=..., scale=...).
//
// Shapes: q [B, H, L, D], k and v [B, Hkv, S, D], o [B, H, L, D]. Grouped-query attention
// when Hkv < H: query head h reads kv head h / (H / Hkv) (H % Hkv == 0), as torch's
// repeat_interleave of k and v over the heads (LLaMA 2/3, Mistral).
// scale: a run-time scalar; 0 means torch's default 1 / sqrt(D) (scale=None), so the scalar's
// domain is [0, inf). causal (attr): the top-left aligned lower triangle, query l attends to
// keys s <= l, exactly torch's is_causal=True (torch.ones(L, S).tril(diagonal=0)); with S > L
// the last S - L keys are seen by no query, with L > S the rows l >= S see every key.
//
// Algorithm (flash-attention style, never the L x S score matrix): per (b, h) and block of
// `rows` queries, the keys in blocks of `keys`; per key block kb:
//   s  = (q_blk * scale) . k_blk^T            rows x keys, masked entries -inf
//   bm = max_j s    (per query; -inf when the whole block is masked for it)
//   p  = exp(s - bm),  ps = sum_j p,  pv = p . v_blk                (rows x D)
// and the running state (acc, m, l) per query takes the block in (online softmax):
//   m' = max(m, bm);  a = exp(m - m'), c = exp(bm - m');  acc' = a acc + c pv;  l' = a l + c ps
// o = acc / l after the last block. Why bm (the block's own max) rather than the running max
// inside exp: p then depends on the block alone, so s, p, ps and pv are Halide Funcs of the
// key block without a cycle through the state (Halide has no recursion between Funcs); the
// state update is the only place the running max appears. It runs over one Func with four
// slots before acc (a, c, m, l, see the state below), so the two exps of the rescale are
// evaluated once per query and block, not per element of acc. The scores are kept in log2
// units (log2(e) folded into the query scale) and every exp is exp2_nonpositive.
// k and v are packed per (b, h) into the register tiles' panels (kt, vt below; padded, the
// last key and head dim repeated; with grouped-query heads each query head packs its kv
// head): an extra pass over k and v, small against the L x S work when L spans several query
// tasks, but it costs a decode-shaped call (L of a few rows): those take the decode algorithms
// (build_decode, build_decode_queries: k and v read once, in place, one task per head).
// -inf guards: a block masked for a query gives bm = -inf; exp(s - bm) then uses 0 for bm
// (every p is exp(-inf) = 0), c is 0, and m' stays finite or -inf (a is then exp(-inf) = 0
// on an all-zero acc). A query whose every key is masked gives 0 / 0 = NaN, as torch.
#include <cmath>
#include <string>

#include "dsl/math.h"
#include "generators/nn_ops.h"

namespace opforge::generators {

using namespace Halide;

namespace {

// 2^x for x <= 0, the online softmax's exp on log2-scaled scores (log2(e) folded into the
// query scale, so exp(z) = 2^(z log2 e) needs no range-reduction product of its own):
// n = round(x) by the 1.5 * 2^23 shifter (t = x + M holds n in its low mantissa bits, and its
// bits + 127 shifted by 23 are 2^n's), r = x - n in [-1/2, 1/2] exactly, and 2^r = e^(r ln 2)
// by the Cephes expf polynomial of exp_nonpositive (nn_norms.cpp; |r ln 2| <= ln2 / 2, its
// domain), about 1 ulp. x below -125 (-inf: masked keys) gives 0, NaN stays NaN (the guard
// on the bits, as exp_nonpositive's). Against exp_nonpositive it saves the round (5 uops on
// AVX-512: LLVM splits it into two ymm vroundps), the conversion and the two-product
// reduction: see the schedule comment for what that measured.
Expr exp2_nonpositive(const Expr& x) {
  const float shifter = 12582912.0f;  // 1.5 * 2^23
  // strict: under fast math LLVM would fold (x + M) - M back to x, and reassociate the ln 2
  // product into every Horner step (a multiply each: measured in the assembly)
  const Expr t = strict_float(x + shifter);
  const Expr r = strict_float((x - (t - shifter)) * 0.693147180559945f);
  Expr p = 1.9875691500e-4f;
  for (float c :
       {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f}) {
    p = p * r + c;
  }
  p = p * (r * r) + r + 1.0f;
  const Expr two_n = reinterpret<float>((reinterpret<int32_t>(t) + 127) << 23);
  // x in [-inf, -125) -> 0 (2^n stays normal)
  return select(below_negative(x, -125.0f), 0.0f, p * two_n);
}

// A running or block max as the exps subtract it: 0 when it is -inf (every key masked so far:
// each p is then exp(-inf) = 0) or +inf / NaN (which the scores carry through anyway).
Expr finite_or_zero(const Expr& m) {
  return select(dsl::is_finite(m), m, 0.0f);
}

// Tunables (descriptor schedule_params; the schedule comment says how they were chosen).
struct AttnTiles {
  int vec;   // fp32 lanes: 16 on AVX-512, 8 on AVX2
  int iv;    // query vectors per task: rows = iv * vec queries, vectorized along the queries
  int jr;    // keys per register block of q . k^T (iv x jr accumulators)
  int dr;    // head dims per register block of p . v (iv x dr accumulators)
  int keys;  // keys per block (a multiple of jr)
  int rows() const { return iv * vec; }
};

AttnTiles tiles_for(const Target& t) {
  AttnTiles a;
  a.vec = t.natural_vector_size<float>();
  if (a.vec >= 16) {
    a.iv = 2;  // 2 x 8 = 16 accumulators + 2 loads + 1 broadcast of AVX-512's 32 registers
    a.jr = 8;
    a.dr = 8;
  } else {
    a.iv = 3;  // 3 x 4 = 12 accumulators + 3 loads + 1 broadcast of AVX2's 16
    a.jr = 4;
    a.dr = 4;
  }
  a.keys = 128;
  return a;
}

// What both algorithms read, in Halide order: q(d, l, h, b), k and v (d, s, hkv, b), and with
// `masked` (the scaled_dot_product_attention_masked form) mask(s, l), float or bool.
struct AttnInputs {
  ImageParam q, k, v, mask;
  bool causal, masked;
  Expr D, L, H, S, Hkv;
  Expr scale;  // the given scale (0: 1 / sqrt(D)) times log2(e): scores in log2 units

  AttnInputs(const dsl::NnArgs& args, bool masked_op)
      : q(args.tensors.at("q")),
        k(args.tensors.at("k")),
        v(args.tensors.at("v")),
        mask(masked_op ? args.tensors.at("mask") : ImageParam()),
        causal(!masked_op && args.attr_bool("causal")),
        masked(masked_op),
        D(q.dim(0).extent()),
        L(q.dim(1).extent()),
        H(q.dim(2).extent()),
        S(k.dim(1).extent()),
        Hkv(k.dim(2).extent()) {
    const Expr given = args.scalars.at("scale");
    scale = select(given > 0.0f, given, 1.0f / sqrt(cast<float>(D))) * kLog2e;
  }
  // Grouped-query: the kv head of query head h.
  Expr kv_head(const Expr& h) const { return h / (H / Hkv); }
  // The score of query `row` and key `j` (log2 units) as softmax sees it: -inf for keys past S,
  // above the diagonal (causal) or false in a bool mask (a byte, mask_dtype=bool); a float mask
  // added. The mask is read clamped (rows and keys past the tensors are masked or never stored).
  Expr seen(const Expr& score, const Expr& j, const Expr& row) const {
    Expr valid = j < S;
    if (causal) valid = valid && j <= row;
    Expr sc = score;
    if (masked) {
      const Expr mv = mask(clamp(j, 0, S - 1), clamp(row, 0, L - 1));
      if (mask.type() == Float(32)) {
        sc += mv * kLog2e;
      } else {
        valid = valid && mv != 0;
      }
    }
    return select(valid, sc, -INFINITY);
  }
  static constexpr float kLog2e = 1.44269504088896341f;
};

// The flash algorithm (the file comment); masked: the scaled_dot_product_attention_masked form.
dsl::NnKernel build_flash(const dsl::NnArgs& args, bool masked) {
  const AttnInputs in(args, masked);
  const ImageParam &q = in.q, &k = in.k, &v = in.v;
  const bool causal = in.causal;
  const AttnTiles t = tiles_for(args.target);
  const int Lb = t.rows(), Sb = t.keys;
  const Expr D = in.D, L = in.L, S = in.S, scale = in.scale;

  // ---- Algorithm ----
  // A task's queries are i = qb * rows + ii; ii is every Func's innermost (vector) dim.
  Var ii("ii"), d("d"), qb("qb"), h("h"), b("b"), jj("jj"), kb("kb"), i("i"), ji("ji"), jo("jo"),
      di("di"), dd("dd");
  const Expr hk = in.kv_head(h);
  const Expr row = qb * Lb + ii;
  // Rows and keys past the tensors read the last one (clamped): their scores are masked (keys)
  // or never stored (rows).
  Func qt("qt");  // the task's scaled queries, transposed: queries innermost
  qt(ii, d, qb, h, b) = q(d, clamp(row, 0, L - 1), h, b) * scale;
  // k packed per (b, kv head) into the q . k^T register tile's panels: kt[kb][jo][d][jr keys],
  // padded to whole blocks (the last key repeated, its scores masked below). A tile streams
  // one contiguous panel (2 KB at jr = 8, D = 64, every cache line fully used), its keys are
  // consecutive floats (constant offsets, no per-key clamp).
  Func kt("kt");
  kt(ji, d, jo, kb, h, b) = k(d, min(kb * Sb + jo * t.jr + ji, S - 1), h, b);
  RDom rd(0, D, "rd");
  Func sacc("sacc");  // q . k^T of key block kb
  sacc(ii, jj, kb, qb, h, b) = 0.0f;
  sacc(ii, jj, kb, qb, h, b) += qt(ii, rd, qb, h, b) * kt(jj % t.jr, rd, jj / t.jr, kb, hk, b);
  // The mask is read along the queries (a gather, stride S): its [rows x keys] block is read
  // once per task and key block, against D multiply-adds per score.
  Func s("s");
  s(ii, jj, kb, qb, h, b) = in.seen(sacc(ii, jj, kb, qb, h, b), kb * Sb + jj, row);
  RDom rj(0, Sb, "rj");
  Func bm("bm");  // the block's max per query
  bm(ii, kb, qb, h, b) = -INFINITY;
  bm(ii, kb, qb, h, b) = max(bm(ii, kb, qb, h, b), s(ii, rj, kb, qb, h, b));
  const Expr bmv = bm(ii, kb, qb, h, b);
  Func p("p");
  p(ii, jj, kb, qb, h, b) = exp2_nonpositive(s(ii, jj, kb, qb, h, b) - finite_or_zero(bmv));
  Func ps("ps");
  ps(ii, kb, qb, h, b) = 0.0f;
  ps(ii, kb, qb, h, b) += p(ii, rj, kb, qb, h, b);
  // v packed the same way for p . v: vt[kb][dd][key][dr dims], D rounded up to Dp, a multiple
  // of the tile (the last head dim and key repeated): no clamps in the tile, so its addresses
  // are one pointer and constant offsets (v's clamped rows cost ~20 scalar uops per 16 FMAs).
  const Expr Dp = (D + t.dr - 1) / t.dr * t.dr;
  Func vt("vt");
  vt(di, jj, dd, kb, h, b) = v(clamp(dd * t.dr + di, 0, D - 1), min(kb * Sb + jj, S - 1), h, b);
  Func pvacc("pvacc"), pv("pv");  // p . v over the block
  pvacc(ii, d, kb, qb, h, b) = 0.0f;
  pvacc(ii, d, kb, qb, h, b) += p(ii, rj, kb, qb, h, b) * vt(d % t.dr, rj, d / t.dr, kb, hk, b);
  pv(ii, d, kb, qb, h, b) = pvacc(ii, d, kb, qb, h, b);

  // The state over the key blocks, one Func along x: x in [0, D) holds acc, and four slots
  // before it hold, per query, the running max m and sum l and the block's rescale factors a
  // and c. Per key block the slots update first (x ascending: a and c from the old m, then m,
  // then l), so the D acc elements read a and c instead of each recomputing two exps from m
  // (LLVM turns the slot selects into branches; the acc path is a load, a multiply-add and a
  // store per element and block).
  // causal: blocks wholly above the task's last query skipped.
  const int kA = -4, kC = -3, kM = -2, kL = -1;  // slots of a, c, m, l
  RDom rs(kA, D - kA, 0, (S + Sb - 1) / Sb, "rs");
  const RVar rx = rs.x, rk = rs.y;
  if (causal) rs.where(rk * Sb <= qb * Lb + Lb - 1);
  Func st("st");
  st(ii, i, qb, h, b) = select(i == kM, -INFINITY, 0.0f);
  {
    const auto at = [&](const Expr& x) { return st(ii, x, qb, h, b); };
    const Expr bk = bm(ii, rk, qb, h, b);
    const Expr mn = max(at(kM), bk);
    const Expr mns = finite_or_zero(mn);
    const Expr a = exp2_nonpositive(at(kM) - mns);
    const Expr c = select(dsl::is_finite(bk), exp2_nonpositive(bk - mns), 0.0f);
    const Expr l = at(kL) * at(kA) + ps(ii, rk, qb, h, b) * at(kC);
    const Expr acc = at(rx) * at(kA) + pv(ii, max(rx, 0), rk, qb, h, b) * at(kC);
    st(ii, rx, qb, h, b) = select(
        likely(rx >= 0), acc, select(rx == kA, a, select(rx == kC, c, select(rx == kM, mn, l))));
  }
  Func o = dsl::output_func("o");
  o(d, i, h, b) = st(i % Lb, d, i / Lb, h, b) / st(i % Lb, kL, i / Lb, h, b);

  // ---- Schedule ----
  // Per (b, h) (parallel): k's and v's panels (kt, vt, parallel over the key blocks; 512 KB
  // per head at S = 2048, D = 64, so they stay in L2 for the query blocks), then one parallel
  // task per block of `rows` queries (nested parallel loops: 16 heads x 64 query blocks here).
  // In a task, per key block: the score tile sacc (rows x jr accumulators in registers over
  // the whole D: per d, iv vector loads of the transposed queries, jr broadcasts from the kt
  // panel, iv*jr FMAs), the block max, p (rows x keys = 16 KB at AVX-512's 32 x 128, in L1),
  // its sum, and p . v (rows x dr accumulators over the block's keys: iv loads of p, dr
  // broadcasts from the vt panel), then the state update (vectorized along the queries). o
  // transposes the state back to d-innermost once per task.
  //
  // Measured on the 2-vCPU host "Intel(R) Xeon(R) Processor" (family 6 model 207, Emerald
  // Rapids class), shared with other helpers' builds and benchmarks (load average 9-10), B = 1,
  // H = Hkv = 16, L = S = 2048, D = 64. Same-run `opforge bench scaled_dot_product_attention
  // [--attr causal=true] [--isa avx2]` (2 threads, cold caches, medians of 5 interleaved reps)
  // against the oneDNN 2.6 unfused peer (matmul with output scale [+ mask post-op], softmax,
  // matmul; the 268 MB score matrix in memory; ONEDNN_MAX_CPU_ISA=AVX2 for the AVX2 rows), and
  // the previous schedule (main, ba99b65) in the same minutes; scripts/BENCHMARKS.md has the
  // runs:
  //   ISA      full: speedup vs oneDNN (main's)     causal: speedup vs oneDNN (main's)
  //   avx512   1.34x, 1.60x (0.90x, 0.99x)          3.66x, 2.95x (2.48x, 2.45x)
  //   avx2     1.27x (0.91x)                        2.57x (1.65x)
  // CPU time per call, 1 thread, two runs (AVX-512 full / causal, AVX2 full / causal):
  // 224 / 134, 315 / 199 and 183 / 109, 311 / 197 ms; main 316 / 164, 480 / 259 and 301 /
  // 156, 447 / 273 ms. causal costs 0.60-0.63x the full op (main 0.52-0.61x): the skipped
  // key blocks, less the per-head packing and the diagonal blocks computed whole.
  // The load made wall times swing by 1.5x between runs, so the steps were chosen on CPU time
  // per call with 1 thread (process CPU clock, medians of 5; AVX-512, full):
  //   main (k read in place with per-key clamps, the state rescaled per element)  305 ms
  //   + state slots (two exps per query and block), kt by block, exp2    245-256 ms
  //   + v packed by block (no clamped rows in p . v)                        230-250 ms
  //   + kt, vt as register-tile panels (one compute_root pack per call)    196-210 ms
  //   + the panels per (b, h) (L2-resident) instead of per call            157-192 ms
  // (the last step's interleaved 2-thread runs: 1.31x, 1.54x vs 1.22x, 1.38x oneDNN).
  // Where the time goes now (perf, 1 thread): the q . k^T loop 41%, the p . v loop 37%, the
  // exp of p ~11%, the rest (s, max, sum, state, packing) ~11%; with the exp replaced by a
  // multiply-add the call took 220-229 ms against 245-256 (step 2), so exp is ~10%.
  // Tried, not kept (same CPU-time runs): 3 x 8 register tiles (rows = 48, step 4) 194-221
  // ms against 2 x 8's 178-214; keys = 256 (step 2) 210-252 ms against 128's 245-256 (within
  // noise, and 256 doubles p's L1 footprint).
  // Decode-shaped calls pay for the packing (a pass over k and v per head) and L = 1 fills 1
  // of 32 lanes: L <= 16 takes the decode algorithm. CPU time per call, 1 thread, S = 2048
  // (process CPU clock, medians of 20, interleaved), decode / flash: AVX-512 L = 1 2.46 / 11.6
  // ms, L = 16 5.5 / 11.0, L = 32 11.8 / 10.8; AVX2 2.43 / 12.9, 6.4 / 12.3, 14.1 / 16.2.
  // Older measurements of this kernel's structure (JIT prototype, per CPU-second):
  //   - keys per block 64 / 128 / 256: 63 / 77 / 58 GFLOP per CPU-second (AVX-512, full,
  //     H = 4): 128 amortizes the per-block state update over more keys while p stays in L1.
  //   - register blocks (AVX-512): 2x8 (both products) 77; q.k 3x6 60; 4x4 / 4x4 69; p.v
  //     2x16 63. AVX2: 3x4 45, 2x4 40, 2x6 40.
  // No double_buffer param (dsl/double_buffer.h): K and V are packed once per (b, h) in a
  // parallel pass before the query tasks, and each key block then reads its panels from L2,
  // so there is no per-block load from memory to overlap; a per-block staged copy would add
  // a task pair and a semaphore wake per block, which cost 7-30 us per slot wherever it was
  // measured (scripts/BENCHMARKS.md, "Double buffering"), as much as a 128-key block's whole
  // work (32 queries x 128 keys x D 64 x 2 products: 1 MFLOP, ~13 us at 77 GFLOP/s).
  Var io("io"), iin("iin"), hb("hb"), iio("iio"), iii("iii");
  o.split(i, io, iin, Lb, TailStrategy::GuardWithIf)
      .reorder(d, iin, io, h, b)
      .fuse(h, b, hb)
      .parallel(hb)
      .parallel(io)
      .vectorize(d, t.vec, TailStrategy::GuardWithIf);
  // Tasks start at multiples of rows, so i % rows and i / rows are the task's own indices.
  o.output_buffer().dim(1).set_min(0);
  st.compute_at(o, io).bound(ii, 0, Lb).vectorize(ii, t.vec);
  st.update().reorder(ii, rx, rk).split(ii, iio, iii, t.vec).vectorize(iii).unroll(iio);
  qt.compute_at(o, io).bound(ii, 0, Lb).vectorize(ii, t.vec);
  const LoopLevel per_block(st, rk);
  // Whole blocks: bounds inference would trim the last block to its S % keys valid keys (the
  // scores' select), which the vectorized loop would then shift below key 0.
  kt.compute_at(o, hb).bound(ji, 0, t.jr).bound(jo, 0, Sb / t.jr).parallel(kb).vectorize(ji);
  vt.compute_at(o, hb)
      .bound(di, 0, t.dr)
      .bound(jj, 0, Sb)
      .bound(dd, 0, Dp / t.dr)
      .parallel(kb)
      .vectorize(di);
  s.compute_at(per_block)
      .bound(ii, 0, Lb)
      .split(jj, jo, ji, t.jr, TailStrategy::RoundUp)
      .split(ii, iio, iii, t.vec)
      .reorder(iii, iio, ji, jo)
      .vectorize(iii)
      .unroll(iio)
      .unroll(ji);
  // A register tile: Lb queries (vectors of t.vec, unrolled) by the tile's `reg` dim
  // (unrolled), its update summing over `r` outside them.
  auto register_tile = [&](Func acc, const LoopLevel& at, const Var& reg, const RDom& r) {
    acc.compute_at(at)
        .bound(ii, 0, Lb)
        .split(ii, iio, iii, t.vec)
        .vectorize(iii)
        .unroll(iio)
        .unroll(reg);
    acc.update()
        .split(ii, iio, iii, t.vec)
        .reorder(iii, iio, reg, r)
        .vectorize(iii)
        .unroll(iio)
        .unroll(reg);
  };
  // A per-query reduction over the key block (bm: max, ps: sum), vectorized along the queries.
  auto per_query = [&](Func f) {
    f.compute_at(per_block).bound(ii, 0, Lb).vectorize(ii, t.vec);
    f.update().split(ii, iio, iii, t.vec).reorder(iii, iio, rj).vectorize(iii).unroll(iio);
  };
  register_tile(sacc, LoopLevel(s, jo), jj, rd);
  per_query(bm);
  p.compute_at(per_block)
      .bound(ii, 0, Lb)
      .split(ii, iio, iii, t.vec)
      .reorder(iii, iio, jj)
      .vectorize(iii)
      .unroll(iio);
  per_query(ps);
  pv.compute_at(per_block)
      .bound(ii, 0, Lb)
      .split(d, dd, di, t.dr, TailStrategy::RoundUp)
      .split(ii, iio, iii, t.vec)
      .reorder(iii, iio, di, dd)
      .vectorize(iii)
      .unroll(iio)
      .unroll(di);
  register_tile(pvacc, LoopLevel(pv, dd), d, rj);

  dsl::NnKernel kernel;
  kernel.outputs = {o};
  kernel.schedule_summary =
      std::string(causal ? "causal, " : "") + (masked ? "additive mask, " : "") +
      "k and v packed per (b, h); one parallel task per " + std::to_string(Lb) +
      " queries; per block of " + std::to_string(Sb) + " keys: " + std::to_string(Lb) + "x" +
      std::to_string(t.jr) + " register tiles of q.k^T, " + std::to_string(Lb) + "x" +
      std::to_string(t.dr) + " of p.v, online softmax state vectorized along the queries";
  kernel.schedule_params = {{"vec", t.vec}, {"rows", Lb}, {"keys", Sb}, {"jr", t.jr}, {"dr", t.dr}};
  return kernel;
}

// Where decode applies: it beats flash (which packs k and v per head) up to about L = 32 (the
// decode paragraph of flash's schedule comment).
const char* const kDecodeWhen = "L <= 16";

// The decode algorithm, for a few queries against many keys (the memory-bound case: each
// (b, h) reads its kv head's k and v once, in place, no packing). Per (b, h), for its L queries:
//   dot(j, l) = (q_l * scale) . k_j       whole vectors of head dims (vec lanes of partial sums,
//                                         the rest of D added to lanes) then one horizontal sum
//   s = seen(dot) (mask, causal), keys padded to whole vectors (masked)
//   m = max_j s,  p = exp2(s - m),  ps = sum_j p,  o = (sum_j p_j v_j) / ps
// exactly the flash algorithm's semantics in one pass over the keys (no online rescale). With
// causal no query sees a key past L - 1, so only the first min(S, L) keys are read.
dsl::NnKernel build_decode(const dsl::NnArgs& args, bool masked) {
  const AttnInputs in(args, masked);
  const int vec = args.target.natural_vector_size<float>();
  // ---- Algorithm ----
  Var lane("lane"), j("j"), l("l"), h("h"), b("b"), d("d"), jo("jo"), ji("ji"), hb("hb"), dd("dd"),
      di("di");
  const Expr hk = in.kv_head(h);
  const Expr S = in.causal ? min(in.S, in.L) : in.S;  // the keys any query sees
  const Expr Sv = (S + vec - 1) / vec;                // whole vectors of keys, the last padded
  const Expr Dv = in.D / vec;                         // whole vectors of head dims
  Func qs("qs");
  qs(d, l, h, b) = in.q(d, l, h, b) * in.scale;
  const Expr key = min(j, S - 1);  // padded keys read the last one (masked)
  RDom rd(0, Dv, "rd"), rt(0, in.D - Dv * vec, "rt");
  Func part("part");  // q . k per lane of head dims
  part(lane, j, l, h, b) = 0.0f;
  part(lane, j, l, h, b) += qs(rd * vec + lane, l, h, b) * in.k(rd * vec + lane, key, hk, b);
  part(rt, j, l, h, b) += qs(Dv * vec + rt, l, h, b) * in.k(Dv * vec + rt, key, hk, b);
  RDom rv(0, vec, "rv");
  // The horizontal sum (or max) of a Func's vector of lanes: f(at) = sum_lane lanes(lane, at).
  auto across_lanes = [&](const std::string& name, Func lanes, const std::vector<Var>& at,
                          bool is_max) {
    Func f(name);
    std::vector<Expr> args = {rv};
    args.insert(args.end(), at.begin(), at.end());
    f(at) = is_max ? Expr(-INFINITY) : Expr(0.0f);
    f(at) = is_max ? max(f(at), lanes(args)) : f(at) + lanes(args);
    return f;
  };
  Func dot = across_lanes("dot", part, {j, l, h, b}, false);
  Func s("s");
  s(j, l, h, b) = in.seen(dot(j, l, h, b), j, l);
  // Per query, over the keys: vec lanes of keys first (vector max and sum), then across them.
  RDom rj(0, Sv, "rj");
  Func mv("mv"), psv("psv");
  mv(lane, l, h, b) = -INFINITY;
  mv(lane, l, h, b) = max(mv(lane, l, h, b), s(rj * vec + lane, l, h, b));
  Func m = across_lanes("m", mv, {l, h, b}, true);
  Func p("p");
  p(j, l, h, b) = exp2_nonpositive(s(j, l, h, b) - finite_or_zero(m(l, h, b)));
  psv(lane, l, h, b) = 0.0f;
  psv(lane, l, h, b) += p(rj * vec + lane, l, h, b);
  Func ps = across_lanes("ps", psv, {l, h, b}, false);
  RDom rs(0, S, "rs");
  Func acc("acc");  // p . v
  acc(d, l, h, b) = 0.0f;
  acc(d, l, h, b) += p(rs, l, h, b) * in.v(d, rs, hk, b);
  Func o = dsl::output_func("o");
  o(d, l, h, b) = acc(d, l, h, b) / ps(l, h, b);

  // ---- Schedule ----
  // One parallel task per (b, h) (16 heads: 8 per core on 2). In a task: s along the keys in
  // vectors, each vector's dots computed for every query first (the k rows stay in L1 across
  // the queries), a dot as D / vec FMAs along d and one horizontal sum; the max and the sum of
  // p as vectors along the keys; p . v with the key outermost (a v row read once, broadcast p
  // per query, FMAs along d into acc in L1). s and p hold S x L floats each (L2 at decode
  // shapes). Measured at L = 1, S = 2048, 16 heads, D = 64 (16.8 MB of k and v: memory-bound;
  // perf, 1 thread: ~40% in the dot loop, ~35% in p . v, on their loads), same-run bench
  // (scripts/BENCHMARKS.md), 2 threads: at load 2.5 0.94-0.96x oneDNN AVX-512 (once 2.0x),
  // 0.80-0.88x AVX2, both near 7-8 GB/s; at load 5 1.17x, 1.38x; 4-6x flash. (Before the d
  // loops were unrolled: 0.8-3.5x by the load.) Its cost grows with L (~20 cycles per query and
  // key: the horizontal sum, acc through L1): L = 8 1.95x / 1.11x oneDNN, L = 16 0.92x / 1.18x
  // (AVX-512 / AVX2, 2 threads). Tried, not kept: software prefetch of k (4 vectors of keys ahead)
  // and v (32 keys ahead), 2.66 ms against 2.46 (CPU time, L = 1); dot stored per task instead of
  // per vector of keys (one allocation), within noise.
  o.reorder(d, l, h, b).fuse(h, b, hb).parallel(hb).vectorize(d, vec, TailStrategy::GuardWithIf);
  const LoopLevel task(o, hb);
  qs.compute_at(task).vectorize(d, vec, TailStrategy::GuardWithIf);
  s.compute_at(task).split(j, jo, ji, vec, TailStrategy::RoundUp).reorder(ji, l, jo).vectorize(ji);
  dot.compute_at(s, jo).vectorize(j, vec);
  dot.update().atomic().reorder(rv, l, j).vectorize(rv);
  part.compute_at(dot, l).bound(lane, 0, vec).vectorize(lane);
  part.update(0).reorder(lane, rd).vectorize(lane);
  part.update(1).unscheduled();  // the D % vec tail: scalar
  for (Func f : {mv, psv}) {
    f.compute_at(task).bound(lane, 0, vec).vectorize(lane);
    f.update().reorder(lane, rj).vectorize(lane);
  }
  for (Func f : {m, ps}) {
    f.compute_at(task);
    f.update().atomic().vectorize(rv);
  }
  p.compute_at(task).split(j, jo, ji, vec, TailStrategy::RoundUp).vectorize(ji);
  acc.compute_at(task).bound(d, 0, in.D).vectorize(d, vec, TailStrategy::GuardWithIf);
  acc.update()
      .split(d, dd, di, vec, TailStrategy::GuardWithIf)
      .reorder(di, dd, l, rs)
      .vectorize(di);
  // The common head dims: constant trip counts, the loops along d unrolled (CPU time per call
  // against the loops, 1 thread, interleaved: L = 8 0.78x AVX-512, 0.77x AVX2; L = 16 0.80x,
  // 0.86x; L = 1, memory-bound, 1.03x and 0.89x).
  for (int dims : {64, 128}) {
    part.update(0).specialize(in.D == dims).unroll(rd);
    acc.update().specialize(in.D == dims).unroll(dd);
  }

  dsl::NnKernel kernel;
  kernel.outputs = {o};
  kernel.schedule_summary =
      std::string(in.causal ? "causal (the first L keys), " : "") + (masked ? "mask, " : "") +
      "k and v read in place; one parallel task per (b, h): scores along the keys (dot "
      "vectorized along d, one horizontal sum), max, exp and sum along the keys, p.v along d";
  kernel.schedule_params = {{"vec", vec}};
  return kernel;
}

// Where decode_queries applies: 11 to 32 queries (below, decode is as fast or faster; above,
// flash: see its schedule comment) and head dims in whole blocks of its p . v register block.
// The kernel refuses calls outside the bounds (build_decode_queries' specialize_fail).
constexpr int kDecodeQueriesMinL = 11, kDecodeQueriesMaxL = 32, kDecodeQueriesDims = 32;
const std::string kDecodeQueriesWhen = "L >= " + std::to_string(kDecodeQueriesMinL) +
                                       " && L <= " + std::to_string(kDecodeQueriesMaxL) +
                                       " && D % " + std::to_string(kDecodeQueriesDims) + " == 0";

// decode_queries: decode vectorized along the queries instead of the head dims, for L of
// 11-32. Per (b, h), the queries padded to blocks of 16 (padding repeats query L - 1, never
// stored):
//   s(l, j) = (q_l * scale) . k_j     register blocks of kb keys x 16 queries over the whole
//                                     D: per d, 16 / vec loads of the transposed queries and kb
//                                     broadcasts from k's rows (in place, one contiguous run)
//   m(l) = max_j s, p = exp2(s - m), ps(l) = sum_j p     vectors along the queries
//   o(d, l) = (sum_j p(l, j) v(d, j)) / ps(l)            per chunk of keys, register blocks of
//                                                        qb queries x 32 head dims: per key qb
//                                                        broadcasts of p, 32 / vec loads of v
// No horizontal sums, no accumulator through memory inside a block, and every multiply-add
// fills all its lanes; decode pays a horizontal sum per query and key and keeps p . v in L1.
dsl::NnKernel build_decode_queries(const dsl::NnArgs& args, bool masked) {
  const AttnInputs in(args, masked);
  const int vec = args.target.natural_vector_size<float>();
  // keys per q . k block: 16 x 1 vector of queries (AVX-512), 6 x 2 (AVX2) accumulators
  const int kb = vec >= 16 ? 16 : 6;
  const int db = kDecodeQueriesDims;  // head dims per p . v block
  // queries per p . v block; accumulators 2 dim vectors x 8 queries (AVX-512), 4 x 2 (AVX2)
  const int qb = vec >= 16 ? 8 : 2;
  const int chunk = 64;  // keys per p . v chunk: 16 KB of v at D = 64
  // ---- Algorithm ----
  Var l("l"), j("j"), d("d"), h("h"), b("b");
  const Expr hk = in.kv_head(h);
  const Expr S = in.causal ? min(in.S, in.L) : in.S;  // the keys any query sees
  const int G = 16;                                   // queries per q . k block
  const Expr Lp = (in.L + G - 1) / G * G;             // queries padded to whole blocks
  Func qt("qt");  // scaled queries, transposed (queries innermost), padding repeats the last
  qt(l, d, h, b) = in.q(d, min(l, in.L - 1), h, b) * in.scale;
  RDom rd(0, in.D, "rd");
  Func sacc("sacc");
  sacc(l, j, h, b) = 0.0f;
  // With S >= kb every key block lies inside [0, S) (the last one shifted inwards), so k is read
  // unclamped: a clamp per key cost four vector instructions per broadcast (address vectors
  // built and extracted every d). Fewer keys: blocks padded, k clamped.
  const Expr whole = S >= kb;
  sacc(l, j, h, b) += qt(l, rd, h, b) * in.k(rd, select(whole, j, clamp(j, 0, S - 1)), hk, b);
  Func s("s");
  s(l, j, h, b) = in.seen(sacc(l, j, h, b), j, l);
  RDom rj(0, S, "rj");
  Func m("m");
  m(l, h, b) = -INFINITY;
  m(l, h, b) = max(m(l, h, b), s(l, rj, h, b));
  Func p("p");
  p(l, j, h, b) = exp2_nonpositive(s(l, j, h, b) - finite_or_zero(m(l, h, b)));
  Func ps("ps");
  ps(l, h, b) = 0.0f;
  ps(l, h, b) += p(l, rj, h, b);
  // p . v over chunks of `chunk` keys (pvc), summed over the chunks (pv): a chunk's v rows
  // stay in L1 for every block of queries and dims, so v is read from memory once.
  Var ko("ko");
  RDom rc(0, chunk, "rc");
  rc.where(ko * chunk + rc < S);
  Func pvc("pvc");
  pvc(d, l, ko, h, b) = 0.0f;
  // The key clamped although the where clause stops at S: bounds inference takes the whole
  // last chunk (v read past S without it).
  const Expr key = min(ko * chunk + rc, S - 1);
  pvc(d, l, ko, h, b) += p(l, key, h, b) * in.v(d, key, hk, b);
  RDom rko(0, (S + chunk - 1) / chunk, "rko");
  Func pv("pv");
  pv(d, l, h, b) = 0.0f;
  pv(d, l, h, b) += pvc(d, l, rko, h, b);
  Func o = dsl::output_func("o");
  o(d, l, h, b) = pv(d, l, h, b) / ps(l, h, b);

  // ---- Schedule ----
  // One parallel task per (b, h), as decode; s and p hold 16 x S floats (L2), k and v are
  // each read once from memory. Measured (AMD EPYC family 26 model 2, 2 vCPUs, 2 threads,
  // cold, S = 2048, D = 64, 16 heads, `opforge bench scaled_dot_product_attention`, every
  // algorithm interleaved; scripts/BENCHMARKS.md has the runs), decode's time / this one's:
  //   L          2     4     6     8     9     11         12         16
  //   AVX-512    0.66  0.94  0.99  1.10  1.05  1.39-1.44  1.68-1.86  1.81-1.87
  //   AVX2       0.47  0.70  0.90  0.76  0.80  1.11-1.19  1.33-1.37  1.69-1.74
  // (its time is about flat in L: 16 lanes computed whatever L), hence L >= 11 on both ISAs.
  // Past 16 (two blocks of 16 queries), flash's time / this one's, two rounds:
  //   L          17    24          32
  //   AVX-512    1.19  1.18-1.26   0.96-1.00
  //   AVX2       1.16  0.93-0.95   1.64-1.66
  // (AVX2's flash tasks are 24 queries: one task at L = 24, two at 32), hence L <= 32.
  // Steps, same kind of runs: the first form (8-key blocks of one query vector, k's rows
  // clamped per key, p . v over all keys per block of queries) ran L = 16 at 0.89x oneDNN
  // (AVX-512); k unclamped with its row stride a constant (below) 1.33x faster; the max and
  // sum as 4 partial chains 1.02x; 16-key blocks of all 16 queries (AVX2: 6 keys x 2 vectors)
  // against 8 (4) 1.00-1.07x; p . v in 64-key chunks (v read once from memory, not once per
  // block of queries and dims) 0.98-1.11x (AVX-512), 1.10-1.17x (AVX2).
  Var hb("hb"), lo("lo"), li("li"), dob("dob"), dib("dib"), jo("jo"), ji("ji"), lg("lg"),
      lgi("lgi");
  o.reorder(d, l, h, b).fuse(h, b, hb).parallel(hb).vectorize(d, vec, TailStrategy::GuardWithIf);
  const LoopLevel task(o, hb);
  qt.compute_at(task).bound(l, 0, Lp).vectorize(l, vec);
  s.compute_at(task).bound(l, 0, Lp);
  for (const bool w : {true, false}) {
    (w ? s.specialize(whole) : Stage(s))
        .split(j, jo, ji, kb, w ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf)
        .split(l, lg, lgi, G)
        .reorder(lgi, ji, lg, jo)
        .vectorize(lgi, vec);
  }
  // The q . k block: kb keys x a block of 16 queries, accumulators over the whole D.
  sacc.compute_at(s, lg).bound_extent(l, G).bound_extent(j, kb).vectorize(l, vec).unroll(l).unroll(
      j);
  sacc.update().reorder(l, j, rd).vectorize(l, vec).unroll(l).unroll(j);
  // k's row stride a constant for the common head dims: the kb rows' addresses are then one
  // pointer and immediate offsets (with a run-time stride LLVM ran out of general registers and
  // rebuilt half the addresses with vector instructions every d).
  for (int dims : {64, 128}) sacc.update().specialize(in.k.dim(1).stride() == dims);
  // The max and the sum over the keys as 4 interleaved partial results (rfactor): one chain
  // of S dependent vmaxps / vaddps per head took 17% of the call (AVX-512, L = 16, S = 2048).
  for (Func f : {m, ps}) {
    RVar rjo("rjo"), rji("rji");
    Var u("u");
    f.compute_at(task).bound(l, 0, Lp).vectorize(l, vec);
    Func part = f.update().split(rj, rjo, rji, 4, TailStrategy::GuardWithIf).rfactor(rji, u);
    part.compute_at(task).bound(l, 0, Lp).vectorize(l, vec).unroll(u);
    part.update().reorder(l, u, rjo).vectorize(l, vec).unroll(u);
    f.update().vectorize(l, vec);
  }
  p.compute_at(task).bound(l, 0, Lp).vectorize(l, vec);
  // p . v: per chunk of keys, per block of qb queries x db dims, the block's accumulators in
  // registers over the chunk's keys (per key qb broadcasts of p, db / vec loads of v), then
  // added into pv (L1).
  pv.compute_at(task).bound(l, 0, Lp).vectorize(d, vec);
  pv.update()
      .split(d, dob, dib, db)
      .split(l, lo, li, qb)
      .reorder(dib, li, lo, dob, rko)
      .vectorize(dib, vec)
      .unroll(dib)
      .unroll(li);
  pvc.compute_at(pv, lo).vectorize(d, vec).unroll(d).unroll(l);
  pvc.update().reorder(d, l, rc, ko).vectorize(d, vec).unroll(d).unroll(l);
  // Whole dim blocks only (the algorithm's condition): the blocks would read v past D. Past 32
  // queries flash is the faster algorithm; the condition stops there, and so does the kernel.
  o.specialize(in.D % db == 0 && in.L <= kDecodeQueriesMaxL);
  o.specialize_fail("decode_queries: the head dim D is not a multiple of " + std::to_string(db) +
                    " or L is over " + std::to_string(kDecodeQueriesMaxL));

  dsl::NnKernel kernel;
  kernel.outputs = {o};
  kernel.schedule_summary =
      std::string(in.causal ? "causal (the first L keys), " : "") + (masked ? "mask, " : "") +
      "k and v read in place; one parallel task per (b, h); vectorized along the queries: "
      "q.k in " +
      std::to_string(kb) + "-key register blocks, softmax along the keys, p.v in " +
      std::to_string(qb) + "-query x " + std::to_string(db) + "-dim register blocks";
  kernel.schedule_params = {{"vec", vec},
                            {"key_block", kb},
                            {"query_block", qb},
                            {"dim_block", db},
                            {"key_chunk", chunk}};
  return kernel;
}

// Both ops' algorithms: decode_queries for 11-32 queries, decode for up to 16 (higher priorities
// where their conditions hold), flash otherwise.
void declare_algorithms(dsl::NnOpDecl& d, bool masked) {
  d.algorithm("flash", "", 0,
              std::string("flash-style: key blocks with an online softmax, register-tiled q.k^T "
                          "and p.v, one parallel task per (batch, head, query block)") +
                  (masked ? "; the mask added to each score block" : ""),
              [masked](const dsl::NnArgs& a) { return build_flash(a, masked); })
      .algorithm("decode", kDecodeWhen, 10,
                 std::string(kDecodeWhen) +
                     " (decode): k and v read once in place, no packing; one parallel task per "
                     "(batch, head): scores along the keys, softmax, p.v along the head dim",
                 [masked](const dsl::NnArgs& a) { return build_decode(a, masked); })
      .algorithm("decode_queries", kDecodeQueriesWhen, 11,
                 kDecodeQueriesWhen +
                     " (decode_queries): decode vectorized along the queries; q.k and p.v in "
                     "register blocks",
                 [masked](const dsl::NnArgs& a) { return build_decode_queries(a, masked); });
}

}  // namespace

const dsl::NnOpDecl& scaled_dot_product_attention() {
  static const dsl::NnOpDecl decl = [] {
    dsl::NnOpDecl d("scaled_dot_product_attention");
    // Attended (query, key) pairs: all L*S, or with causal those with s <= l.
    const std::string pairs =
        "((1-causal)*L*S + causal*(min(L, S)*(min(L, S) + 1)/2 + max(L - S, 0)*S))";
    d.summary(
         "Fused scaled dot-product attention (flash-style online softmax; decode for few queries), "
         "grouped-query")
        .formula(
            "o[b,h,l] = sum_s softmax_s(q[b,h,l] . k[b,g,s] * scale + mask[l,s]) v[b,g,s], "
            "g = h / (H / Hkv); mask = -inf where causal and s > l, else 0; scale 0 means "
            "1/sqrt(D)")
        .reference(
            "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, "
            "scale=scale or None) with k, v repeat_interleave'd H/Hkv times over dim 1")
        .input("q", {"B", "H", "L", "D"}, "Queries")
        .input("k", {"B", "Hkv", "S", "D"}, "Keys (Hkv heads, each shared by H/Hkv query heads)")
        .input("v", {"B", "Hkv", "S", "D"}, "Values")
        .scalar("scale", "Multiplies q . k; 0: 1/sqrt(D) (torch's default)")
        .domain("scale", "[0, inf)")
        .attr_bool("causal", false,
                   "mask keys after the query: query l attends to keys s <= l (top-left "
                   "aligned, as torch is_causal=True)")
        .check("Hkv >= 1 && S >= 1", "k and v need at least one head (Hkv) and one key (S)")
        .check("H % Hkv == 0", "q's heads (H) must be a multiple of k's and v's heads (Hkv)")
        .output("o", {"B", "H", "L", "D"}, "Attention output, q's shape")
        .estimate("B", 1)
        .estimate("H", 16)
        .estimate("Hkv", 16)
        .estimate("L", 2048)
        .estimate("S", 2048)
        .estimate("D", 64)
        // q . k and p . v: 4 flops per attended pair and head dim.
        .cost("4*B*H*D*" + pairs, "4*(2*B*H*L*D + 2*B*Hkv*S*D)")
        .example("q=1,16,2048,64 k=1,16,2048,64 v=1,16,2048,64 scale=0")
        // o is a convex combination of v's rows: fp32 dot products over D, exp within ~1 ulp,
        // sums over S in fp32. Measured worst |error| against fp64 with inputs in [-1, 1]:
        // ~1.5e-7 (S = 100); the tests' problems report their worst ratio.
        .tolerance(1e-5, 2e-6);
    declare_algorithms(d, false);
    return d;
  }();
  return decl;
}

const dsl::NnOpDecl& scaled_dot_product_attention_masked() {
  static const dsl::NnOpDecl decl = [] {
    dsl::NnOpDecl d("scaled_dot_product_attention_masked");
    d.summary("scaled_dot_product_attention with a mask [L, S]: additive float, or bool")
        .formula(
            "o[b,h,l] = sum_s softmax_s(q[b,h,l] . k[b,g,s] * scale + mask[l,s]) v[b,g,s], "
            "g = h / (H / Hkv); scale 0 means 1/sqrt(D); a bool mask is 0 where true, -inf "
            "where false; a row whose mask is all -inf (all false) gives NaN")
        .reference(
            "torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, "
            "scale=scale or None), mask float or bool [L, S] broadcast over B and H")
        .input("q", {"B", "H", "L", "D"}, "Queries")
        .input("k", {"B", "Hkv", "S", "D"}, "Keys (Hkv heads, each shared by H/Hkv query heads)")
        .input("v", {"B", "Hkv", "S", "D"}, "Values")
        .input("mask", {"L", "S"},
               "float32: added to the scaled scores (-inf: masked); bool: true where the query "
               "attends to the key; every batch and head")
        .attr_string("mask_dtype", "float32", {"float32", "bool"},
                     "The mask's dtype: float32 (additive) or bool (one byte, true = attend, "
                     "as torch's boolean attn_mask; a quarter of the float mask's traffic)")
        .named_in_id_off_default("mask_dtype")
        .input_dtype_when("mask", "mask_dtype", "bool", registry::DType::b8)
        .scalar("scale", "Multiplies q . k; 0: 1/sqrt(D) (torch's default)")
        .domain("scale", "[0, inf)")
        .check("Hkv >= 1 && S >= 1", "k and v need at least one head (Hkv) and one key (S)")
        .check("H % Hkv == 0", "q's heads (H) must be a multiple of k's and v's heads (Hkv)")
        .output("o", {"B", "H", "L", "D"}, "Attention output, q's shape")
        .estimate("B", 1)
        .estimate("H", 16)
        .estimate("Hkv", 16)
        .estimate("L", 2048)
        .estimate("S", 2048)
        .estimate("D", 64)
        .cost("4*B*H*L*S*D", "4*(2*B*H*L*D + 2*B*Hkv*S*D) + bytes_mask*L*S")
        .example("q=1,16,2048,64 k=1,16,2048,64 v=1,16,2048,64 mask=2048,2048 scale=0")
        .tolerance(1e-5, 2e-6);
    declare_algorithms(d, true);
    return d;
  }();
  return decl;
}

}  // namespace opforge::generators
