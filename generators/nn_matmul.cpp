// matmul: c[B?, M, N] = op(a) . op(b), fp32, where op transposes when transpose_a /
// transpose_b says so (numpy: a @ b, a.T @ b, ...); and linear, torch's Linear (x . weight^T
// + bias), on the same algorithms (MatmulInputs).
//
// Declaration: the dims of a declaration are fixed, but which stored dim is M, K or N depends
// on the attrs. So the operands keep their stored names (a_rows x a_cols, b_rows x b_cols) and
// the attrs pick among them in the shape expressions, a bool attr being 0 or 1:
//   M = transpose_a*a_cols + (1-transpose_a)*a_rows        (and likewise K, N)
// The inner-dim check is written once per transpose combination, so that each message names
// exactly the two dims that must agree.
#include "generators/nn_matmul.h"

#include <algorithm>
#include <string>
#include <vector>

#include "dsl/double_buffer.h"
#include "dsl/schedule_params.h"
#include "dsl/table_lookup.h"
#include "generators/nn_ops.h"

namespace opforge::generators {

using namespace Halide;

MatmulTiles matmul_tiles(const Target& target) {
  const int v = target.natural_vector_size<float>();  // 16 with AVX-512, 8 with AVX2
  MatmulTiles t;
  t.rn = 2 * v;
  // rm x 2 accumulators + 2 B vectors + 1 broadcast must fit the register file: 8 x 2 + 3
  // of AVX-512's 32, 6 x 2 + 3 of AVX2's 16.
  t.rm = v >= 16 ? 8 : 6;
  t.mt = t.rm * 32;
  // One rn-column slice of the B panel (kc x rn floats) is what the register block rereads
  // from L1: 16 KB with kc = 128 on AVX-512 (128 x 32) and kc = 256 on AVX2 (256 x 16). The
  // schedule comment has the measurements, incl. why long K keeps 256 on AVX-512.
  t.kc = v >= 16 ? 128 : 256;
  return t;
}

PackedGemm define_packed_gemm(const Func& opa, const Func& opb, const Expr& K, const Target& target,
                              bool a_batched, const Func& opb_rows) {
  PackedGemm g;
  g.t = matmul_tiles(target);
  const MatmulTiles& t = g.t;
  const Var n = g.n, m = g.m, bt = g.bt, k = g.k, ko = g.ko, ni = g.ni, no = g.no, mi = g.mi,
            mo = g.mo;
  // Packed panels, so that the inner product reads contiguous memory whatever the transposes:
  // apack(mi, k, mo) = op(a)(mo*rm + mi, k): rm rows interleaved, one broadcast each;
  // bpack(ni, k, no) = op(b)(k, no*rn + ni): rn columns side by side, 2 vector loads.
  g.apack = Func("apack");
  g.bpack = Func("bpack");
  if (a_batched) {
    g.apack(mi, k, mo, bt) = opa(k, mo * t.rm + mi, bt);
  } else {
    g.apack(mi, k, mo) = opa(k, mo * t.rm + mi, 0);
  }
  // K in chunks of `chunk`: acc is the inner product over chunk ko, prod the sum over chunks.
  // The last chunk stops at K (the where clause).
  Expr chunk =
      t.kc == t.kc_long_k ? min(K, t.kc) : select(K > t.long_k, min(K, t.kc_long_k), min(K, t.kc));
  const Expr b_element = opb(no * t.rn + ni, k, bt);
  if (opb_rows.defined() && dsl::permutes_of(target) == dsl::Permutes::avx512 && t.rn % 16 == 0) {
    // Column ni of the panel from the 16 x 16 block of b's rows (n) by k it lies in: row i of
    // the block is b's row (ni / 16) * 16 + i at the 16 k from (k / 16) * 16, one dense vector
    // load when ni is vectorized 16-wide. Only where every block lies within K (then the k
    // clamp is a no-op the loads need not pay; the schedule specializes on it, the select
    // folds there); b_element as such is what a scalar lane reads.
    g.b_transposed_blocks = K % 16 == 0 && K % chunk == 0;
    std::vector<Expr> rows;
    for (int i = 0; i < 16; ++i) {
      const Expr k_i = unsafe_promise_clamped(k / 16 * 16 + ni % 16, 0, K - 1);
      rows.push_back(opb_rows(no * t.rn + ni / 16 * 16 + i, k_i, bt));
    }
    g.bpack(ni, k, no, bt) =
        select(g.b_transposed_blocks, dsl::transposed_lane(k % 16, b_element, rows), b_element);
  } else {
    g.bpack(ni, k, no, bt) = b_element;
  }

  g.r = RDom(0, chunk, "r");
  const RDom& r = g.r;
  g.r.where(ko * chunk + r < K);
  g.acc = Func("acc");
  g.acc(n, m, ko, bt) = 0.0f;
  Expr a = a_batched ? g.apack(m % t.rm, ko * chunk + r, m / t.rm, bt)
                     : g.apack(m % t.rm, ko * chunk + r, m / t.rm);
  g.acc(n, m, ko, bt) += a * g.bpack(n % t.rn, ko * chunk + r, n / t.rn, bt);
  g.rko = RDom(0, (K + chunk - 1) / chunk, "rko");
  const RDom& rko = g.rko;
  g.prod = Func("prod");
  g.prod(n, m, bt) = 0.0f;
  g.prod(n, m, bt) += g.acc(n, m, rko, bt);
  return g;
}

Expr packed_gemm_tile_rows(const PackedGemm& g, const Expr& M) {
  return (M + g.t.mt - 1) / g.t.mt;
}

Expr packed_gemm_tile_height(const PackedGemm& g, const Expr& M, const Expr& tile_rows) {
  const Expr rows = tile_rows.defined() ? tile_rows : packed_gemm_tile_rows(g, M);
  return ((M + rows - 1) / rows + g.t.rm - 1) / g.t.rm * g.t.rm;
}

void schedule_packed_gemm(PackedGemm& g, const LoopLevel& tile, bool a_k_contiguous,
                          bool b_k_contiguous, bool double_buffer, bool batches_in_tile,
                          bool pack_b_once) {
  // GotoBLAS-style: per mt x nt tile of c (one parallel task), per K chunk, pack an mt x kc
  // panel of op(a) and a kc x nt panel of op(b); then per rn-column slice of the B panel
  // (32 KB, stays in L1) and per rm-row slice of the A panel (L2), the register block acc:
  // rm x rn accumulators in registers over the whole chunk (per k: 2 vector loads, rm
  // broadcasts, 2*rm FMAs), added into the tile prod once per chunk.
  //
  // Measured on the 2-vCPU AVX-512 (Zen 4) machine, 2 threads, shared and noisy (oneDNN 2.6
  // matmul, brg:avx512_core, ran 46-104 GFLOP/s in the same runs), medians of the ratio of
  // interleaved pairs, 1024^3:
  //  - accumulating straight into the memory tile (no acc Func): LLVM kept loading/storing
  //    the accumulators every k: 35% of oneDNN. The register block acc: 82-89%.
  //  - register block rm x rn (mt): 6x32 (96) 82-85%; 6x32 (192) 91-93%; 12x32 (192)
  //    81-91%; 8x32 (256) 89-97%: larger tiles repack B less often. kc 128 vs 256: same; nt
  //    128/256/512: 91/82-89/79%.
  //  - transpose_b pack: 16 k per vector load, rn columns unrolled (strided stores) 72%, vs
  //    vectorized over n (a gather per vector) 50%, vs a 16x16 or 8x8 two-dim vectorized
  //    transpose 52% / 58%.
  //  - A pack vectorized along k: +0-3% (within noise), kept.
  //  - Double buffering (store_at the tile, fold_storage(k, 2*kc), async()): async B pack
  //    90.0-97.6% vs sync 91.7-98.5% in the same three rounds; async A pack 86.5-86.9%, both
  //    84-93%. Not kept: the packs are ~2% of the work, and on 2 cores the producer thread
  //    competes with the other tile's compute. As the `double_buffer` param (both packs,
  //    dsl/double_buffer.h; 2026-12-04, AMD EPYC 2 vCPUs, 1024^3, same run): 1.5x the time at
  //    1 thread, 2.7-2.8x at 2, both ISAs (a task pair and a semaphore wake per K chunk and
  //    tile). Off.
  // Other shapes (sync, this schedule): b 8 x 512^3 92%; M=128 K=4096 N=4096 96%; the same
  // with transpose_b 89%; 1024^3 transpose_b 86%, transpose_a 91%, both 89%.
  //
  // Re-measured 2026-12-02 on the 2-vCPU Intel Xeon (family 6 model 207, 48 KB L1d and 2 MB
  // L2 per vCPU), 2 threads, host shared with other builds (load average 9-12), so single
  // ratios swing by +-0.1-0.2; the ranges are of 2-5 interleaved rounds (vs oneDNN 2.6
  // brg:avx512_core; AVX2 vs oneDNN held to AVX2 with ONEDNN_MAX_CPU_ISA=AVX2, gemm:jit):
  //  - kc 128 instead of 256 on AVX-512 (B slice 16 KB instead of 32 KB of L1): 1024^3
  //    0.75-0.92x vs 0.42-0.71x; 8 x 512^3 0.80-0.99x vs 0.33-0.57x. At M=128 K=4096
  //    N=4096 it lost (0.73-0.94x vs 0.83-1.01x; tb 0.70-0.81x vs 0.74-0.89x): twice the
  //    chunks, so twice the prod round trips, for a tile of only 128 rows. Hence kc 128 up to
  //    K = 2048 and 256 above (this rule: 1024^3 0.78-0.85x, 8 x 512^3 0.81-0.96x, 128 x 4096^2
  //    0.74-0.88x, tb 0.73-0.82x, against base 0.58-0.59 / 0.55 / 0.76-0.80 / 0.77-0.86 in
  //    the same rounds). AVX2 (B slice already 16 KB at kc 256): kc 128 no better (1024^3
  //    0.77-0.80x vs 0.78-0.80x, 8 x 512^3 0.60-0.69x vs 0.59-0.60x): kept 256.
  //  - Not kept: reading A in place (no A pack; 1024^3 same, 128 x 4096^2 0.65x vs 0.83-0.84x:
  //    8 rows 16 KB apart); an 8x8 (16x16) in-register transpose for the transpose_b pack
  //    (Halide's block_transpose pattern: 0.81-0.87x vs 0.80-0.87x, 16x16 0.66-0.77x); 6 x 64
  //    and 8 x 48 register blocks (within noise of 8 x 32); mt 512 or nt 512 with kc 128
  //    (within noise); store_in(Stack) for the packs and prod: Halide 14 still heap-allocates
  //    them (over its stack size limit), even with bound_storage making them constant size.
  //  - Most of the remaining gap under load is the per-task heap allocations (prod and both
  //    panels, 128-256 KB each, malloc'd and freed per tile): glibc trims the freed heap top
  //    and the next tile page-faults it back in (perf: exc_page_fault and clear_page ~10% of
  //    samples). With GLIBC_TUNABLES=glibc.malloc.trim_threshold=1e9:glibc.malloc.
  //    mmap_threshold=1e9 the old schedule went from 0.58-0.62x to 0.78-0.82x at 1024^3. Now
  //    done in the runtime (below).
  //
  // Re-measured 2026-12-02 later, same machine, load average 7-9 (wall-time ratios swung
  // 0.7-1.1x), so by single-thread CPU time per call (best of 20-40 warm calls; oneDNN 2.6 timed
  // alike, OMP_NUM_THREADS=1), which the load moved by ~2-5%:
  //  - Before: AVX-512 1024^3 17.0 ms vs oneDNN 15.2 (0.89x), 8 x 512^3 17.6 vs 15.3 (0.87x),
  //    transpose_b 128 x 4096^2 37.3 vs 34.3 (0.92x); AVX2 35.0 vs 27.1 (0.77x), 35.3 vs 26.8
  //    (0.76x), 66.5 vs 66.0 (0.99x).
  //  - The B pack walked b down one panel column slice at a time (rows 4 KB apart at N = 1024;
  //    20% of AVX2 samples on its loads). Along k outside, the panel's columns inside (b's rows
  //    read in order): AVX2 1024^3 33.2-34.5 -> 29.9 ms, 8 x 512^3 35.0 -> 31.1 ms (0.91x,
  //    0.86x). On AVX-512 (32-column slices: 2 whole lines per row) no gain, maybe a loss
  //    (1024^3 16.0-16.3 -> 16.4-16.6 ms, 8 x 512^3 16.9-17.3 -> 17.1-17.2 ms in 3 alternations;
  //    identical code varied by up to 2%): AVX2 only. Likewise the transpose_a A pack, both
  //    ISAs: 1024^3 transpose_a AVX2 35-42 -> 32-33 ms, AVX-512 18.2 -> 18.1 ms.
  //  - Page faults per call with 2 threads (1024^3, 8 x 512^3, transpose_b): AVX2 1167 / 2484
  //    / 779 from the worker thread's malloc arena, AVX-512 0-16; with the runtime's per-thread
  //    cache of freed halide_malloc blocks (runtime/halide_alloc.h) 0-4. With 1 thread none.
  //  - AVX-512 1024^3 profile after: the register block loop ~75% of samples, B pack ~9% and
  //    A pack ~7% (both read b and a from L3: each B panel is packed M/mt times, each A panel
  //    N/nt times), the prod -> c copy ~4%, prod += acc ~2.5%.
  //  - Not kept on the Zen 4 EPYC (family 25 model 17; 1024^3, AVX-512, one thread, GFLOP/s
  //    in three alternations, each register block built into its own registry): 6 x 64 with
  //    kc 64 (24 accumulators, 4 B vectors, 6 broadcasts per k: fewer loads per FMA, B slice
  //    16 KB) 86.6-92.5 against 8 x 32's 88.8-92.9; 16 x 16, 24 x 16 and 12 x 32 1.03-1.13x
  //    the time. perf there: the register block loop is 94% of the kernel's samples.
  //  - Not kept: nt 512 (A packed half as often): 8 x 512^3 -3% CPU time on both ISAs, 1024^3
  //    -1-2%, transpose_b +1.5%, all within the load's noise; mt 512 on top no better. c
  //    accumulated in place (c = 0, then c += acc per chunk: no prod tile, no copy; register
  //    blocks GuardWithIf, acc bound_extent to stay constant-size): 1024^3 and 8 x 512^3 within
  //    noise of this schedule, transpose_b 0.19x (M = 128 < mt: every block guarded).
  //
  // Equal tile rows (packed_gemm_tile_height; 2026-12-05, AMD EPYC family 26 model 2, 2 vCPUs, 2
  // threads, cold; `opforge bench matmul`, both forms and oneDNN 2.6 in one run, interleaved
  // medians of 10-20): the runtime's OpenMP split is static (each thread a contiguous run of tile
  // indices, tiles numbered along n, then m), so M = 1024 on AVX2 (tile rows 5 x 192 + 64) gave one
  // thread 12 full tiles and the other 8 and 4 thirds. M split into tile rows of equal height
  // instead (rounded up to rm), the time of fixed 192 / 256-row tiles over equal ones: AVX2 1024^3
  // 1.07, 256 x 64 x 3136 1.16, 256 x 256 x 3136 1.33, 640 x 768 x 768 1.06, 4096 x 768 x 768
  // 1.01, 128 x 4096^2 transpose_b 1.00, 8 x 512^3 0.96-0.98 (three runs: 48 tasks balance
  // anyway; 174-row tiles cost a little); AVX-512 640 x 768 x 768 1.16, the others (M a
  // multiple of 256 or below it) 0.98-0.99. A round-robin or dynamic split in the runtime
  // instead (OMP_SCHEDULE, same runs): AVX2 1024^3 1.06-1.08x oneDNN as well (static
  // 0.98-0.99x), but AVX2 direct convolutions fell from 0.83-0.92x oneDNN to 0.76-0.89x and
  // Winograd from 1.86-1.93x to 1.45-1.65x (neighbouring row tasks share input rows in one
  // core's L2): the tiles changed, not the runtime.
  const MatmulTiles& t = g.t;
  const int vec = t.rn / 2;
  Func prod = g.prod, acc = g.acc, apack = g.apack, bpack = g.bpack;
  const Var n = g.n, m = g.m, k = g.k, ko = g.ko, ni = g.ni, no = g.no, mi = g.mi, mo = g.mo;
  Var nii("nii"), mii("mii"), mio("mio"), nio("nio"), kv("kv"), kvi("kvi");
  prod.compute_at(tile).vectorize(n, vec);
  prod.update()
      .split(n, nio, nii, t.rn, TailStrategy::RoundUp)
      .split(m, mio, mii, t.rm, TailStrategy::RoundUp);
  // Batches inside the K chunk: the chunk's panels (one A panel) serve all of them.
  if (batches_in_tile) {
    prod.update().reorder(nii, mii, mio, nio, g.bt, g.rko);
  } else {
    prod.update().reorder(nii, mii, mio, nio, g.rko);
  }
  prod.update().vectorize(nii, vec).unroll(nii).unroll(mii);
  acc.compute_at(prod, mio).vectorize(n, vec).unroll(n).unroll(m);
  acc.update().reorder(n, m, g.r, ko).vectorize(n, vec).unroll(n).unroll(m);

  apack.compute_at(prod, g.rko);
  if (pack_b_once) {
    bpack.compute_root();
  } else {
    bpack.compute_at(prod, g.rko);
  }
  if (g.a_k_group > 0) {
    // Whole groups from a multiple of the group (align_bounds), scalar copies unrolled.
    apack.align_bounds(k, g.a_k_group)
        .split(k, kv, kvi, g.a_k_group)
        .reorder(kvi, mi, kv)
        .unroll(kvi)
        .unroll(mi);
  } else if (!a_k_contiguous) {
    // rm consecutive elements of a stored row; along k outside, so a's rows are read in order.
    apack.vectorize(mi, t.rm).reorder(mi, mo, k);
  } else {
    // A row of a is contiguous along k: load vec k at once, store rm-strided.
    apack.split(k, kv, kvi, vec).reorder(kvi, mi, kv).vectorize(kvi).unroll(mi);
  }
  if (g.b_transposed_blocks.defined()) {
    // 16 x 16 blocks: per 16 k (a K chunk starts at a multiple of 16 there, so k % 16 is the
    // unrolled kvi), the 16 columns of each block, 16-wide along n: each block's 16 rows loaded
    // once and transposed by one shuffle network (dsl::transposed_lane): per 512 elements 32
    // loads, 128 shuffles, 32 stores, where the pack below stores each element on its own
    // (plus its address arithmetic). AMD EPYC family 26 (Zen 5), 2 threads, preview against
    // the registered pack, same runs (2026-12-07): 128 x 4096^2 transpose_b 0.96-0.98x the
    // time (0.88x -> 0.91x oneDNN's speed), 64 x 4096^2 0.99x, where each B panel is packed
    // once for few rows; 256 x 320^2, 1024^3, 2048 x 1024^2, 4096 x 768 x 3072 0.98-1.01x
    // (the pack a small part). The same 128 x 4096^2 without any B pack (a constant panel, no
    // B reads) took 0.83x the registered time: what is left there is reading B from memory.
    bpack.align_bounds(k, 16);  // known multiples of 16: k % 16 folds to kvi
    Stage blocks = bpack.specialize(g.b_transposed_blocks);
    blocks.split(k, kv, kvi, 16, TailStrategy::RoundUp)
        .reorder(ni, kvi, kv)
        .vectorize(ni, 16)
        .unroll(ni)
        .unroll(kvi);
    if (pack_b_once) blocks.parallel(no);
  }
  if (b_k_contiguous) {
    // A row of b is contiguous along k: load vec k at once, one column of the panel.
    bpack.split(k, kv, kvi, vec).reorder(kvi, ni, kv).vectorize(kvi).unroll(ni);
    if (pack_b_once) bpack.parallel(no);
  } else if (pack_b_once) {
    bpack.vectorize(ni, vec).parallel(no);
  } else if (vec >= 16) {
    // AVX-512: a slice is 2 whole lines of each b row; k outside (below) gained nothing.
    bpack.vectorize(ni, vec);
  } else {
    // A row of b is contiguous along n: along k outside, the panel's columns inside, so the
    // pack reads b rows in order.
    bpack.vectorize(ni, vec).reorder(ni, no, k);
  }

  // Double buffered, each tile keeps two K chunks of each panel; the next chunk's panels are
  // packed by a producer task while the register blocks run over this one.
  const int fold = t.kc_max();
  if (double_buffer) {
    for (Func pack : pack_b_once ? std::vector<Func>{apack} : std::vector<Func>{apack, bpack})
      dsl::double_buffer(pack, prod, tile, LoopLevel(prod, g.rko), k, fold, 0);
  }
}

MatmulInputs MatmulInputs::from(const dsl::NnArgs& args, bool linear) {
  MatmulInputs in;
  if (linear) {
    in.a = args.tensors.at("x");
    in.b = args.tensors.at("weight");
    in.bias = args.tensors.at("bias");
    in.tb = true;
    in.out = "y";
  } else {
    in.a = args.tensors.at("a");
    in.b = args.tensors.at("b");
    in.ta = args.attr_bool("transpose_a");
    in.tb = args.attr_bool("transpose_b");
  }
  return in;
}

// A row-major [B?, rows, cols] tensor is (col, row, batch) to Halide; the runtime passes one
// without the batch dim with batch stride 0. linear's weight is declared 2-D.
Expr MatmulInputs::at(const ImageParam& p, const Expr& col, const Expr& row, const Expr& batch) {
  return p.dimensions() == 2 ? p(col, row) : p(col, row, batch);
}

Expr MatmulInputs::epilogue(const Expr& product, const Expr& n) const {
  return bias.defined() ? product + bias(n) : product;
}

namespace {

// The settable params (the tiles above are fixed per ISA).
const std::vector<dsl::ScheduleParamDecl>& matmul_param_decls() {
  static const std::vector<dsl::ScheduleParamDecl> d = {
      // Off: see the schedule comment's measurements.
      {"double_buffer", 0, 0, 1,
       "pack the next K chunk's A and B panels in an async producer task while the register "
       "blocks run over this chunk (two chunks of each panel per tile, dsl/double_buffer.h)"},
  };
  return d;
}

// packed (pack_b_once false) and packed_b_once: the same GEMM; packed_b_once packs op(b)'s
// panels for the whole call first (see the algorithm's declaration for when it pays).
dsl::NnKernel build_packed(const MatmulInputs& in, const dsl::NnArgs& args, bool pack_b_once) {
  const ImageParam &a = in.a, &b = in.b;
  const bool ta = in.ta, tb = in.tb;
  const auto at = MatmulInputs::at;
  const bool double_buffer =
      dsl::resolve_declared(matmul_param_decls(), args.schedule, "matmul").at("double_buffer");

  // op(a) is M x K, op(b) is K x N.
  const Expr M = a.dim(ta ? 0 : 1).extent(), K = a.dim(ta ? 1 : 0).extent();
  const Expr N = b.dim(tb ? 1 : 0).extent();

  // ---- Algorithm ----
  Var n("n"), m("m"), k("k"), bt("bt");
  // op(a)(m, k) and op(b)(k, n), innermost first, clamped to the tensors: register blocks and
  // the last K chunk overhang the data, and what they compute from the repeated edge is never
  // stored (rows, columns) or never summed (k, by the packed GEMM's where clause).
  Expr mc = clamp(m, 0, M - 1), kc = clamp(k, 0, K - 1), nc = clamp(n, 0, N - 1);
  Func opa("opa"), opb("opb"), opb_rows("opb_rows");
  opa(k, m, bt) = ta ? at(a, mc, kc, bt) : at(a, kc, mc, bt);
  opb(n, k, bt) = tb ? at(b, kc, nc, bt) : at(b, nc, kc, bt);
  if (tb) opb_rows(n, k, bt) = at(b, k, nc, bt);  // k unclamped: the pack reads it within K
  PackedGemm g = define_packed_gemm(opa, opb, K, args.target, true, opb_rows);
  const MatmulTiles& t = g.t;
  const int vec = t.rn / 2;

  // Without a batch dim anywhere, the runtime calls with batch 1.
  Func c = dsl::output_func(in.out);
  c(n, m, bt) = in.epilogue(g.prod(n, m, bt), n);

  // ---- Schedule ----
  // One parallel task per tile of c (schedule_packed_gemm's comment has the measurements).
  Var tile("tile"), ni("ni"), no("no"), mi("mi"), mo("mo");
  auto tile_c = [&](Stage s, const Expr& tile_rows) {
    s.split(m, mo, mi, packed_gemm_tile_height(g, M, tile_rows), TailStrategy::GuardWithIf)
        .split(n, no, ni, t.nt, TailStrategy::GuardWithIf)
        .reorder(ni, mi, no, mo)
        .fuse(no, mo, tile)
        .fuse(tile, bt, tile)
        .parallel(tile)
        .vectorize(ni, vec, TailStrategy::GuardWithIf);
  };
  // Few tasks: more, lower tile rows, so that two threads get equal work from the runtime's
  // static split (contiguous runs of tasks, numbered along n first): at least 4 tasks, and an
  // even count below 16. 256 x 320 x 320 (a UNet attention projection at 16x16) ran 2 tasks,
  // 256 and 64 columns wide, 4 : 1 over the two threads. Time against the single rule, with
  // transpose_b, 2 threads, warm, same run (2026-12-06, AMD EPYC family 25 model 17): AVX-512
  // 256 x 320 x 320 0.69x (0.94x oneDNN's speed after), 256 x 320 x 1280 0.87x, 640 x 768 x
  // 768 (9 tasks) 0.90x, 512 x 768 x 768 (6) 1.00x; AVX2 64 x 320 x 320 0.86x, the others
  // 0.98-1.02x (192-row tiles: 4 tasks already). Each branch's tile rows are one
  // plain expression: Halide bounds the batch decoded from the task index (task / tasks per
  // batch) exactly only then; a min, max or select in the tile height made its bounds reach
  // negative batches (Halide error -4 on every call).
  const Expr rows = packed_gemm_tile_rows(g, M);
  const Expr tasks = (N + t.nt - 1) / t.nt * c.output_buffer().dim(2).extent() * rows;
  tile_c(c.specialize(tasks == 1), rows * 4);
  tile_c(c.specialize(tasks <= 3), rows * 2);
  tile_c(c.specialize(tasks < 16 && tasks % 2 == 1), rows + 1);
  tile_c(c, rows);
  // Tiles then start at multiples of nt and of mt (itself a multiple of rm), so m % rm and
  // n % rn in the packed GEMM are the register block's own indices (no division left in the
  // inner loop).
  c.output_buffer().dim(0).set_min(0);
  c.output_buffer().dim(1).set_min(0);
  schedule_packed_gemm(g, LoopLevel(c, tile), !ta, tb, double_buffer, false, pack_b_once);

  dsl::NnKernel kernel;
  kernel.outputs = {c};
  kernel.schedule_summary = std::string(pack_b_once ? "op(b) packed into panels once per call, "
                                                      "A panels per tile and K chunk, "
                                                    : "packed A/B panels per K chunk, ") +
                            std::to_string(t.rm) + "x" + std::to_string(t.rn) +
                            " register block, one parallel task per " + "tile of c (" +
                            std::to_string(t.nt) + " columns, tile rows of equal " +
                            "height up to " + std::to_string(t.mt) +
                            "; more rows when there are few tasks)";
  if (double_buffer)
    kernel.schedule_summary +=
        "; " +
        dsl::double_buffer_summary(pack_b_once ? "A panels" : "A and B panels", t.kc_max(), "k");
  kernel.schedule_params = {
      {"rn", t.rn},         {"rm", t.rm}, {"kc", t.kc}, {"kc_long_k", t.kc_long_k},
      {"long_k", t.long_k}, {"nt", t.nt}, {"mt", t.mt}, {"double_buffer", double_buffer}};
  return kernel;
}

// packed_b_once: packed re-packs op(b) once per tile row (M / mt times: 16 times at M = 4096
// on AVX-512), and with transpose_b that pack is a transpose: perf, 1 thread, 4096 x 768 x
// 3072 with transpose_b (a GPT-2 MLP Linear at batch 8 x 512), AVX-512: the register block
// 80% of the kernel's samples, the B pack 14%. Packed once per call (compute_root, parallel
// over the column panels; a copy of b's size, read by every tile from L3 or memory), the
// pack is 1% and the register block 93%. Time against packed, 2 threads unless said, `opforge
// bench matmul` (every algorithm and oneDNN 2.6 in one run, medians of 9, 2026-12-06, AMD
// EPYC family 25 model 17, Zen 4, 2 vCPUs):
//   transpose_b  4096 x 768 x 3072  AVX-512 0.96 (1 thread 0.94), 4096 x 3072 x 768 0.92
//                (0.91), 4096 x 768 x 2304 0.96 / AVX2 0.97, 4096 x 768 x 768 0.98 / 0.96,
//                1024^3 1.02 (1 thread 0.92); 512 x 768 x 768 1.02 / 0.89
//   plain        1024^3 0.99 (0.97); 8 x 512^3 (batched) 0.98 / 1.01
//   one tile row (M <= mt): 128 x 4096^2 transpose_b 1.89 (b packed once either way, now
//                through memory), 320^2 transpose_b 1.21 / 1.04
// So from 1024 rows (4 tile rows on AVX-512, 6 on AVX2), where the repeated pack is most of
// what separates packed from oneDNN at these shapes (0.89-0.94x oneDNN after, 0.86-0.90x
// before, same runs).
constexpr int kPackBOnceRows = 1024;

// Rows of op(a) up to which small_m is selected, with and without transpose_b (measured:
// nn_matmul_small_m.cpp's schedule comment).
constexpr int kSmallMRowsTb = 16, kSmallMRows = 8;

// One builder per algorithm for both ops (matmul, linear), as conv2d's declare() does.
enum Algorithm { kPacked, kPackedBOnce, kSmallM };
dsl::NnBuildFn builder(bool linear, Algorithm algorithm) {
  return [linear, algorithm](const dsl::NnArgs& args) {
    const MatmulInputs in = MatmulInputs::from(args, linear);
    if (algorithm == kSmallM) return build_matmul_small_m(in, args);
    return build_packed(in, args, algorithm == kPackedBOnce);
  };
}

}  // namespace

const dsl::NnOpDecl& matmul() {
  static const dsl::NnOpDecl decl = [] {
    const std::string M = "(transpose_a*a_cols + (1-transpose_a)*a_rows)";
    const std::string N = "(transpose_b*b_rows + (1-transpose_b)*b_cols)";
    dsl::NnOpDecl d("matmul");
    d.summary("Matrix product c = op(a) . op(b), optionally batched")
        .formula(
            "c[b, i, j] = sum_k op(a)[b, i, k] * op(b)[b, k, j], op(x) = x or its transpose "
            "(last two dims); a tensor without the batch dim is used for every batch")
        .reference("numpy.matmul / torch.matmul (with a.mT, b.mT for the transposes)")
        .input("a", {"B?", "a_rows", "a_cols"}, "Left operand: M x K, or K x M with transpose_a")
        .input("b", {"B?", "b_rows", "b_cols"}, "Right operand: K x N, or N x K with transpose_b")
        .attr_bool("transpose_a", false, "use the transpose of a's last two dims")
        .attr_bool("transpose_b", false, "use the transpose of b's last two dims")
        .check("transpose_a || transpose_b || a_cols == b_rows",
               "a's columns (K) must equal b's rows (K)")
        .check("!transpose_a || transpose_b || a_rows == b_rows",
               "with transpose_a, a's rows (K) must equal b's rows (K)")
        .check("transpose_a || !transpose_b || a_cols == b_cols",
               "with transpose_b, a's columns (K) must equal b's columns (K)")
        .check("!transpose_a || !transpose_b || a_rows == b_cols",
               "with transpose_a and transpose_b, a's rows (K) must equal b's columns (K)")
        .output("c", {"B?", M, N}, "op(a) . op(b): M x N")
        .estimate("a_rows", 1024)
        .estimate("a_cols", 1024)
        .estimate("b_rows", 1024)
        .estimate("b_cols", 1024)
        // 2*B*M*N*K with M*K = a_rows*a_cols whatever the transpose. Bytes count both
        // operands B times (an operand broadcast over the batch is read once: an overcount).
        .cost("2*B*a_rows*a_cols*" + N, "4*B*(a_rows*a_cols + b_rows*b_cols + " + M + "*" + N + ")")
        // fp32 products summed in chunks of 128-256 then across chunks: measured max |error|
        // against fp64 with inputs in [-1, 1]: 2.8e-5 at K = 4096 (|c| up to ~100), 6e-5 at
        // K = 16384. atol 5e-4 leaves room for other ISAs' summation orders and K = 4096; a
        // dropped or misplaced term (|a_ik b_kj| ~ 0.25 on average) is far outside it.
        .example("a=1024,1024 b=1024,1024")
        .tolerance(1e-4, 5e-4)
        .algorithm("packed", "", 0,
                   "packed A/B panels per K chunk of 128-256, register-blocked inner product, "
                   "parallel over tiles of c",
                   builder(false, kPacked))
        .algorithm("packed_b_once", M + " >= " + std::to_string(kPackBOnceRows), 2,
                   "packed, with op(b) packed into panels once per call instead of once per "
                   "tile row (M >= " +
                       std::to_string(kPackBOnceRows) + ": many tile rows)",
                   builder(false, kPackedBOnce))
        .algorithm("small_m",
                   M + " <= " + std::to_string(kSmallMRows) + " + " +
                       std::to_string(kSmallMRowsTb - kSmallMRows) + " * transpose_b && " + N +
                       " >= " + std::to_string(kMatmulSmallMTask),
                   5,
                   "a few rows of op(a) (M <= " + std::to_string(kSmallMRowsTb) +
                       " with transpose_b, else " + std::to_string(kSmallMRows) +
                       "; N >= " + std::to_string(kMatmulSmallMTask) +
                       "): b read in place once, no packing (a Linear layer's decode step)",
                   builder(false, kSmallM));
    return d;
  }();
  return decl;
}

const dsl::NnOpDecl& linear() {
  static const dsl::NnOpDecl decl = [] {
    dsl::NnOpDecl d("linear");
    d.summary("torch's Linear: y = x . weight^T + bias, the bias added in the GEMM's output stage")
        .formula("y[b, i, j] = sum_k x[b, i, k] * weight[j, k] + bias[j]")
        .reference("torch.nn.functional.linear(x, weight, bias)")
        .input("x", {"B?", "M", "K"}, "Input rows (a Linear's [*, in_features], flattened)")
        .input("weight", {"N", "K"}, "Weight [out_features, in_features], torch's layout")
        .input("bias", {"N"}, "Added to every row of the product")
        .output("y", {"B?", "M", "N"}, "x . weight^T + bias")
        .estimate("M", 1024)
        .estimate("K", 1024)
        .estimate("N", 1024)
        .cost("2*B*M*K*N", "4*(B*M*K + N*K + N + B*M*N)")
        // matmul's tolerance: the bias is one more rounding.
        .example("x=1024,1024 weight=1024,1024 bias=1024")
        .tolerance(1e-4, 5e-4)
        // matmul's algorithms with transpose_b, their conditions spelled in linear's dims.
        .algorithm("packed", "", 0,
                   "matmul's packed GEMM with transpose_b, the bias added as each tile is stored",
                   builder(true, kPacked))
        .algorithm("packed_b_once", "M >= " + std::to_string(kPackBOnceRows), 2,
                   "matmul's packed_b_once with transpose_b (M >= " +
                       std::to_string(kPackBOnceRows) + "), the bias added as each tile is stored",
                   builder(true, kPackedBOnce))
        .algorithm("small_m",
                   "M <= " + std::to_string(kSmallMRowsTb) +
                       " && N >= " + std::to_string(kMatmulSmallMTask),
                   5,
                   "matmul's small_m with transpose_b (M <= " + std::to_string(kSmallMRowsTb) +
                       ", N >= " + std::to_string(kMatmulSmallMTask) +
                       "): a decode step's Linear, weight read in place once",
                   builder(true, kSmallM));
    return d;
  }();
  return decl;
}

}  // namespace opforge::generators
