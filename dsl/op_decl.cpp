#include "dsl/op_decl.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include "dsl/optimizer_pipeline.h"

namespace opforge::dsl {

using registry::Attr;
using registry::Input;

namespace {

[[noreturn]] void fail(const std::string& op, const std::string& msg) {
  throw std::invalid_argument("op '" + op + "': " + msg);
}

}  // namespace

Expr UpdateContext::operator[](const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) fail(op_, "update reads '" + name + "', which is not an argument");
  return it->second;
}

const std::string& UpdateContext::attr(const std::string& name) const {
  auto it = attrs_.find(name);
  if (it == attrs_.end()) fail(op_, "update reads attr '" + name + "', which is not declared");
  return it->second;
}

bool UpdateContext::attr_bool(const std::string& name) const {
  return attr(name) == "true";
}
int64_t UpdateContext::attr_int(const std::string& name) const {
  return std::strtoll(attr(name).c_str(), nullptr, 10);
}
double UpdateContext::attr_float(const std::string& name) const {
  return std::strtod(attr(name).c_str(), nullptr);
}
const std::string& UpdateContext::attr_string(const std::string& name) const {
  return attr(name);
}

Expr UpdateContext::sum(const Expr& e) const {
  if (!reducer_) fail(op_, "whole-tensor reductions are not available in this op's form");
  return Halide::cast(Halide::Float(32), reducer_(e, false, false));
}

Expr UpdateContext::sum_all(const Expr& e) const {
  if (!reducer_) fail(op_, "whole-tensor reductions are not available in this op's form");
  return Halide::cast(Halide::Float(32), reducer_(e, false, true));
}

void UpdateContext::fast_path(const Expr& condition) const {
  // Asking twice is asking once: Halide returns the existing specialization for an equal
  // condition, and scheduling it twice fails.
  for (const auto& c : *fast_paths_) {
    if (Halide::Internal::equal(c, condition)) return;
  }
  fast_paths_->push_back(condition);
}

UpdateContext UpdateContext::with_values(const std::map<std::string, Expr>& overrides) const {
  UpdateContext c = *this;
  for (const auto& [name, e] : overrides) {
    if (!c.values_.count(name)) fail(op_, "override of '" + name + "', which is not an argument");
    c.values_[name] = e;
  }
  return c;
}

Expr UpdateContext::norm2(const Expr& e) const {
  if (!reducer_) fail(op_, "whole-tensor reductions are not available in this op's form");
  return Halide::cast(Halide::Float(32), Halide::sqrt(reducer_(e, true, false)));
}

OptimizerDecl::OptimizerDecl(std::string name) : name_(std::move(name)) {
  if (!registry::is_valid_op_name(name_)) {
    fail(name_, "op names must match ^[a-z][a-z0-9_]{0,63}$");
  }
}

bool Condition::holds(const std::map<std::string, std::string>& attrs) const {
  if (attr.empty()) return true;
  auto is = [&](const std::string& a, const std::string& v) {
    auto it = attrs.find(a);
    return it != attrs.end() && it->second == v;
  };
  if (is(attr, value)) return true;
  for (const auto& [a, v] : or_any) {
    if (is(a, v)) return true;
  }
  return false;
}

OptimizerDecl& OptimizerDecl::add_arg(ArgDecl a) {
  if (!registry::is_valid_op_name(a.name)) fail(name_, "argument name '" + a.name + "' is invalid");
  for (const auto& x : args_) {
    if (x.name == a.name) fail(name_, "argument '" + a.name + "' declared twice");
  }
  args_.push_back(std::move(a));
  return *this;
}

OptimizerDecl& OptimizerDecl::state(const std::string& n, const std::string& d, Condition when) {
  return add_arg({n, Input::Role::state, d, registry::DType::f32, std::move(when)});
}
OptimizerDecl& OptimizerDecl::grad(const std::string& n, const std::string& d) {
  return add_arg({n, Input::Role::gradient, d, registry::DType::f32, {}});
}
OptimizerDecl& OptimizerDecl::scalar(const std::string& n, const std::string& d, Condition when,
                                     std::optional<double> default_value) {
  return add_arg({n, Input::Role::scalar, d, registry::DType::f32, std::move(when), default_value});
}
OptimizerDecl& OptimizerDecl::result(const std::string& n, const std::string& d, Condition when) {
  return add_arg({n, Input::Role::result, d, registry::DType::f32, std::move(when)});
}

