#include "dsl/nn_op_decl.h"

#include <algorithm>
#include <regex>
#include <set>
#include <stdexcept>

#include "dsl/kernel_pipeline.h"
#include "dsl/math.h"
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

Halide::Func NnArgs::f32(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw std::invalid_argument("no input tensor '" + name + "'");
  const Halide::ImageParam& im = it->second;
  if (im.type() == Halide::Float(32)) return im;  // the same calls as im(...): same algorithm
  std::vector<Halide::Var> v(im.dimensions());
  Halide::Func w(name + "_f32");
  w(v) = Halide::cast<float>(im(v));
  return w;
}

Halide::Expr NnArgs::store(const std::string& output, const Halide::Expr& value) const {
  auto it = output_dtypes.find(output);
  if (it == output_dtypes.end()) throw std::invalid_argument("no output '" + output + "'");
  if (it->second == registry::DType::f32) return value;
  if (it->second != registry::DType::bf16) return to_storage(halide_type(it->second), value);
  // Halide 14's fp32 -> bf16 cast rounds NaN bits as numbers: a NaN with its high payload bits
  // set and more below (0xffffffff, 0x7fffffff) carried out and was stored as 0 or -0. Only an
  // fp32 tensor (a norm's gamma, beta) can bring such a NaN in: a bf16 input's low 16 bits
  // are 0 and x86 arithmetic makes 0xffc00000, both rounding to NaN. So ops with one take
  // f32_to_bf16_computed, two integer min ops a vector (the norms at 4096 x 1024, cold: within
  // noise, 0.93-1.08x; in cache 1.05-1.09x), and the others keep the bare rounding (silu in
  // cache took 1.12-1.15x with the mins; f32_to_bf16's NaN select 1.06-1.25x). AMD EPYC family
  // 26, 1 thread, preview / registered per pair.
  // On the avx512_bf16 ISA (Halide's Sapphire Rapids feature) the cast is vcvtneps2bf16: round
  // to nearest even, every NaN kept a (quiet) NaN, but fp32 subnormals (below 2^-126) read and
  // stored as zero, where torch keeps them; one instruction for 16 values.
  const Halide::Expr bare = Halide::cast(halide_type(registry::DType::bf16), value);
  if (target.has_feature(Halide::Target::AVX512_SapphireRapids)) return bare;
  bool fp32_tensor = false;
  for (const auto& [name, t] : tensors) fp32_tensor = fp32_tensor || t.type() == Halide::Float(32);
  return fp32_tensor ? f32_to_bf16_computed(value) : bare;
}

registry::Tolerance activation_tolerance(registry::Tolerance t, registry::DType dtype) {
  if (dtype == registry::DType::f32) return t;
  return {t.rtol + 1.0 / 256, 8 * t.atol};
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

NnOpDecl& NnOpDecl::activations(std::vector<std::string> tensors) {
  if (!activations_.empty()) fail("activations declared twice");
  if (tensors.empty()) fail("activations: name at least one tensor");
  activations_ = std::move(tensors);
  attr_string(
      kActivationDtypeAttr, "float32",
      {"float32", "bfloat16"}, "Storage of the activations (" + [this] {
        std::string t;
        for (const auto& n : activations_) t += (t.empty() ? "" : ", ") + n;
        return t;
      }() + "): float32, or bfloat16 (computed in fp32, rounded to nearest even on store)");
  named_in_id_off_default(kActivationDtypeAttr);
  return *this;
}

NnOpDecl& NnOpDecl::input_dtype_when(const std::string& tensor, const std::string& attr,
                                     const std::string& value, registry::DType dtype) {
  bool input = false, choice = false;
  for (const auto& a : args_) input = input || (!a.is_scalar && a.tensor.name == tensor);
  for (const auto& a : attrs()) {
    if (a.name == attr)
      choice = std::find(a.choices.begin(), a.choices.end(), value) != a.choices.end();
  }
  if (!input) fail("input_dtype_when: no input tensor '" + tensor + "' (declare it first)");
  if (!choice) fail("input_dtype_when: attr '" + attr + "' has no choice '" + value + "'");
  dtype_when_.push_back({tensor, attr, value, dtype});
  return *this;
}

std::string NnOpDecl::cost_for_variant(const std::string& expr, const AttrValues& attrs) const {
  std::string out = expr;
  auto replace = [&](const std::string& tensor) {
    const std::regex word("\\bbytes_" + tensor + "\\b");
    out = std::regex_replace(out, word,
                             std::to_string(registry::dtype_bytes(tensor_dtype(tensor, attrs))));
  };
  for (const auto& a : args_) {
    if (!a.is_scalar) replace(a.tensor.name);
  }
  for (const auto& o : outputs_) replace(o.name);
  return out;
}

std::optional<registry::DType> NnOpDecl::declared_dtype(const std::string& tensor) const {
  for (const auto& a : args_) {
    if (!a.is_scalar && a.tensor.name == tensor) return a.tensor.dtype;
  }
  for (const auto& o : outputs_) {
    if (o.name == tensor) return o.dtype;
  }
  return std::nullopt;
}

registry::DType NnOpDecl::tensor_dtype(const std::string& name, const AttrValues& attrs) const {
  for (const auto& w : dtype_when_) {
    auto it = attrs.find(w.attr);
    if (w.tensor == name && it != attrs.end() && it->second == w.value) return w.dtype;
  }
  const std::optional<registry::DType> declared = declared_dtype(name);
  if (!declared) fail("no tensor '" + name + "'");
  if (std::find(activations_.begin(), activations_.end(), name) == activations_.end())
    return *declared;
  auto it = attrs.find(kActivationDtypeAttr);
  if (it == attrs.end() || it->second == "float32") return registry::DType::f32;
  if (it->second == "bfloat16") return registry::DType::bf16;
  fail(std::string("attr '") + kActivationDtypeAttr + "' is '" + it->second +
       "': float32 or bfloat16");
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
  for (const auto& n : activations_) {
    if (declared_dtype(n) != registry::DType::f32)
      fail("activation '" + n + "' is not a declared float32 input or output");
  }
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
  // Cost expressions may count each tensor's element bytes (cost_for_variant).
  for (const auto& a : args_) {
    if (!a.is_scalar) dim_names.insert("bytes_" + a.tensor.name);
  }
  for (const auto& o : outputs_) dim_names.insert("bytes_" + o.name);
  if (!cost_.flops.empty()) check(cost_.flops, "cost.flops");
  if (!cost_.bytes.empty()) check(cost_.bytes, "cost.bytes");
}

}  // namespace opforge::dsl
