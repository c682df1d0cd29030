// What every op declaration has, optimizer (dsl/op_decl.h) or NN (dsl/nn_op_decl.h): a name,
// texts, compile-time attrs and the accepted error, with the chained setters that declare
// them (DeclBuilder). The op table, the builder and the descriptor writer handle ops through
// this base; dsl/resolved_op.h is one declaration with one variant's attrs resolved.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "opforge/descriptor.h"

namespace opforge::dsl {

using AttrValues = std::map<std::string, std::string>;  // name -> canonical value

struct AttrDecl {
  std::string name;
  registry::Attr::Type type = registry::Attr::Type::boolean;
  std::string default_value;  // canonical
  std::string description;
  std::vector<std::string> choices;  // string attrs only
  // Variant ids name every attr's value; an attr added to existing ops (grad_scaling()) is
  // named only off its default, so the ids (and schedule files) of existing variants stay.
  bool in_id_at_default = true;
};

// Canonical attribute text: bool "true"/"false", int decimal, float "%.17g".
std::string canonical_bool(bool b);
std::string canonical_int(int64_t v);
std::string canonical_float(double v);
// Parses user text for an attr of the given type into its canonical form; throws
// std::invalid_argument on bad text.
std::string canonicalize_attr(const AttrDecl& a, const std::string& text);

class OpDecl {
 public:
  virtual ~OpDecl() = default;

  const std::string& name() const { return name_; }
  const std::vector<AttrDecl>& attrs() const { return attrs_; }
  const std::string& summary() const { return summary_; }
  const std::string& formula() const { return formula_; }
  const std::string& reference() const { return reference_; }
  const std::string& kind() const { return kind_; }
  int version() const { return version_; }
  registry::Tolerance tolerance() const { return tolerance_; }

  // Defaults filled in, every value checked against its declaration (type, choices); unknown
  // names rejected. Throws std::invalid_argument naming the op and the attr.
  AttrValues resolve_attrs(const AttrValues& given) const;
  // The storage part of variant ids: "f32" unless an optimizer's Storage narrows tensors.
  virtual std::string storage_tag() const { return "f32"; }
  // Checks the declaration itself; throws std::invalid_argument naming the op.
  virtual void validate() const = 0;

 protected:
  OpDecl(std::string name, std::string kind, registry::Tolerance tolerance);
  OpDecl(const OpDecl&) = default;
  OpDecl& operator=(const OpDecl&) = default;
  [[noreturn]] void fail(const std::string& msg) const;
  // The op's argument names, which an attr may not take.
  virtual std::vector<std::string> argument_names() const = 0;
  void add_attr(AttrDecl a);
  void set_named_in_id_off_default(const std::string& attr);

  std::string name_;
  std::vector<AttrDecl> attrs_;
  std::string summary_, formula_, reference_, kind_;
  int version_ = 1;
  registry::Tolerance tolerance_;
};

// The setters both kinds of declaration share; each returns the derived declaration, so a
// declaration chains its own setters and these alike.
template <class Self>
class DeclBuilder : public OpDecl {
 public:
  using OpDecl::formula;
  using OpDecl::kind;
  using OpDecl::reference;
  using OpDecl::summary;
  using OpDecl::tolerance;
  using OpDecl::version;

  Self& attr_bool(const std::string& name, bool def, const std::string& description) {
    return attr({name, registry::Attr::Type::boolean, canonical_bool(def), description, {}});
  }
  Self& attr_int(const std::string& name, int64_t def, const std::string& description) {
    return attr({name, registry::Attr::Type::integer, canonical_int(def), description, {}});
  }
  Self& attr_float(const std::string& name, double def, const std::string& description) {
    return attr({name, registry::Attr::Type::real, canonical_float(def), description, {}});
  }
  Self& attr_string(const std::string& name, const std::string& def,
                    std::vector<std::string> choices, const std::string& description) {
    return attr({name, registry::Attr::Type::string, def, description, std::move(choices)});
  }
  // Variant ids name attr `name` only off its default (AttrDecl::in_id_at_default = false):
  // an attr added to an existing op keeps the ids (and schedule files) of its old variants.
  Self& named_in_id_off_default(const std::string& name) {
    set_named_in_id_off_default(name);
    return self();
  }
  Self& summary(std::string s) { return set(summary_, std::move(s)); }
  Self& formula(std::string s) { return set(formula_, std::move(s)); }
  Self& reference(std::string s) { return set(reference_, std::move(s)); }
  Self& kind(std::string k) { return set(kind_, std::move(k)); }
  Self& version(int v) { return set(version_, v); }
  // Accepted error against the fp64 reference: |k - ref| <= atol + rtol * |ref|.
  Self& tolerance(double rtol, double atol) { return set(tolerance_, {rtol, atol}); }

 protected:
  using OpDecl::OpDecl;

 private:
  Self& self() { return static_cast<Self&>(*this); }
  Self& attr(AttrDecl a) {
    add_attr(std::move(a));
    return self();
  }
  template <class T>
  Self& set(T& field, T value) {
    field = std::move(value);
    return self();
  }
};

}  // namespace opforge::dsl