namespace {
const char* const kUnscale = "unscale";
const char* const kSkip = "skip_if_nonfinite";
const char* const kInvScale = "inv_scale";
const char* const kFoundInf = "found_inf";

// x != 0 on the bits (NaN counts as set), so that no float compare can be folded.
Expr nonzero(const Expr& x) {
  const bool f64 = x.type().bits() == 64;
  const Halide::Type u = f64 ? Halide::UInt(64) : Halide::UInt(32);
  const Expr bits = Halide::reinterpret(u, f64 ? x : Halide::cast(Halide::Float(32), x));
  const Expr mask = f64 ? Halide::Expr(static_cast<uint64_t>(0x7fffffffffffffffULL))
                        : Halide::Expr(static_cast<uint32_t>(0x7fffffffu));
  return (bits & mask) != Halide::cast(u, 0);
}
}  // namespace

OptimizerDecl& OptimizerDecl::grad_scaling() {
  if (grad_scaling_) fail(name_, "grad_scaling() called twice");
  if (!update_) fail(name_, "grad_scaling() wraps the update: declare update() first");
  if (sparse_) fail(name_, "grad_scaling() is for dense ops");
  std::vector<std::string> grads;
  for (const auto& a : args_) {
    if (a.role == Input::Role::gradient) grads.push_back(a.name);
  }
  if (grads.empty()) fail(name_, "grad_scaling() needs a gradient argument");
  attr_bool(kUnscale, false, "multiply every gradient by the scalar inv_scale (1/loss scale)");
  attr_bool(kSkip, false,
            "leave every state untouched when a gradient is inf/NaN or found_inf is already set");
  attrs_[attrs_.size() - 2].in_id_at_default = false;
  attrs_.back().in_id_at_default = false;
  scalar(kInvScale, "1 / loss scale: gradients are multiplied by it", {kUnscale, "true"});
  result(kFoundInf,
         "Set to 1 when any (unscaled) gradient element is inf or NaN, else left as it was",
         {kUnscale, "true", {{kSkip, "true"}}});
  unscaled_update_ = update_;
  update_ = [inner = update_, grads](const UpdateContext& c) {
    const bool unscale = c.attr_bool(kUnscale), skip = c.attr_bool(kSkip);
    if (!unscale && !skip) return inner(c);
    std::map<std::string, Expr> scaled;
    Expr bad;  // per element: how many of its gradients are not finite
    for (const auto& g : grads) {
      const Expr x = unscale ? c[g] * c[kInvScale] : c[g];
      scaled[g] = x;
      const Expr b = dsl::select(dsl::is_finite(x), 0.f, 1.f);
      bad = bad.defined() ? bad + b : b;
    }
    Updates u = inner(c.with_values(scaled));
    const Expr found = c.sum_all(bad) > 0.f || nonzero(c[kFoundInf]);
    if (skip) {
      for (auto& [name, e] : u) e = dsl::select(found, c[name], e);
    }
    u.push_back({kFoundInf, dsl::select(found, 1.f, 0.f)});
    return u;
  };
  grad_scaling_ = true;
  return *this;
}

OptimizerDecl& OptimizerDecl::scalar_i64(const std::string& n, const std::string& d) {
  return add_arg({n, Input::Role::scalar, d, registry::DType::i64, {}});
}

