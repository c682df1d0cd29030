// A parsed rule as a DSL declaration, so rule ops go through the same pipeline builder, cache,
// registry, descriptors and CLI as the C++ ops.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "dsl/op_decl.h"
#include "dsl/rules/rule_ast.h"

namespace opforge::dsl::rules {

// Arguments in the rule's order: states, inputs (gradients), hypers (fp32 scalars; their
// defaults are stated in the descriptions). Attrs become the op's attrs. The update builds
// Halide Exprs from the AST; norm2/sum become whole-tensor reductions.
OptimizerDecl to_decl(std::shared_ptr<const Rule> rule, const std::string& origin);

// A rule file's op: its declaration (fp32 storage; with `loss_scaling`, grad_scaling()'s
// attrs, scalar and result) and the storages its `storage` line asks for (f32 alone without
// one), each a set of variants (OptimizerDecl::with_storage).
struct RuleOp {
  OptimizerDecl decl;
  std::vector<Storage> storages;
  // `sparse`: the op sparse_<name>, the indexed-row form (renamed + sparse_rows: argument
  // indices, attr Tindices int32 | int64). fp32 storage only (narrow storage is for dense
  // ops, as for the C++ sparse ops) and no loss scaling (sparse_rows drops grad_scaling(): it
  // needs a whole-tensor reduction, which the sparse form has not).
  std::optional<OptimizerDecl> sparse;
  // `autoschedule`: the ISAs whose dense variants get an Adams2019 twin (empty: none).
  std::vector<std::string> autoschedule_isas;
  std::shared_ptr<const Rule> rule;
  std::string path, text;
  // Throws the RuleError of a builder-side problem at a line of this rule (a name clash of
  // sparse_<name>, a missing autoscheduler), rendered like the parser's.
  [[noreturn]] void fail(SourceLoc loc, const std::string& message) const;
};

// Reads and parses a rule file (RuleError for bad text, std::runtime_error when unreadable).
RuleOp load_rule_file(const std::string& path);

}  // namespace opforge::dsl::rules
