// A parsed rule as a DSL declaration, so rule ops go through the same pipeline builder, cache,
// registry, descriptors and CLI as the C++ ops.
#pragma once

#include <memory>
#include <string>

#include "dsl/op_decl.h"
#include "dsl/rules/rule_ast.h"

namespace opforge::dsl::rules {

// Arguments in the rule's order: states, inputs (gradients), hypers (fp32 scalars; their
// defaults are stated in the descriptions). Attrs become the op's attrs. The update builds
// Halide Exprs from the AST; norm2/sum become whole-tensor reductions.
OptimizerDecl to_decl(std::shared_ptr<const Rule> rule, const std::string& origin);

// A rule file's op: its declaration (fp32 storage) and the storages its `storage` line asks
// for (f32 alone without one), each a set of variants (OptimizerDecl::with_storage).
struct RuleOp {
  OptimizerDecl decl;
  std::vector<Storage> storages;
};

// Reads and parses a rule file (RuleError for bad text, std::runtime_error when unreadable).
RuleOp load_rule_file(const std::string& path);

}  // namespace opforge::dsl::rules