OptimizerDecl& OptimizerDecl::sparse_rows() {
  if (sparse_) fail(name_, "sparse_rows() called twice");
  if (multi_tensor_) fail(name_, "sparse_rows() on a multi-tensor op");
  if (grad_scaling_) {
    // The sparse form has no reductions: it keeps the plain update and drops what
    // grad_scaling() declared.
    const std::set<std::string> added = {kUnscale, kSkip, kInvScale, kFoundInf};
    std::vector<ArgDecl> args;
    for (auto& a : args_) {
      if (!added.count(a.name)) args.push_back(a);
    }
    args_ = std::move(args);
    std::vector<AttrDecl> attrs;
    for (auto& a : attrs_) {
      if (!added.count(a.name)) attrs.push_back(a);
    }
    attrs_ = std::move(attrs);
    update_ = unscaled_update_;
    grad_scaling_ = false;
  }
  size_t last_grad = args_.size();
  for (size_t k = 0; k < args_.size(); ++k) {
    if (args_[k].role == Input::Role::gradient) last_grad = k;
  }
  if (last_grad == args_.size()) fail(name_, "a sparse op needs a gradient argument");
  args_.insert(args_.begin() + static_cast<std::ptrdiff_t>(last_grad) + 1,
               ArgDecl{"indices",
                       Input::Role::tensor,
                       "Row indices into the states, one per gradient row (applied in order)",
                       registry::DType::i32,
                       {}});
  sparse_ = true;
  return attr_string("Tindices", "int32", {"int32", "int64"}, "dtype of indices");
}

OptimizerDecl& OptimizerDecl::multi_tensor() {
  if (multi_tensor_) fail(name_, "multi_tensor() called twice");
  if (sparse_) fail(name_, "multi_tensor() needs a dense op");
  size_t last_grad = args_.size();
  for (size_t k = 0; k < args_.size(); ++k) {
    if (args_[k].role == Input::Role::gradient) last_grad = k;
  }
  if (last_grad == args_.size()) fail(name_, "a multi-tensor op needs a gradient argument");
  args_.insert(args_.begin() + static_cast<std::ptrdiff_t>(last_grad) + 1,
               ArgDecl{kSegmentsArg,
                       Input::Role::tensor,
                       "Model tensor index of each chunk of the flat buffers (K entries; chunk "
                       "size C = elements / K, a multiple of 16)",
                       registry::DType::i32,
                       {}});
  multi_tensor_ = true;
  return *this;
}

OptimizerDecl& OptimizerDecl::new_values_first() {
  if (sparse_) fail(name_, "new_values_first() is for dense ops (sparse forms read the output)");
  new_values_first_ = true;
  return *this;
}

OptimizerDecl OptimizerDecl::renamed(std::string name) const {
  OptimizerDecl d = *this;
  if (!registry::is_valid_op_name(name)) fail(name, "op names must match ^[a-z][a-z0-9_]{0,63}$");
  d.name_ = std::move(name);
  return d;
}

std::vector<ArgDecl> OptimizerDecl::args_for(const AttrValues& attrs) const {
  std::vector<ArgDecl> out;
  for (const auto& a : args_) {
    if (!a.when.holds(attrs)) continue;
    out.push_back(a);
    if (sparse_ && a.name == "indices" && attrs.count("Tindices") &&
        attrs.at("Tindices") == "int64") {
      out.back().dtype = registry::DType::i64;
    }
  }
  return out;
}

void add_attr_decl(const std::string& op, std::vector<AttrDecl>& attrs, AttrDecl a,
                   const std::vector<std::string>& taken) {
  if (!registry::is_valid_identifier(a.name)) fail(op, "attr name '" + a.name + "' is invalid");
  for (const auto& x : attrs) {
    if (x.name == a.name) fail(op, "attr '" + a.name + "' declared twice");
  }
  for (const auto& x : taken) {
    if (x == a.name) fail(op, "attr '" + a.name + "' has an argument's name");
  }
  attrs.push_back(std::move(a));
}

AttrValues resolve_attr_values(const std::string& op, const std::vector<AttrDecl>& attrs,
                               const AttrValues& given) {
  AttrValues out;
  for (const auto& [k, v] : given) {
    bool known = false;
    for (const auto& a : attrs) known = known || a.name == k;
    if (!known) fail(op, "unknown attr '" + k + "'");
  }
  for (const auto& a : attrs) {
    auto it = given.find(a.name);
    try {
      out[a.name] = it == given.end() ? a.default_value : canonicalize_attr(a, it->second);
    } catch (const std::invalid_argument& e) {
      fail(op, e.what());
    }
  }
  return out;
}

OptimizerDecl& OptimizerDecl::add_attr(AttrDecl a) {
  std::vector<std::string> names;
  for (const auto& x : args_) names.push_back(x.name);
  add_attr_decl(name_, attrs_, std::move(a), names);
  return *this;
}

