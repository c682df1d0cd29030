// JSON -> Descriptor: one function per object, then the cross-field checks.
// The JSON form is documented field by field in registry/SCHEMA.md.
#include <climits>
#include <cmath>
#include <limits>

#include "opforge/scalar_domain.h"
#include "registry/format/format_json.h"

namespace opforge::registry {

using namespace detail;

namespace {

Input parse_input(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  Input in;
  in.name = ident(o, "name");
  in.role = enum_field(o, "role", "role", kRoles, kRoleNames);
  in.dtype = dtype_field(o, "dtype");
  in.rank = static_cast<int>(o.integer("rank", -1, INT_MAX));
  in.description = o.opt_str("description");
  if (o.field("dims", false)) in.dims = string_array(origin, o.array("dims"), o.at("dims"));
  if (in.role == Input::Role::scalar && in.rank != 0)
    o.fail_at("rank", "a scalar input has rank 0");
  if (o.field("domain", false)) {
    if (in.role != Input::Role::scalar) o.fail_at("domain", "only a scalar input has a domain");
    in.domain = o.str("domain");
    try {
      in.domain = ScalarDomain::parse(in.domain).text();
    } catch (const std::invalid_argument& e) {
      o.fail_at("domain", e.what());
    }
  }
  if (o.field("default", false)) {
    if (in.role != Input::Role::scalar) o.fail_at("default", "only a scalar input has a default");
    in.default_value = o.number("default");
    if (!std::isfinite(*in.default_value)) o.fail_at("default", "not a finite number");
  }
  if (o.field("typical", false)) {
    if (in.role != Input::Role::scalar)
      o.fail_at("typical", "only a scalar input has a typical value");
    in.typical = o.number("typical");
    const ScalarDomain domain = ScalarDomain::parse(in.domain.empty() ? "any" : in.domain);
    if (!std::isfinite(*in.typical) || !domain.contains(*in.typical))
      o.fail_at("typical", "not a finite number inside the domain " + domain.text());
  }
  if (o.field("quant_map", false)) {
    in.quant_map = o.str("quant_map");
    const bool known = in.quant_map == "dynamic_signed" || in.quant_map == "dynamic_unsigned" ||
                       in.quant_map == "linear_signed" || in.quant_map == "linear_unsigned";
    if (!known) o.fail_at("quant_map", "unknown map '" + in.quant_map + "'");
    if (in.role != Input::Role::state || in.dtype != DType::u8)
      o.fail_at("quant_map", "only a uint8 state has a quant_map");
  }
  o.finish();
  return in;
}

Output parse_output(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  Output out;
  out.name = ident(o, "name");
  out.kernel_arg = checked_name(o, "kernel_arg", is_valid_kernel_arg_name,
                                "kernel argument name ([A-Za-z0-9_.], 1..128)");
  out.aliases = o.opt_str("aliases");
  out.dtype = dtype_field(o, "dtype");
  out.rank = static_cast<int>(o.integer("rank", -1, INT_MAX));
  if (o.field("dims", false)) out.dims = string_array(origin, o.array("dims"), o.at("dims"));
  o.finish();
  return out;
}

std::vector<std::string> parse_choices(Obj& o, Attr::Type type) {
  const json* c = o.field("choices", false);
  if (!c) return {};
  std::string ptr = o.at("choices");
  if (!c->is_array()) o.type_error(*c, "array", ptr);
  std::vector<std::string> out;
  for (size_t i = 0; i < c->size(); ++i) {
    std::string s = attr_value_string(type, (*c)[i], o, child(ptr, i));
    for (const std::string& prev : out) {
      if (prev == s) fail(o.origin(), child(ptr, i), "duplicate choice " + quote(s));
    }
    out.push_back(s);
  }
  return out;
}

void check_choice(const Obj& o, const Attr& a, const std::string& key, const std::string& value) {
  if (a.choices.empty()) return;
  for (const std::string& c : a.choices) {
    if (c == value) return;
  }
  o.fail_at(key, quote(value) + " is not among the choices of attr " + quote(a.name));
}

Attr parse_attr(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  Attr a;
  a.name = ident(o, "name");
  a.type = enum_field(o, "type", "attr type", kAttrTypes, kAttrTypeNames);
  a.default_value = attr_value_string(a.type, *o.field("default", true), o, o.at("default"));
  a.value = attr_value_string(a.type, *o.field("value", true), o, o.at("value"));
  a.description = o.opt_str("description");
  a.choices = parse_choices(o, a.type);
  check_choice(o, a, "default", a.default_value);
  check_choice(o, a, "value", a.value);
  o.finish();
  return a;
}

ShapeConstraints parse_shape(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  ShapeConstraints s;
  s.elementwise = o.boolean("elementwise");
  s.same_shape = string_array(origin, o.array("same_shape"), o.at("same_shape"));
  s.max_elements = o.integer("max_elements", 1, std::numeric_limits<int64_t>::max());
  // Optional: descriptors written before it existed are never split.
  if (o.field("splittable", false)) s.splittable = o.boolean("splittable");
  if (o.field("multi_tensor", false)) s.multi_tensor = o.boolean("multi_tensor");
  s.segments = o.opt_str("segments");
  if (o.field("block", false)) s.block = o.integer("block", 1, std::numeric_limits<int32_t>::max());
  if (o.field("named_dims", false)) s.named_dims = o.boolean("named_dims");
  if (s.named_dims || o.field("checks", false)) {
    const json& checks = o.array("checks");
    for (size_t i = 0; i < checks.size(); ++i) {
      Obj c(origin, checks[i], child(o.at("checks"), i));
      s.checks.push_back({c.str("condition"), c.str("message")});
      c.finish();
    }
  }
  if (!s.named_dims && !s.elementwise) {
    s.indices = o.str("indices");
    s.row_slices = string_array(origin, o.array("row_slices"), o.at("row_slices"));
  }
  o.finish();
  return s;
}

KernelArg parse_kernel_arg(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  KernelArg a;
  a.name = checked_name(o, "name", is_valid_kernel_arg_name,
                        "kernel argument name ([A-Za-z0-9_.], 1..128)");
  a.kind = enum_field(o, "kind", "kernel argument kind", kArgKinds, kArgKindNames);
  a.dtype = dtype_field(o, "dtype");
  a.dims = static_cast<int>(o.integer("dims", 0, INT_MAX));
  if (a.kind == KernelArg::Kind::input_scalar && a.dims != 0) {
    o.fail_at("dims", "an input_scalar argument has 0 dims");
  }
  o.finish();
  return a;
}

Kernel parse_kernel(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  Kernel k;
  k.file = safe_path(o, "file");
  k.entry = ident(o, "entry");
  k.args = parse_array(o, "args", parse_kernel_arg);
  k.sha256 = opt_sha256(o, "sha256");
  o.finish();
  return k;
}

TargetInfo parse_target(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  TargetInfo t;
  t.isa = ident(o, "isa");
  t.halide_target = o.str("halide_target");
  if (t.halide_target.empty()) o.fail_at("halide_target", "must not be empty");
  t.cpu_features = string_array(origin, o.array("cpu_features"), o.at("cpu_features"));
  for (size_t i = 0; i < t.cpu_features.size(); ++i) {
    if (!is_valid_cpu_feature(t.cpu_features[i])) {
      fail(origin, child(o.at("cpu_features"), i),
           quote(t.cpu_features[i]) + " is not a valid CPU feature name");
    }
  }
  t.priority = static_cast<int>(o.integer("priority", INT_MIN, INT_MAX));
  o.finish();
  return t;
}

Schedule parse_schedule(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  Schedule s;
  s.recipe = o.str("recipe");
  if (const json* p = o.field("params", false))
    s.params = string_map(origin, *p, o.at("params"), is_valid_schedule_param_key);
  s.summary = o.opt_str("summary");
  if (const json* t = o.field("tuning", false)) {
    Obj to(origin, *t, o.at("tuning"));
    s.tuning_machine = to.str("machine");
    s.tuning_family = to.str("family");
    if (s.tuning_machine.empty()) to.fail_at("machine", "must not be empty");
    if (s.tuning_family.empty()) to.fail_at("family", "must not be empty");
    to.finish();
  }
  o.finish();
  return s;
}

double tolerance_value(Obj& o, const std::string& key) {
  double x = o.number(key);
  if (!std::isfinite(x) || x < 0) o.fail_at(key, "must be finite and >= 0");
  return x;
}

Tolerance parse_tolerance(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  Tolerance t;
  t.rtol = tolerance_value(o, "rtol");
  t.atol = tolerance_value(o, "atol");
  if (o.field("conditioning", false)) t.conditioning = tolerance_value(o, "conditioning");
  o.finish();
  return t;
}

Traffic parse_traffic(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  Traffic t;
  t.bytes_read_per_element = static_cast<int>(o.integer("bytes_read_per_element", 0, INT_MAX));
  t.bytes_written_per_element =
      static_cast<int>(o.integer("bytes_written_per_element", 0, INT_MAX));
  o.finish();
  return t;
}

template <typename T>
T parse_object(Obj& o, const std::string& key,
               T (*parse)(const std::string&, const json&, const std::string&)) {
  return parse(o.origin(), *o.field(key, true), o.at(key));
}

template <typename T>
T parse_optional_object(Obj& o, const std::string& key,
                        T (*parse)(const std::string&, const json&, const std::string&)) {
  const json* j = o.field(key, false);
  return j ? parse(o.origin(), *j, o.at(key)) : T{};
}

void parse_texts(Obj& o, Descriptor& d) {
  d.summary = o.opt_str("summary");
  d.formula = o.opt_str("formula");
  d.reference = o.opt_str("reference");
  d.bandwidth_op = o.opt_str("bandwidth_op");
  if (!d.bandwidth_op.empty() && !is_valid_op_name(d.bandwidth_op)) {
    o.fail_at("bandwidth_op", quote(d.bandwidth_op) + " is not a valid op name");
  }
}

void parse_identity(Obj& o, Descriptor& d) {
  check_schema(o, Descriptor::kSchema);
  d.op = checked_name(o, "op", is_valid_op_name, "op name (^[a-z][a-z0-9_]{0,63}$)");
  d.op_version = static_cast<int>(o.integer("op_version", 1, INT_MAX));
  d.variant = ident(o, "variant");
  d.kind = o.str("kind");
  if (!enum_parse(d.kind, kKinds, kKinds)) {
    o.fail_at("kind", "unknown kind " + quote(d.kind) + " (" + one_of(kKinds) + ")");
  }
  d.cache_key = o.str("cache_key");
  if (!is_sha256_hex(d.cache_key)) {
    o.fail_at("cache_key", "expected 64 lowercase hex digits (SHA-256)");
  }
  d.halide_version = o.str("halide_version");
}

Algorithm parse_algorithm(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  Algorithm a;
  a.name = o.str("name");
  if (!a.name.empty() && !is_valid_op_name(a.name))
    o.fail_at("name", quote(a.name) + " is not a valid algorithm name (^[a-z][a-z0-9_]{0,63}$)");
  a.applies_when = o.str("applies_when");
  a.priority = static_cast<int>(o.integer("priority", INT_MIN, INT_MAX));
  a.description = o.opt_str("description");
  o.finish();
  return a;
}

Cost parse_cost(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  Cost c{o.str("flops"), o.str("bytes"), o.opt_str("example")};
  o.finish();
  return c;
}

Descriptor parse_descriptor(const std::string& origin, const json& root) {
  Obj o(origin, root, "");
  Descriptor d;
  parse_identity(o, d);
  parse_texts(o, d);
  d.inputs = parse_array(o, "inputs", parse_input);
  d.outputs = parse_array(o, "outputs", parse_output);
  if (o.field("attrs", false)) d.attrs = parse_array(o, "attrs", parse_attr);
  d.shape = parse_object(o, "shape", parse_shape);
  d.kernel = parse_object(o, "kernel", parse_kernel);
  d.target = parse_object(o, "target", parse_target);
  d.schedule = parse_optional_object(o, "schedule", parse_schedule);
  d.tolerance = parse_object(o, "tolerance", parse_tolerance);
  d.traffic = parse_object(o, "traffic", parse_traffic);
  if (o.field("algorithm", false)) d.algorithm = parse_object(o, "algorithm", parse_algorithm);
  if (o.field("cost", false)) d.cost = parse_object(o, "cost", parse_cost);
  o.finish();
  check_descriptor(d, origin);
  if (d.kind == "nn" && !d.shape.named_dims)
    fail(origin, "/shape/named_dims", "must be true for kind \"nn\"");
  if (d.kind == "optimizer" && d.shape.named_dims)
    fail(origin, "/shape/named_dims", "must be false for kind \"optimizer\"");
  if (d.shape.named_dims) {
    if (d.shape.elementwise) fail(origin, "/shape/elementwise", "must be false for kind \"nn\"");
    check_named_dims(d, origin);
  }
  return d;
}

}  // namespace

Descriptor descriptor_from_json(const std::string& text, const std::string& origin) {
  return parse_descriptor(origin, parse_text(text, origin));
}

}  // namespace opforge::registry
