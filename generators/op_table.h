// The op table: the single list of every kernel variant the library ships, optimizer and NN
// ops alike. The builder plans it in one loop; the tests and the benchmarks iterate the
// registry it produces, so a variant added here is built, tested and benchmarked by
// construction.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dsl/resolved_op.h"
#include "generators/isa.h"

namespace opforge::generators {

struct VariantSpec {
  const dsl::OpDecl* decl;
  dsl::AttrValues attrs;          // unspecified attrs take their defaults
  std::vector<std::string> isas;  // names from isas()
  // Schedule param overrides: the elementwise recipe's (optimizer ops) or the algorithm's
  // (NN ops, NnArgs::schedule).
  std::map<std::string, int64_t> schedule = {};
  // ISAs (a subset of `isas`) that also get an Adams2019-autoscheduled twin of the variant,
  // "<variant id>__auto", at a lower priority (select() keeps the hand schedule; pick the
  // twin by id). Its schedule is generators/schedules/<id>.schedule.h, made by
  // `opforge autoschedule OP` (generators/auto_schedules.h). Optimizer ops only.
  std::vector<std::string> autoschedule = {};
  // Optimizer ops: tensor storage (dsl::Storage: narrow gradients, fp32 master + narrow model
  // copy). op_table() hands out rows whose `decl` already carries it.
  dsl::Storage storage = {};
  // NN ops: one of decl's algorithms ("" when it has one); the registry holds each algorithm
  // as its own variant and the runtime picks by shape.
  std::string algorithm = {};
  // A rule's `autoschedule` line: its twins have no schedule file; Adams2019 runs in the
  // building process when a twin is compiled (a cache miss), with the same pinned settings.
  bool autoschedule_at_build = false;

  // The row's op with its attrs resolved (throws std::invalid_argument naming the op).
  dsl::ResolvedOp resolve() const { return dsl::resolve(*decl, attrs, algorithm); }
};

// One row per (op, attrs[, algorithm]); each row is built for each of its ISAs. Bandwidth
// kernels for every optimizer (states, gradients) shape in the table are appended
// automatically.
const std::vector<VariantSpec>& op_table();

// The declaration of an op in the table (bandwidth kernels included); throws
// std::invalid_argument for an unknown name, listing the known ones.
const dsl::OpDecl& find_decl(const std::string& op);

// `decl` with storage `s`: one object per (decl, storage), alive for the process.
const dsl::OptimizerDecl& with_storage(const dsl::OptimizerDecl& decl, const dsl::Storage& s);

// The bandwidth kernel with the same traffic as this optimizer variant (arguments can depend
// on attrs, e.g. v_max with amsgrad), with the same storage: for a narrow-storage decl,
// bandwidth_s<S>_g<G>[_r<R>]_<tag> reads and writes the same dtypes.
const dsl::OptimizerDecl& bandwidth_for(const dsl::ResolvedOp& op);

// The machine-tuning family of a dense optimizer op (registry/builder/tuning.h): what its
// kernel moves per element, coarser than its bandwidth kernel so that a tuning run takes
// minutes: "s<states>_g<gradients>", then "_r" with a whole-tensor reduction pass, "_q8" with
// 8-bit states, "_narrow" with any 16- or 8-bit gradient, state or model copy.
std::string tuning_family_name(const dsl::ResolvedOp& op);

// The op `opforge bench` measures this variant against: bandwidth_for's for a dense
// optimizer op, the declared bandwidth_op of an NN op, "" for sparse ops (measured in rows/s)
// and ops without one.
std::string bandwidth_op_name(const dsl::ResolvedOp& op);

// y = x over N fp32 elements: the same-traffic yardstick (read x once, write y once) of the
// row-wise and elementwise NN ops.
const dsl::NnOpDecl& bandwidth_copy();
// y = a + b over N fp32 elements: two reads and one write (silu_mul's yardstick).
const dsl::NnOpDecl& bandwidth_add();

}  // namespace opforge::generators