OptimizerDecl& OptimizerDecl::attr_bool(const std::string& n, bool def, const std::string& d) {
  return add_attr({n, Attr::Type::boolean, canonical_bool(def), d, {}});
}
OptimizerDecl& OptimizerDecl::attr_int(const std::string& n, int64_t def, const std::string& d) {
  return add_attr({n, Attr::Type::integer, canonical_int(def), d, {}});
}
OptimizerDecl& OptimizerDecl::attr_float(const std::string& n, double def, const std::string& d) {
  return add_attr({n, Attr::Type::real, canonical_float(def), d, {}});
}
OptimizerDecl& OptimizerDecl::attr_string(const std::string& n, const std::string& def,
                                          std::vector<std::string> choices, const std::string& d) {
  return add_attr({n, Attr::Type::string, def, d, std::move(choices)});
}
OptimizerDecl& OptimizerDecl::named_in_id_off_default(const std::string& n) {
  for (auto& a : attrs_) {
    if (a.name == n) {
      a.in_id_at_default = false;
      return *this;
    }
  }
  fail(name_, "named_in_id_off_default: no attr '" + n + "' (declare it first)");
}

OptimizerDecl& OptimizerDecl::summary(std::string s) {
  summary_ = std::move(s);
  return *this;
}
OptimizerDecl& OptimizerDecl::formula(std::string s) {
  formula_ = std::move(s);
  return *this;
}
OptimizerDecl& OptimizerDecl::reference(std::string s) {
  reference_ = std::move(s);
  return *this;
}
OptimizerDecl& OptimizerDecl::version(int v) {
  version_ = v;
  return *this;
}
OptimizerDecl& OptimizerDecl::kind(std::string k) {
  kind_ = std::move(k);
  return *this;
}
OptimizerDecl& OptimizerDecl::tolerance(double rtol, double atol) {
  tolerance_ = {rtol, atol};
  return *this;
}
OptimizerDecl& OptimizerDecl::update(UpdateFn fn) {
  update_ = std::move(fn);
  return *this;
}

std::vector<std::string> OptimizerDecl::states(const AttrValues& attrs) const {
  std::vector<std::string> out;
  for (const auto& a : args_for(attrs)) {
    if (a.role == Input::Role::state) out.push_back(a.name);
  }
  return out;
}

std::vector<std::string> OptimizerDecl::results(const AttrValues& attrs) const {
  std::vector<std::string> out;
  for (const auto& a : args_for(attrs)) {
    if (a.role == Input::Role::result) out.push_back(a.name);
  }
  return out;
}

AttrValues OptimizerDecl::resolve_attrs(const AttrValues& given) const {
  return resolve_attr_values(name_, attrs_, given);
}

void OptimizerDecl::validate() const {
  // An op writes states (in place) or results (one element each, e.g. a norm), or both.
  bool writes = false;
  for (const auto& a : args_)
    writes = writes || a.role == Input::Role::state || a.role == Input::Role::result;
  if (!writes) fail(name_, "declares no state or result to write");
  for (const auto& a : args_) {
    if (a.when.attr.empty()) continue;
    std::vector<std::string> used = {a.when.attr};
    for (const auto& alt : a.when.or_any) used.push_back(alt.first);
    for (const auto& name : used) {
      bool known = false;
      for (const auto& at : attrs_) known = known || at.name == name;
      if (!known)
        fail(name_, "argument '" + a.name + "' depends on undeclared attr '" + name + "'");
    }
    if (a.role == Input::Role::result && a.dtype != registry::DType::f32)
      fail(name_, "result '" + a.name + "' must be float32");
  }
  if (!update_) fail(name_, "has no update");
  if (kind_ != "optimizer" && kind_ != "bandwidth") fail(name_, "unknown kind '" + kind_ + "'");
  if (!(tolerance_.rtol >= 0 && tolerance_.atol >= 0)) fail(name_, "negative tolerance");
}

