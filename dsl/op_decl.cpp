#include "dsl/op_decl.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include "dsl/fp8.h"
#include "dsl/kernel_pipeline.h"
#include "opforge/scalar_domain.h"

namespace opforge::dsl {

using registry::Attr;
using registry::Input;

namespace {

[[noreturn]] void fail_op(const std::string& op, const std::string& msg) {
  throw std::invalid_argument("op '" + op + "': " + msg);
}

}  // namespace

Expr UpdateContext::operator[](const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) fail_op(op_, "update reads '" + name + "', which is not an argument");
  return it->second;
}

const std::string& UpdateContext::attr(const std::string& name) const {
  auto it = attrs_.find(name);
  if (it == attrs_.end()) fail_op(op_, "update reads attr '" + name + "', which is not declared");
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
  if (!reducer_) fail_op(op_, "whole-tensor reductions are not available in this op's form");
  return Halide::cast(Halide::Float(32), reducer_(e, false, false));
}

Expr UpdateContext::sum_all(const Expr& e) const {
  if (!reducer_) fail_op(op_, "whole-tensor reductions are not available in this op's form");
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
    if (!c.values_.count(name))
      fail_op(op_, "override of '" + name + "', which is not an argument");
    c.values_[name] = e;
  }
  return c;
}

Expr UpdateContext::norm2(const Expr& e) const {
  if (!reducer_) fail_op(op_, "whole-tensor reductions are not available in this op's form");
  return Halide::cast(Halide::Float(32), Halide::sqrt(reducer_(e, true, false)));
}

OptimizerDecl::OptimizerDecl(std::string name)
    : DeclBuilder(std::move(name), "optimizer", {1e-6, 1e-7}) {}

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
  if (!registry::is_valid_op_name(a.name)) fail("argument name '" + a.name + "' is invalid");
  for (const auto& x : args_) {
    if (x.name == a.name) fail("argument '" + a.name + "' declared twice");
  }
  args_.push_back(std::move(a));
  return *this;
}

