// An optimizer op, declared once: name, arguments in the op's (TensorFlow) order, compile-time
// attributes, and the update as Halide Exprs. The Halide pipeline, the registry descriptor and
// the CLI help all come from this one declaration.
//
//   OptimizerDecl("apply_sign_sqrt")
//       .state("var", "Variable to update")
//       .scalar("lr", "Learning rate")
//       .grad("grad", "The gradient")
//       .update([](const UpdateContext& c) {
//         return Updates{{"var", c["var"] - c["lr"] * sign(c["grad"]) * sqrt(abs(c["grad"]))}};
//       });
//
// Updates are simultaneous assignments: every Expr reads the old values of the states.
#pragma once

#include <Halide.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dsl/math.h"
#include "registry/format/descriptor.h"

namespace opforge::dsl {

using Halide::Expr;
using AttrValues = std::map<std::string, std::string>;  // name -> canonical value

struct ArgDecl {
  std::string name;
  registry::Input::Role role = registry::Input::Role::state;
  std::string description;
};

struct AttrDecl {
  std::string name;
  registry::Attr::Type type = registry::Attr::Type::boolean;
  std::string default_value;  // canonical
  std::string description;
  std::vector<std::string> choices;  // string attrs only
};

// What an update function sees: the current element of every tensor argument and every
// run-time scalar (as fp32 Exprs), and the compile-time attribute values.
class UpdateContext {
 public:
  UpdateContext(std::map<std::string, Expr> values, AttrValues attrs, std::string op)
      : values_(std::move(values)), attrs_(std::move(attrs)), op_(std::move(op)) {}
  Expr operator[](const std::string& name) const;
  bool attr_bool(const std::string& name) const;
  int64_t attr_int(const std::string& name) const;
  double attr_float(const std::string& name) const;
  const std::string& attr_string(const std::string& name) const;

 private:
  const std::string& attr(const std::string& name) const;
  std::map<std::string, Expr> values_;
  AttrValues attrs_;
  std::string op_;
};

using Updates = std::vector<std::pair<std::string, Expr>>;  // state -> new value
using UpdateFn = std::function<Updates(const UpdateContext&)>;

class OptimizerDecl {
 public:
  explicit OptimizerDecl(std::string name);

  // Arguments, in the op's argument order (the kernel's and the C API's order too).
  OptimizerDecl& state(const std::string& name, const std::string& description);
  OptimizerDecl& grad(const std::string& name, const std::string& description);
  OptimizerDecl& scalar(const std::string& name, const std::string& description);

  OptimizerDecl& attr_bool(const std::string& name, bool def, const std::string& description);
  OptimizerDecl& attr_int(const std::string& name, int64_t def, const std::string& description);
  OptimizerDecl& attr_float(const std::string& name, double def, const std::string& description);
  OptimizerDecl& attr_string(const std::string& name, const std::string& def,
                             std::vector<std::string> choices, const std::string& description);

  OptimizerDecl& summary(std::string s);
  OptimizerDecl& formula(std::string s);
  OptimizerDecl& reference(std::string s);
  OptimizerDecl& version(int v);
  OptimizerDecl& kind(std::string k);  // "optimizer" (default) or "bandwidth"
  // Accepted error against the fp64 reference: |k - ref| <= atol + rtol * |ref|.
  OptimizerDecl& tolerance(double rtol, double atol);
  OptimizerDecl& update(UpdateFn fn);

  const std::string& name() const { return name_; }
  const std::vector<ArgDecl>& args() const { return args_; }
  const std::vector<AttrDecl>& attrs() const { return attrs_; }
  const std::string& summary() const { return summary_; }
  const std::string& formula() const { return formula_; }
  const std::string& reference() const { return reference_; }
  const std::string& kind() const { return kind_; }
  int version() const { return version_; }
  registry::Tolerance tolerance() const { return tolerance_; }
  const UpdateFn& update_fn() const { return update_; }

  std::vector<std::string> states() const;
  // Defaults filled in, every value checked against its declaration (type, choices);
  // unknown names rejected. Throws std::invalid_argument naming the op and the attr.
  AttrValues resolve_attrs(const AttrValues& given) const;
  // Checks the declaration itself (names, duplicates, at least one state, an update).
  void validate() const;

 private:
  OptimizerDecl& add_arg(const std::string& name, registry::Input::Role role,
                         const std::string& description);
  OptimizerDecl& add_attr(AttrDecl a);
  std::string name_;
  std::vector<ArgDecl> args_;
  std::vector<AttrDecl> attrs_;
  std::string summary_, formula_, reference_, kind_ = "optimizer";
  int version_ = 1;
  registry::Tolerance tolerance_{1e-6, 1e-7};
  UpdateFn update_;
};

// Canonical attribute text: bool "true"/"false", int decimal, float "%.17g".
std::string canonical_bool(bool b);
std::string canonical_int(int64_t v);
std::string canonical_float(double v);
// Parses user text for an attr of the given type into its canonical form; throws
// std::invalid_argument on bad text.
std::string canonicalize_attr(const AttrDecl& a, const std::string& text);

}  // namespace opforge::dsl