namespace {

// Stores every state but the first in `t`. The update still computes them in fp32; the wrapper
// rounds each (to_storage) only as it is stored, so the first state's update, which reads the
// same fp32 Exprs, never sees the rounding.
void narrow_states(std::vector<ArgDecl>& args, UpdateFn& update, registry::DType t) {
  std::set<std::string> narrowed;
  bool first = true;
  for (auto& a : args) {
    if (a.role != Input::Role::state) continue;
    if (!first) a.dtype = t, narrowed.insert(a.name);
    first = false;
  }
  update = [inner = std::move(update), narrowed, ht = halide_type(t)](const UpdateContext& c) {
    Updates u = inner(c);
    for (auto& [n, e] : u) {
      // The golden (fp64 compute) keeps its own precision.
      if (narrowed.count(n) && e.type().bits() != 64) e = to_storage(ht, e);
    }
    return u;
  };
}

}  // namespace

std::string Storage::tag() const {
  return registry::storage_tag(grad, model, state);
}

Storage Storage::from_tag(const std::string& tag) {
  using registry::DType;
  for (auto d : {DType::f16, DType::bf16}) {
    for (const Storage& s :
         {Storage{d, d}, Storage{d, std::nullopt}, Storage{DType::f32, std::nullopt, d},
          Storage{d, d, d}, Storage{d, std::nullopt, d}}) {
      if (s.tag() == tag) return s;
    }
  }
  if (tag == "f32") return {};
  throw std::invalid_argument("unknown storage '" + tag +
                              "' (f32, bf16m, f16m, bf16g, f16g, bf16s, bf16ms, bf16gs)");
}

OptimizerDecl OptimizerDecl::with_storage(const Storage& s, const std::string& name) const {
  OptimizerDecl d = name.empty() ? *this : renamed(name);
  d.storage_ = s;
  if (s.is_f32()) return d;
  auto narrow = [&](registry::DType t) {
    if (t != registry::DType::f16 && t != registry::DType::bf16 && t != registry::DType::f32)
      fail(name_, "storage dtypes are f32, f16 and bf16");
  };
  narrow(s.grad);
  if (s.model) narrow(*s.model);
  if (s.state) narrow(*s.state);
  if (sparse_) fail(name_, "narrow storage is for dense ops only");
  for (auto& a : d.args_) {
    if (a.role == Input::Role::gradient) a.dtype = s.grad;
  }
  if (s.state) narrow_states(d.args_, d.update_, *s.state);  // before the model copy is added
  if (!s.model) return d;
  size_t last_state = 0;
  std::string master;
  for (size_t k = 0; k < d.args_.size(); ++k) {
    if (d.args_[k].role != Input::Role::state) continue;
    if (master.empty()) master = d.args_[k].name;
    last_state = k;
  }
  if (master.empty()) fail(name_, "master-weights storage needs a state");
  for (const auto& a : d.args_) {
    if (a.name == kModelArg)
      fail(name_, std::string("already has an argument '") + kModelArg + "'");
  }
  d.args_.insert(d.args_.begin() + static_cast<std::ptrdiff_t>(last_state) + 1,
                 ArgDecl{kModelArg,
                         Input::Role::state,
                         registry::dtype_name(*s.model) + std::string(" copy of ") + master +
                             " (the fp32 master), written only: rounded to nearest even",
                         *s.model,
                         {}});
  const Halide::Type t = halide_type(*s.model);
  // d.update_, not update_: it already rounds narrowed states.
  d.update_ = [inner = d.update_, master, t](const UpdateContext& c) {
    Updates u = inner(c);
    for (const auto& [n, e] : u) {
      if (n == master) {
        // The golden (fp64 compute) keeps its own precision for the copy.
        const bool f32 = e.type().bits() != 64;
        u.push_back({kModelArg, f32 ? to_storage(t, e) : e});
        return u;
      }
    }
    return u;  // a missing master update is reported by the pipeline builder
  };
  return d;
}

std::string canonical_bool(bool b) {
  return b ? "true" : "false";
}
std::string canonical_int(int64_t v) {
  return std::to_string(v);
}
std::string canonical_float(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string canonicalize_attr(const AttrDecl& a, const std::string& text) {
  try {
    return registry::canonical_attr_value(a.type, a.choices, text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("attr '" + a.name + "': " + e.what());
  }
}

}  // namespace opforge::dsl
