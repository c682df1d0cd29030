// One variant's op: a declaration (optimizer or NN) with its attrs resolved once, and what
// follows from them worked out once: the optimizer's arguments, states and results, the NN
// op's algorithm and the tolerance the variant is held to. The pipeline builders, the
// descriptor writer, the fp64 golden and the tests read these instead of re-deriving them.
#pragma once

#include <string>
#include <vector>

#include "dsl/nn_op_decl.h"
#include "dsl/op_decl.h"

namespace opforge::dsl {

struct ResolvedOp {
  const OpDecl* decl = nullptr;
  AttrValues attrs;       // every declared attr, canonical
  std::string algorithm;  // NN: one of its algorithms ("" when it has one); optimizer: ""
  // Optimizer ops: the variant's arguments in order (those whose condition holds, typed),
  // and the names of its states and results among them, in that order.
  std::vector<ArgDecl> args;
  std::vector<std::string> states, results;

  const std::string& name() const { return decl->name(); }
  // The declaration as its kind; null when it is the other kind.
  const OptimizerDecl* optimizer() const { return dynamic_cast<const OptimizerDecl*>(decl); }
  const NnOpDecl* nn() const { return dynamic_cast<const NnOpDecl*>(decl); }
  // The same, throwing std::invalid_argument naming the op when it is the other kind.
  const OptimizerDecl& as_optimizer() const;
  const NnOpDecl& as_nn() const;
  const NnAlgorithm& nn_algorithm() const;
  // The accepted error: the NN algorithm's own when it has one, else the op's.
  registry::Tolerance tolerance() const;
  // "<op>[__<attr>_<value>...][__<algorithm>]__<storage>__<isa>": a C identifier. Attrs are
  // named in declaration order (bools as 1/0), except those declared named_in_id_off_default
  // while at their default.
  std::string variant_id(const std::string& isa) const;
};

// Resolves `given` against the declaration (defaults filled, values checked, unknown names
// rejected) and checks `algorithm` (NN: a declared one; optimizer: empty). Throws
// std::invalid_argument naming the op.
ResolvedOp resolve(const OpDecl& decl, const AttrValues& given = {},
                   const std::string& algorithm = "");

}  // namespace opforge::dsl