OptimizerDecl& OptimizerDecl::state(const std::string& n, const std::string& d, Condition when,
                                    registry::DType dtype) {
  if (dtype != registry::DType::f32 && !(dtype == registry::DType::u8 && kind() == "bandwidth"))
    fail("state '" + n + "': a state is float32 (uint8 in bandwidth kernels only)");
  return add_arg({n, Input::Role::state, d, dtype, std::move(when)});
}
OptimizerDecl& OptimizerDecl::grad(const std::string& n, const std::string& d) {
  return add_arg({n, Input::Role::gradient, d, registry::DType::f32, {}});
}
OptimizerDecl& OptimizerDecl::scalar(const std::string& n, const std::string& d, Condition when,
                                     std::optional<double> default_value) {
  return add_arg({n, Input::Role::scalar, d, registry::DType::f32, std::move(when), default_value});
}
OptimizerDecl& OptimizerDecl::quantizable(const std::string& n, bool is_signed) {
  bool first = true;
  for (const auto& a : args_) {
    if (a.role != Input::Role::state) continue;
    if (a.name == n) {
      if (first) fail("quantizable: '" + n + "' is the first state (the parameter)");
      if (!quantizable_.emplace(n, is_signed).second) fail("quantizable: '" + n + "' twice");
      return *this;
    }
    first = false;
  }
  fail("quantizable: no state '" + n + "' (declare it first)");
}
bool OptimizerDecl::has_quantizable_states() const {
  return !quantizable_.empty();
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
  if (grad_scaling_) fail("grad_scaling() called twice");
  if (!update_) fail("grad_scaling() wraps the update: declare update() first");
  if (sparse_) fail("grad_scaling() is for dense ops");
  std::vector<std::string> grads;
  for (const auto& a : args_) {
    if (a.role == Input::Role::gradient) grads.push_back(a.name);
  }
  if (grads.empty()) fail("grad_scaling() needs a gradient argument");
  attr_bool(kUnscale, false, "multiply every gradient by the scalar inv_scale (1/loss scale)");
  attr_bool(kSkip, false,
            "leave every state untouched when a gradient is inf/NaN or found_inf is already set");
  attrs_[attrs_.size() - 2].in_id_at_default = false;
  attrs_.back().in_id_at_default = false;
  scalar(kInvScale, "1 / loss scale: gradients are multiplied by it", {kUnscale, "true"});
  typical(kInvScale, 1.0 / 65536);  // torch.cuda.amp.GradScaler's initial scale
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
      c.skip_when(found);
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
  if (sparse_) fail("sparse_rows() called twice");
  if (multi_tensor_) fail("sparse_rows() on a multi-tensor op");
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
  if (last_grad == args_.size()) fail("a sparse op needs a gradient argument");
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
  if (multi_tensor_) fail("multi_tensor() called twice");
  if (sparse_) fail("multi_tensor() needs a dense op");
  size_t last_grad = args_.size();
  for (size_t k = 0; k < args_.size(); ++k) {
    if (args_[k].role == Input::Role::gradient) last_grad = k;
  }
  if (last_grad == args_.size()) fail("a multi-tensor op needs a gradient argument");
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

OptimizerDecl OptimizerDecl::per_tensor() const {
  OptimizerDecl d = *this;
  if (!multi_tensor_) return d;
  d.args_.erase(std::remove_if(d.args_.begin(), d.args_.end(),
                               [](const ArgDecl& a) { return a.name == kSegmentsArg; }),
                d.args_.end());
  d.multi_tensor_ = false;
  return d;
}

OptimizerDecl& OptimizerDecl::new_values_first() {
  if (sparse_) fail("new_values_first() is for dense ops (sparse forms read the output)");
  new_values_first_ = true;
  return *this;
}

OptimizerDecl OptimizerDecl::renamed(std::string name) const {
  OptimizerDecl d = *this;
  if (!registry::is_valid_op_name(name))
    fail_op(name, "op names must match ^[a-z][a-z0-9_]{0,63}$");
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

namespace {
std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
}  // namespace

OptimizerDecl& OptimizerDecl::domain(const std::string& scalar, const std::string& text) {
  for (auto& a : args_) {
    if (a.name != scalar) continue;
    if (a.role != Input::Role::scalar) fail("domain: '" + scalar + "' is not a scalar");
    try {
      a.domain = registry::ScalarDomain::parse(text).text();
    } catch (const std::invalid_argument& e) {
      fail(e.what());
    }
    if (a.typical && !registry::ScalarDomain::parse(a.domain).contains(*a.typical)) {
      fail("domain: " + scalar + "'s typical value " + number_text(*a.typical) + " is outside " +
           a.domain);
    }
    return *this;
  }
  fail("domain: no scalar '" + scalar + "' (declare it first)");
}

OptimizerDecl& OptimizerDecl::typical(const std::string& scalar, double value) {
  for (auto& a : args_) {
    if (a.name != scalar) continue;
    if (a.role != Input::Role::scalar) fail("typical: '" + scalar + "' is not a scalar");
    if (!registry::ScalarDomain::parse(a.domain).contains(value)) {
      fail("typical: " + scalar + " = " + number_text(value) + " is outside its domain " +
           a.domain);
    }
    a.typical = value;
    return *this;
  }
  fail("typical: no scalar '" + scalar + "' (declare it first)");
}

std::vector<std::string> OptimizerDecl::argument_names() const {
  std::vector<std::string> names;
  for (const auto& a : args_) names.push_back(a.name);
  return names;
}

OptimizerDecl& OptimizerDecl::update(UpdateFn fn) {
  update_ = std::move(fn);
  return *this;
}

void OptimizerDecl::validate() const {
  // An op writes states (in place) or results (one element each, e.g. a norm), or both.
  bool writes = false;
  for (const auto& a : args_)
    writes = writes || a.role == Input::Role::state || a.role == Input::Role::result;
  if (!writes) fail("declares no state or result to write");
  for (const auto& a : args_) {
    if (a.when.attr.empty()) continue;
    std::vector<std::string> used = {a.when.attr};
    for (const auto& alt : a.when.or_any) used.push_back(alt.first);
    for (const auto& name : used) {
      bool known = false;
      for (const auto& at : attrs_) known = known || at.name == name;
      if (!known) fail("argument '" + a.name + "' depends on undeclared attr '" + name + "'");
    }
    if (a.role == Input::Role::result && a.dtype != registry::DType::f32)
      fail("result '" + a.name + "' must be float32");
  }
  if (!update_) fail("has no update");
  if (kind_ != "optimizer" && kind_ != "bandwidth") fail("unknown kind '" + kind_ + "'");
  if (!(tolerance_.rtol >= 0 && tolerance_.atol >= 0)) fail("negative tolerance");
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
  if (!quant) return registry::storage_tag(grad, model, state);
  return registry::quantized_storage_tag(grad, model, *quant == QuantMap::linear, block);
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
  for (auto d : {DType::f8e4m3, DType::f8e5m2}) {
    if (Storage{d, std::nullopt}.tag() == tag) return Storage{d, std::nullopt};
  }
  if (tag == "f32") return {};
  // 8-bit states: "<gradient part>q8s" or "...q8ls", then an optional block size.
  for (const char* q : {"q8s", "q8ls"}) {
    const size_t at = tag.find(q);
    if (at == std::string::npos) continue;
    Storage s = at == 0 ? Storage{} : from_tag(tag.substr(0, at));
    const std::string rest = tag.substr(at + std::string(q).size());
    if (s.state || s.quant || rest.find_first_not_of("0123456789") != std::string::npos) break;
    s.quant = std::string(q) == "q8s" ? QuantMap::dynamic : QuantMap::linear;
    if (!rest.empty()) s.block = std::stoi(rest);
    if (s.tag() == tag) return s;
    break;
  }
  throw std::invalid_argument("unknown storage '" + tag +
                              "' (f32, bf16m, f16m, bf16g, f16g, bf16s, bf16ms, bf16gs; 8-bit "
                              "states: q8s, q8ls, bf16gq8s, bf16mq8s, q8s<block>; FP8 "
                              "gradients: e4m3g, e5m2g, e4m3gq8s)");
}

OptimizerDecl OptimizerDecl::with_storage(const Storage& s, const std::string& name) const {
  OptimizerDecl d = name.empty() ? *this : renamed(name);
  d.storage_ = s;
  if (s.is_f32()) return d;
  auto narrow = [&](registry::DType t) {
    if (t != registry::DType::f16 && t != registry::DType::bf16 && t != registry::DType::f32)
      fail("storage dtypes are f32, f16 and bf16");
  };
  const bool fp8 = fp8_format(s.grad).has_value();
  if (!fp8) narrow(s.grad);
  if (fp8 && (s.model || s.state))
    fail("FP8 gradients: fp32 parameters and states (or 8-bit states), no model copy");
  if (fp8 && multi_tensor_) fail("FP8 gradients: one per-tensor scale, so single-tensor ops");
  if (s.model) narrow(*s.model);
  if (s.state) narrow(*s.state);
  if (sparse_) fail("narrow storage is for dense ops only");
  for (auto& a : d.args_) {
    if (a.role == Input::Role::gradient) a.dtype = s.grad;
  }
  if (s.state) narrow_states(d.args_, d.update_, *s.state);  // before the model copy is added
  if (fp8) d.scale_fp8_gradients();
  if (s.quant && s.state) fail("8-bit states exclude narrow states");
  if (s.quant && !has_quantizable_states()) fail("8-bit storage: no state is quantizable()");
  if (s.quant && (multi_tensor_ || s.block < 16 || s.block % 16))
    fail("8-bit storage: dense single-tensor ops, blocks a multiple of 16 elements");
  if (s.quant) d.zero_nonfinite_gradients();
  if (!s.model) return s.quant ? d.quantize_states(*s.quant, s.block) : d;
  size_t last_state = 0;
  std::string master;
  for (size_t k = 0; k < d.args_.size(); ++k) {
    if (d.args_[k].role != Input::Role::state) continue;
    if (master.empty()) master = d.args_[k].name;
    last_state = k;
  }
  if (master.empty()) fail("master-weights storage needs a state");
  for (const auto& a : d.args_) {
    if (a.name == kModelArg) fail(std::string("already has an argument '") + kModelArg + "'");
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
  return s.quant ? d.quantize_states(*s.quant, s.block) : d;
}

void OptimizerDecl::scale_fp8_gradients() {
  std::vector<std::string> grads;
  size_t at = 0;  // after the last scalar, or the last tensor when there is none
  for (size_t k = 0; k < args_.size(); ++k) {
    if (args_[k].role == Input::Role::gradient) grads.push_back(args_[k].name);
    if (args_[k].role != Input::Role::result) at = k + 1;
  }
  for (const auto& a : args_) {
    if (a.name == kFp8ScaleInvArg)
      fail(std::string("already has an argument '") + kFp8ScaleInvArg + "'");
  }
  ArgDecl scale{kFp8ScaleInvArg,
                Input::Role::scalar,
                "the FP8 gradients' per-tensor scale inverse: a gradient is its FP8 value times "
                "this (1 when the gradient was not scaled)",
                registry::DType::f32,
                {}};
  scale.domain = "(0, inf)";
  scale.typical = 1.0;
  args_.insert(args_.begin() + static_cast<std::ptrdiff_t>(at), scale);
  // Outermost: every wrapper inside (grad_scaling's unscale and non-finite check) sees the
  // scaled gradients.
  update_ = [inner = std::move(update_), grads](const UpdateContext& c) {
    std::map<std::string, Expr> scaled;
    for (const auto& g : grads) scaled[g] = c[g] * c[kFp8ScaleInvArg];
    return inner(c.with_values(scaled));
  };
}

void OptimizerDecl::zero_nonfinite_gradients() {
  // An inf or NaN gradient element would make its new states inf/NaN, its block's absmax NaN,
  // and every code of the block decode to NaN from then on. It counts as 0 instead (its states
  // decay, its block stays finite), as torch.nan_to_num(grad, 0, 0, 0) would give; bitsandbytes'
  // 8-bit Adam skips such an element. On the gradient rather than on each new state: the
  // quantized states' new values stay the expressions the other states' updates read, so the
  // blockwise pass still computes them once (selects on the states made the decoded states a
  // per-block buffer of their own: 8-bit Adam 1.09-1.38x the time). Around the FP8 scaling: the
  // gradients as stored (FP8 ones decoded; a finite positive scale keeps them finite).
  std::vector<std::string> grads;
  for (const auto& a : args_) {
    if (a.role == Input::Role::gradient) grads.push_back(a.name);
  }
  if (grads.empty()) fail("8-bit storage needs a gradient argument");
  update_ = [inner = std::move(update_), grads, scaling = grad_scaling_](const UpdateContext& c) {
    // Loss scaling's own handling applies there (found_inf, and the skipped step).
    if (scaling && (c.attr_bool(kSkip) || c.attr_bool(kUnscale))) return inner(c);
    std::map<std::string, Expr> clean;
    for (const auto& g : grads)
      clean[g] = dsl::select(dsl::is_finite(c[g]), c[g], Halide::cast(c[g].type(), 0));
    return inner(c.with_values(clean));
  };
}

OptimizerDecl& OptimizerDecl::quantize_states(QuantMap map, int block) {
  size_t last_state = 0;
  std::vector<ArgDecl> scales;
  for (size_t k = 0; k < args_.size(); ++k) {
    ArgDecl& a = args_[k];
    if (a.role != Input::Role::state) continue;
    last_state = k;
    auto q = quantizable_.find(a.name);
    if (q == quantizable_.end()) continue;
    a.dtype = registry::DType::u8;
    a.quant = StateQuant{map, q->second};
    a.description += " (8-bit codes of the " + a.quant->name() + " map, blockwise)";
    scales.push_back(ArgDecl{absmax_arg(a.name), Input::Role::block_scale,
                             "absmax of each block of " + std::to_string(block) + " elements of " +
                                 a.name + " (its codes scale), in place",
                             registry::DType::f32, a.when});
  }
  for (const auto& a : scales) {
    for (const auto& x : args_) {
      if (x.name == a.name) fail("already has an argument '" + a.name + "'");
    }
  }
  args_.insert(args_.begin() + static_cast<std::ptrdiff_t>(last_state) + 1, scales.begin(),
               scales.end());
  return *this;
}

}  // namespace opforge::dsl
