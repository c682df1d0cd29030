#include "dsl/resolved_op.h"

#include <cctype>
#include <stdexcept>

namespace opforge::dsl {

namespace {

[[noreturn]] void fail(const std::string& op, const std::string& msg) {
  throw std::invalid_argument("op '" + op + "': " + msg);
}

}  // namespace

ResolvedOp resolve(const OpDecl& decl, const AttrValues& given, const std::string& algorithm) {
  ResolvedOp r;
  r.decl = &decl;
  r.attrs = decl.resolve_attrs(given);
  r.algorithm = algorithm;
  if (const NnOpDecl* nn = r.nn()) {
    nn->find_algorithm(algorithm);  // throws for an unknown one
    return r;
  }
  if (!algorithm.empty()) fail(decl.name(), "an optimizer op has no algorithm '" + algorithm + "'");
  r.args = r.as_optimizer().args_for(r.attrs);
  for (const auto& a : r.args) {
    if (a.role == registry::Input::Role::state) r.states.push_back(a.name);
    if (a.role == registry::Input::Role::result) r.results.push_back(a.name);
  }
  return r;
}

const OptimizerDecl& ResolvedOp::as_optimizer() const {
  if (const OptimizerDecl* d = optimizer()) return *d;
  fail(name(), "is an NN op, not an optimizer op");
}

const NnOpDecl& ResolvedOp::as_nn() const {
  if (const NnOpDecl* d = nn()) return *d;
  fail(name(), "is an optimizer op, not an NN op");
}

const NnAlgorithm& ResolvedOp::nn_algorithm() const {
  return as_nn().find_algorithm(algorithm);
}

registry::Tolerance ResolvedOp::tolerance() const {
  if (const NnOpDecl* d = nn()) {
    const registry::Tolerance t = nn_algorithm().tolerance.value_or(decl->tolerance());
    if (d->activation_tensors().empty()) return t;
    return activation_tolerance(t, d->tensor_dtype(d->activation_tensors().front(), attrs));
  }
  return decl->tolerance();
}

std::string ResolvedOp::variant_id(const std::string& isa) const {
  std::string id = decl->name();
  for (const auto& a : decl->attrs()) {
    const std::string& value = attrs.at(a.name);
    if (!a.in_id_at_default && value == a.default_value) continue;
    std::string v = value;
    if (a.type == registry::Attr::Type::boolean) v = v == "true" ? "1" : "0";
    for (char& ch : v) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    id += "__" + a.name + "_" + v;
  }
  if (!algorithm.empty()) id += "__" + algorithm;
  return id + "__" + decl->storage_tag() + "__" + isa;
}

}  // namespace opforge::dsl
