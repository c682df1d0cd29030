#include "dsl/nn_op_decl.h"

#include <set>
#include <stdexcept>

#include "opforge/scalar_domain.h"
#include "registry/format/shape_expr.h"

namespace opforge::dsl {

using registry::Attr;

namespace {

const std::string& attr_of(const AttrValues& attrs, const std::string& name) {
  auto it = attrs.find(name);
  if (it == attrs.end()) throw std::invalid_argument("no attr '" + name + "'");
  return it->second;
}

}  // namespace

Halide::Func output_func(const std::string& name) {
  return Halide::Func{Halide::Internal::Function(name)};
}

bool NnArgs::attr_bool(const std::string& name) const {
  return attr_of(attrs, name) == "true";
}
int64_t NnArgs::attr_int(const std::string& name) const {
  return std::stoll(attr_of(attrs, name));
}
const std::string& NnArgs::attr_string(const std::string& name) const {
  return attr_of(attrs, name);
}

// kind "nn", or "bandwidth" for a same-traffic yardstick.
NnOpDecl::NnOpDecl(std::string name) : DeclBuilder(std::move(name), "nn", {1e-5, 1e-6}) {}

NnOpDecl& NnOpDecl::input(const std::string& name, std::vector<std::string> dims,
                          const std::string& description, registry::DType dtype) {
  Arg a;
  a.tensor = {name, std::move(dims), description, dtype};
  args_.push_back(std::move(a));
  return *this;
}

NnOpDecl& NnOpDecl::scalar(const std::string& name, const std::string& description,
                           registry::DType dtype) {
  Arg a;
  a.is_scalar = true;
  a.scalar = {name, dtype, description};
  args_.push_back(std::move(a));
  return *this;
}

NnOpDecl& NnOpDecl::output(const std::string& name, std::vector<std::string> dims,
                           const std::string& description, registry::DType dtype) {
  outputs_.push_back({name, std::move(dims), description, dtype});
  return *this;
}

NnOpDecl& NnOpDecl::domain(const std::string& scalar, const std::string& text) {
  for (auto& a : args_) {
    if (!a.is_scalar || a.scalar.name != scalar) continue;
    try {
      a.scalar.domain = registry::ScalarDomain::parse(text).text();
    } catch (const std::invalid_argument& e) {
      fail(e.what());
    }
    return *this;
  }
  fail("domain: no scalar '" + scalar + "' (declare it first)");
}

NnOpDecl& NnOpDecl::check(const std::string& condition, const std::string& message) {
  checks_.push_back({condition, message});
  return *this;
}

NnOpDecl& NnOpDecl::algorithm(const std::string& name, const std::string& applies_when,
                              int priority, const std::string& description, NnBuildFn build) {
  algorithms_.push_back({name, applies_when, priority, description, std::move(build)});
  return *this;
}

NnOpDecl& NnOpDecl::algorithm_tolerance(const std::string& name, double rtol, double atol) {
  for (auto& a : algorithms_) {
    if (a.name == name) {
      a.tolerance = registry::Tolerance{rtol, atol};
      return *this;
    }
  }
  fail("no algorithm '" + name + "' to set a tolerance for");
}

std::vector<std::string> NnOpDecl::argument_names() const {
  std::vector<std::string> names;
  for (const auto& x : args_) names.push_back(x.name());
  return names;
}

NnOpDecl& NnOpDecl::estimate(const std::string& dim, int64_t extent) {
  estimates_[dim] = extent;
  return *this;
}
NnOpDecl& NnOpDecl::cost(std::string flops, std::string bytes) {
  cost_.flops = std::move(flops);
  cost_.bytes = std::move(bytes);
  return *this;
}
NnOpDecl& NnOpDecl::example(std::string call) {
  cost_.example = std::move(call);
  return *this;
}
NnOpDecl& NnOpDecl::bandwidth_op(std::string op) {
  bandwidth_op_ = std::move(op);
  return *this;
}

const NnAlgorithm& NnOpDecl::find_algorithm(const std::string& name) const {
  for (const auto& a : algorithms_) {
    if (a.name == name) return a;
  }
  fail("no algorithm '" + name + "'");
}

void NnOpDecl::validate() const {
  std::set<std::string> names, dim_names;
  auto unique = [&](const std::string& n, const char* what) {
    if (!registry::is_valid_identifier(n)) fail(std::string(what) + " name '" + n + "'");
    if (!names.insert(n).second) fail("name '" + n + "' declared twice");
  };
  for (const auto& a : args_) {
    unique(a.name(), a.is_scalar ? "scalar" : "input");
    if (a.is_scalar) {
      if (a.scalar.dtype == registry::DType::i32) dim_names.insert(a.scalar.name);
      continue;
    }
    for (size_t k = 0; k < a.tensor.dims.size(); ++k) {
      std::string d = a.tensor.dims[k];
      if (k == 0 && !d.empty() && d.back() == '?') d.pop_back();
      if (!registry::is_valid_identifier(d))
        fail("input '" + a.tensor.name + "' dim '" + a.tensor.dims[k] + "' is not a name");
      dim_names.insert(d);
    }
  }
  for (const auto& o : outputs_) unique(o.name, "output");
  for (const auto& a : attrs_) {
    if (names.count(a.name)) fail("attr '" + a.name + "' has an argument's name");
    if (a.type == Attr::Type::boolean || a.type == Attr::Type::integer) dim_names.insert(a.name);
  }
  auto check = [&](const std::string& text, const std::string& where) {
    try {
      for (const auto& n : registry::ShapeExpr::parse(text).names()) {
        if (!dim_names.count(n))
          fail(where + ": '" + n + "' is not a dim, an int32 scalar or an int/bool attr");
      }
    } catch (const registry::ShapeExprError& e) {
      fail(where + ": " + e.what());
    }
  };
  if (outputs_.empty()) fail("declares no output");
  for (const auto& o : outputs_) {
    for (size_t k = 0; k < o.dims.size(); ++k) {
      std::string e = o.dims[k];
      if (k == 0 && !e.empty() && e.back() == '?') e.pop_back();
      check(e, "output '" + o.name + "' dim " + std::to_string(k));
    }
  }
  for (const auto& c : checks_) check(c.condition, "check");
  if (algorithms_.empty()) fail("declares no algorithm");
  std::set<std::string> algos;
  for (const auto& a : algorithms_) {
    if (!algos.insert(a.name).second) fail("algorithm '" + a.name + "' declared twice");
    if (algorithms_.size() > 1 && !registry::is_valid_op_name(a.name))
      fail("several algorithms: each needs a name (^[a-z][a-z0-9_]*$)");
    if (!a.applies_when.empty()) check(a.applies_when, "algorithm '" + a.name + "'");
    if (!a.build) fail("algorithm '" + a.name + "' has no build function");
  }
  if (!cost_.flops.empty()) check(cost_.flops, "cost.flops");
  if (!cost_.bytes.empty()) check(cost_.bytes, "cost.bytes");
}

}  // namespace opforge::dsl
