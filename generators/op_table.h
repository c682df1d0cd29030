// The op table: the single list of every kernel variant the library ships. The builder,
// the tests and the benchmarks iterate it (through the registry it produces), so a variant
// added here is built, tested and benchmarked by construction.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dsl/op_decl.h"
#include "generators/isa.h"

namespace opforge::generators {

struct VariantSpec {
  const dsl::OptimizerDecl* decl;
  dsl::AttrValues attrs;                    // unspecified attrs take their defaults
  std::vector<std::string> isas;            // names from isas()
  std::map<std::string, int64_t> schedule;  // elementwise recipe overrides
  // ISAs (a subset of `isas`) that also get an Adams2019-autoscheduled twin of the variant,
  // "<variant id>__auto", at a lower priority (select() keeps the hand schedule; pick the
  // twin by id). Its schedule is generators/schedules/<id>.schedule.h, made by
  // `opforge autoschedule OP` (generators/auto_schedules.h).
  std::vector<std::string> autoschedule = {};
  // Tensor storage (dsl::Storage: narrow gradients, fp32 master + narrow model copy). op_table()
  // hands out rows whose `decl` already carries it (decl->storage() == storage), so everything
  // that reads row.decl (the builder, tests, bandwidth_for) sees the typed arguments.
  dsl::Storage storage = {};
};

// One row per (op, attrs); each row is built for each of its ISAs. Bandwidth kernels for
// every (states, gradients) shape in the table are appended automatically.
const std::vector<VariantSpec>& op_table();

// "<op>__<attr>_<value>...__<storage>__<isa>": a C identifier, unique in the table. <storage>
// is decl.storage().tag(): "f32", or e.g. "bf16m" / "f16m" for fp32 master weights with a
// narrow gradient and model copy.
std::string variant_id(const dsl::OptimizerDecl& decl, const dsl::AttrValues& resolved_attrs,
                       const std::string& isa);

// The declaration of an op in the table (bandwidth kernels included); throws
// std::invalid_argument for an unknown name.
const dsl::OptimizerDecl& find_decl(const std::string& op);

// The bandwidth kernel with the same traffic as the variant of `decl` with these attrs
// (arguments can depend on attrs, e.g. v_max with amsgrad), with the same storage: for a
// narrow-storage decl, bandwidth_s<S>_g<G>[_r<R>]_<tag> reads and writes the same dtypes.
// `decl` with storage `s`: one object per (decl, storage), alive for the process.
const dsl::OptimizerDecl& with_storage(const dsl::OptimizerDecl& decl, const dsl::Storage& s);

const dsl::OptimizerDecl& bandwidth_for(const dsl::OptimizerDecl& decl,
                                        const dsl::AttrValues& resolved_attrs);

}  // namespace opforge::generators

#include "dsl/nn_op_decl.h"

namespace opforge::generators {

// An NN variant: one algorithm of an NN op with these attrs, built for each ISA. Together with
// op_table() this is the whole list the library ships (the builder plans both).
struct NnVariantSpec {
  const dsl::NnOpDecl* decl;
  dsl::AttrValues attrs;  // unspecified attrs take their defaults
  std::string algorithm;  // one of decl->algorithms()
  std::vector<std::string> isas;
};
const std::vector<NnVariantSpec>& nn_op_table();

// "<op>[__<attr>_<value>...][__<algorithm>]__f32__<isa>".
std::string nn_variant_id(const dsl::NnOpDecl& decl, const dsl::AttrValues& resolved_attrs,
                          const std::string& algorithm, const std::string& isa);

// y = x over N fp32 elements: the same-traffic yardstick (read x once, write y once) of the
// row-wise and elementwise NN ops.
const dsl::NnOpDecl& bandwidth_copy();

}  // namespace opforge::generators
