// The schedule recipe for 1-D elementwise (in-place) pipelines, kept apart from every
// algorithm so ops share it. Its parameters are declared once with default, range and
// description (like Halide GeneratorParams); the op table overrides them per variant.
//
// Shape of the schedule, for N elements and vector width V:
//   N <  serial_below : one serial loop of V-wide vectors (GuardWithIf tail) — a thread-pool
//                       dispatch costs 3-8 us, more than the whole update at N = 1e4.
//   N >= serial_below : `tasks` parallel chunks whose size is computed at run time,
//                       ceil(N / (tasks*V*unroll)) * V*unroll, each a loop of V-wide vectors.
//                       A fixed chunk (65536) left the last task running masked vectors past
//                       the data: Adam at N = 1e4 took 400-600 us (measured on Halide 14).
//   double_buffer = 1  : each range (a task's chunk, or the whole serial loop) runs in blocks
//                       of db_grain elements; the inputs of the next block are copied into
//                       the other of two slots by an async producer task meanwhile.
//   name@B (vector, unroll, tasks, chunk): the value for N >= B on the parallel path, a size
//                       bucket (`opforge tune` writes them where one size range wants other
//                       params); each bucket is one more specialization of the definition.
// Tails are GuardWithIf: the kernels run in place, and ShiftInwards re-reads elements it has
// already written (wrong results when aliased); RoundUp would write past the end.
#pragma once

#include <Halide.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dsl/schedule_params.h"

namespace opforge::dsl {

class ElementwiseSchedule {
 public:
  static const char* recipe_name() { return "elementwise"; }
  static const std::vector<ScheduleParamDecl>& params();
  // Their names, comma-separated, in declaration order (help texts).
  static std::string param_names();

  // Given values (possibly partial) -> every param resolved for `target`, range-checked;
  // size-bucket keys (name@B) are kept as given, range-checked like their param.
  // Throws std::invalid_argument naming the param.
  static std::map<std::string, int64_t> resolve(const std::map<std::string, int64_t>& given,
                                                const Halide::Target& target);

  // Params that may differ per size bucket, and a key's (name, B) when it is "name@B"
  // (std::invalid_argument for a malformed bucket key).
  static bool bucketable(const std::string& name);
  static std::optional<std::pair<std::string, int64_t>> split_bucket_key(const std::string& key);
  // The bucket bounds in `p`, ascending, and the plain params in force at N = n.
  static std::vector<int64_t> bucket_bounds(const std::map<std::string, int64_t>& p);
  static std::map<std::string, int64_t> params_at(const std::map<std::string, int64_t>& p,
                                                  int64_t n);

  // Applies the schedule to a 1-D output Func over `i`, and to a copy specialized on each of
  // `fast_paths` (conditions over scalars, tried in order). `n`: the element count, needed
  // when `out` is not an output (an intermediate computed at root); default: its extent.
  // `stage`: wrappers of the inputs `out` reads (`input.in(out)`), double-buffered per block
  // of db_grain elements when double_buffer is 1 (dsl/double_buffer.h); else inlined.
  // `exact`: exact_divides' condition, when the update holds its two forms (select on it);
  // each copy is made twice, under `exact` and under its negation.
  static void apply(Halide::Func out, const Halide::Var& i, const std::map<std::string, int64_t>& p,
                    const std::vector<Halide::Expr>& fast_paths = {},
                    Halide::Expr n = Halide::Expr(), const std::vector<Halide::Func>& stage = {},
                    const Halide::Expr& exact = Halide::Expr());
  // `n < divide_below` when the update's 1/x is to be the exact divide for small N and the
  // estimate above (divide_below > 0, divide 0, no double buffering); undefined otherwise.
  // The update selects its form on it and apply() specializes on it: the same Expr in both.
  static Halide::Expr exact_divides(const std::map<std::string, int64_t>& p, const Halide::Expr& n);
  // `inputs`' wrappers for `reader` (`input.in(reader)`), apply's `stage`, when `p` turns
  // double buffering on; none otherwise.
  static std::vector<Halide::Func> staged_inputs(const std::vector<Halide::Func>& inputs,
                                                 const Halide::Func& reader,
                                                 const std::map<std::string, int64_t>& p);
  // A whole-tensor sum `total() += term(r)` (fp64), computed at root before the update:
  // `tasks` parallel partial sums (rfactor) of vectorized partial sums (rfactor again).
  static void apply_reduction(Halide::Func total, const Halide::RDom& r,
                              const std::map<std::string, int64_t>& p);
  // 8-bit states (dsl/quant8.h): `out(i)` and `absmax_out(b)` fused per block of `block`
  // elements (compute_with), runs of blocks in `tasks` parallel chunks; per block the
  // `per_block` Funcs (over (element, block), `vector`-wide: the states' new values and the
  // decoded states worth a buffer), their 16-lane maxima (`lanes`) and the block's scales are
  // computed into small buffers first, so each element is read from memory once; `out` then
  // stores the new values and the codes.
  static void apply_blockwise(Halide::Func out, Halide::Func absmax_out, Halide::Func lanes,
                              Halide::Func scales, const std::vector<Halide::Func>& per_block,
                              const Halide::Var& i, int block,
                              const std::map<std::string, int64_t>& p);
  static std::string blockwise_summary(const std::map<std::string, int64_t>& p, int block);
  // Sparse rows: the update over indices stays serial (duplicates apply in order); each row
  // is `vector`-wide vectors over the columns.
  static void apply_sparse(Halide::Func out, const Halide::Var& col,
                           const std::map<std::string, int64_t>& p,
                           const std::vector<Halide::Expr>& fast_paths = {});

  // Multi-tensor form, `out(c, k)` over K chunks of C elements (C a multiple of 16): runs of
  // whole chunks, about 4 per task for balance (chunks are equal, a model's tensors are not),
  // in parallel; each chunk in `vector`-wide vectors. Per-chunk sums likewise: `lanes(lane, k)`
  // vectorized over its 16 lanes, computed per chunk inside `chunk`'s parallel runs.
  static void apply_multi_tensor(Halide::Func out, const Halide::Var& c, const Halide::Var& k,
                                 const Halide::Expr& chunks,
                                 const std::map<std::string, int64_t>& p,
                                 const std::vector<Halide::Expr>& fast_paths = {});
  static void apply_multi_tensor_sums(Halide::Func chunk, Halide::Func lanes,
                                      const Halide::Var& lane, const Halide::Var& k,
                                      const Halide::Expr& chunks,
                                      const std::map<std::string, int64_t>& p);
  static std::string multi_tensor_summary(const std::map<std::string, int64_t>& p);

  static std::string summary(const std::map<std::string, int64_t>& p);
  // What a summary adds for a divide_below the update could not take (exact_divides declined
  // it: one form of 1/x), and whether a summary says so (tune reads a preview's back).
  static std::string divide_below_declined(int64_t below);
  static bool says_divide_below_declined(const std::string& summary);
  static std::string sparse_summary(const std::map<std::string, int64_t>& p);
};

}  // namespace opforge::dsl
