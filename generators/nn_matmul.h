// matmul internals shared by its algorithms' files (nn_matmul.cpp declares the op) and by
// conv2d's 1x1 algorithm, which runs matmul's packed GEMM over the input's pixels.
#pragma once

#include <Halide.h>

#include "dsl/nn_op_decl.h"

namespace opforge::generators {

// small_m's parallel task along n: also its condition's least N (nn_matmul_small_m.cpp).
constexpr int kMatmulSmallMTask = 128;

// The packed algorithm's C tile columns; on AVX-512 its most tile rows too (8 x 32).
constexpr int kMatmulTileColumns = 256;

// What the matmul algorithms read: matmul's a and b under its transpose attrs, or linear's x
// and weight (b transposed: torch's [out, in] weight) plus its bias, added per output column
// in the output stage.
struct MatmulInputs {
  Halide::ImageParam a, b;  // [B?, rows, cols]; linear's weight has no batch dim
  bool ta = false, tb = false;
  Halide::ImageParam bias;  // linear only (defined() false for matmul)
  std::string out = "c";
  static MatmulInputs from(const dsl::NnArgs& args, bool linear);
  // Element (col, row) of a or b at `batch` (a 2-D tensor ignores it), Halide order.
  static Halide::Expr at(const Halide::ImageParam& p, const Halide::Expr& col,
                         const Halide::Expr& row, const Halide::Expr& batch);
  // The output's value from the product: itself, or plus the bias of column n.
  Halide::Expr epilogue(const Halide::Expr& product, const Halide::Expr& n) const;
};

// A few rows of op(a) against a large op(b): b read in place, once (nn_matmul_small_m.cpp).
dsl::NnKernel build_matmul_small_m(const MatmulInputs& in, const dsl::NnArgs& args);

// The packed algorithm's register block and cache tiles (nn_matmul.cpp's schedule comment
// says how they were chosen).
struct MatmulTiles {
  int rn;                       // register block columns: 2 vectors
  int rm;                       // register block rows
  int kc;                       // K chunk: one packed panel of A (mt x kc) and of B (kc x nt)
  int kc_long_k = 256;          // K chunk when K > long_k
  int long_k = 2048;            // K above which kc_long_k replaces kc
  int nt = kMatmulTileColumns;  // C tile columns
  int mt;  // most C tile rows (a multiple of rm); one C tile is one parallel task
  // The larger K chunk: what a double-buffered panel folds its K storage to.
  int kc_max() const { return kc > kc_long_k ? kc : kc_long_k; }
};
MatmulTiles matmul_tiles(const Halide::Target& target);

// The packed GEMM, c(n, m, bt) = sum_k op(a)(k, m, bt) * op(b)(n, k, bt), through packed panels
// of op(a) and op(b) per K chunk. opa and opb clamp their own reads: register blocks and the
// last K chunk overhang the data.
struct PackedGemm {
  MatmulTiles t;
  // Set before schedule_packed_gemm: op(a)'s k decomposes in groups of this many (conv2d's
  // (channel, kh, kw) of a 3x3 filter: 9); the A pack then runs a group's elements unrolled,
  // so that its index arithmetic folds to constants (vectorized along k it was a division per
  // lane and a gather). 0: none.
  int a_k_group = 0;
  Halide::Var n{"n"}, m{"m"}, bt{"bt"};
  Halide::Func prod;  // prod(n, m, bt): the product, computed per tile of its consumer
  Halide::Func acc, apack, bpack;
  // Where defined, bpack transposes 16 x 16 blocks of a k-contiguous op(b) when this holds
  // (define_packed_gemm's opb_rows on AVX-512); its schedule specializes on it.
  Halide::Expr b_transposed_blocks;
  // For the schedule: the packs' and the register block's vars, the K chunk and chunks.
  Halide::Var k{"k"}, ko{"ko"}, ni{"ni"}, no{"no"}, mi{"mi"}, mo{"mo"};
  Halide::RDom r, rko;
};
// a_batched false: op(a) is the same for every batch (opa read at bt = 0), so the A panel has
// no batch dim and a tile over several batches packs it once (conv2d's weights).
// opb_rows: op(b) without the clamp of k, given where op(b)'s columns are contiguous along k
// in memory (b transposed): with AVX-512 the B pack then transposes 16 x 16 blocks
// (dsl::transposed_lane), each read as 16 dense row vectors, where the K chunks are whole
// blocks (K a multiple of 16 and of the chunk: every block lies within K).
PackedGemm define_packed_gemm(const Halide::Func& opa, const Halide::Func& opb,
                              const Halide::Expr& K, const Halide::Target& target,
                              bool a_batched = true, const Halide::Func& opb_rows = {});

// Tile rows of at most mt rows that M rows need.
Halide::Expr packed_gemm_tile_rows(const PackedGemm& g, const Halide::Expr& M);

// Height of the tile rows when M rows split into `tile_rows` (default: packed_gemm_tile_rows)
// rows of equal height, a multiple of rm (the runtime's static split then gives every thread
// whole tile rows' work).
Halide::Expr packed_gemm_tile_height(const PackedGemm& g, const Halide::Expr& M,
                                     const Halide::Expr& tile_rows = Halide::Expr());

// prod computed per tile of its consumer at `tile`; a_k_contiguous: op(a)'s rows are
// contiguous along k in memory (a not transposed), b_k_contiguous: op(b)'s columns are (b
// transposed). A tile must start at a multiple of rn columns and rm rows. batches_in_tile: a
// tile may span several batches; per K chunk they share one A panel (with a_batched false)
// and the B panel packs them all.
// pack_b_once: op(b)'s panels packed for the whole call before the tiles (compute_root), read
// by every tile row, instead of per tile and K chunk.
void schedule_packed_gemm(PackedGemm& g, const Halide::LoopLevel& tile, bool a_k_contiguous,
                          bool b_k_contiguous, bool double_buffer, bool batches_in_tile = false,
                          bool pack_b_once = false);

}  // namespace opforge::generators
