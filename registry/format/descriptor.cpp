// The op-variant descriptor and registry index: JSON emission, parsing and validation.
// The JSON form is documented field by field in registry/SCHEMA.md.
#include "opforge/descriptor.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "registry/format/shape_expr.h"

namespace opforge::registry {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------
// Errors and JSON pointers

std::string quote(const std::string& s) {
  return "\"" + s + "\"";
}

// One reference token of a JSON pointer (RFC 6901): '~' -> "~0", '/' -> "~1".
std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string child(const std::string& ptr, const std::string& key) {
  return ptr + "/" + pointer_token(key);
}

std::string child(const std::string& ptr, size_t index) {
  return ptr + "/" + std::to_string(index);
}

[[noreturn]] void fail(const std::string& origin, const std::string& ptr, const std::string& what) {
  throw FormatError(origin + ": " + (ptr.empty() ? "(root)" : ptr) + ": " + what);
}

// ---------------------------------------------------------------------------------------
// Parsing text: syntax errors with line:col, duplicate keys rejected.

struct Position {
  size_t line = 1;
  size_t col = 1;
};

// nlohmann's parse_error::byte counts the characters read, the offending one included.
Position position_of(const std::string& text, size_t byte) {
  size_t offset = byte == 0 ? 0 : byte - 1;
  if (offset > text.size()) offset = text.size();
  Position p;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++p.line;
      line_start = i + 1;
    }
  }
  p.col = offset - line_start + 1;
  return p;
}

// "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..." ->
// "syntax error ...".
std::string parse_error_detail(const std::string& what) {
  size_t bracket = what.find("] ");
  size_t start = bracket == std::string::npos ? 0 : bracket + 2;
  size_t colon = what.find(": ", start);
  return colon == std::string::npos ? what.substr(start) : what.substr(colon + 2);
}

// Tracks where the parser is, to name the pointer of a duplicated object key.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(std::string origin) : origin_(std::move(origin)) {}

  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        push(event == json::parse_event_t::array_start);
        break;
      case json::parse_event_t::key:
        key(parsed.get<std::string>());
        break;
      case json::parse_event_t::value:
        next_element();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        next_element();
        break;
    }
    return true;
  }

 private:
  void key(const std::string& k) {
    Frame& f = frames_.back();
    if (!f.keys.insert(k).second) fail(origin_, child(f.pointer, k), "duplicate key " + quote(k));
    f.key = k;
  }

  struct Frame {
    bool array = false;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
    std::string pointer;
  };

  void push(bool array) {
    Frame f;
    f.array = array;
    if (!frames_.empty()) {
      const Frame& parent = frames_.back();
      f.pointer =
          parent.array ? child(parent.pointer, parent.index) : child(parent.pointer, parent.key);
    }
    frames_.push_back(std::move(f));
  }

  void next_element() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }

  std::string origin_;
  std::vector<Frame> frames_;
};

json parse_text(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text, DuplicateKeyCheck(origin));
  } catch (const json::parse_error& e) {
    Position p = position_of(text, e.byte);
    throw FormatError(origin + ":" + std::to_string(p.line) + ":" + std::to_string(p.col) +
                      ": JSON syntax error: " + parse_error_detail(e.what()));
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    throw FormatError(origin + ": JSON error: " + parse_error_detail(e.what()));
  }
}

// ---------------------------------------------------------------------------------------
// Reading one JSON object: typed fields, required or optional, unknown keys rejected.

class Obj {
 public:
  Obj(const std::string& origin, const json& j, std::string ptr)
      : origin_(origin), j_(j), ptr_(std::move(ptr)) {
    if (!j_.is_object()) fail(origin_, ptr_, "expected object, got " + std::string(j_.type_name()));
  }

  const std::string& origin() const { return origin_; }
  std::string at(const std::string& key) const { return child(ptr_, key); }
  [[noreturn]] void fail_at(const std::string& key, const std::string& what) const {
    fail(origin_, at(key), what);
  }

  // nullptr when absent and optional.
  const json* field(const std::string& key, bool required) {
    known_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) fail_at(key, "missing required field");
      return nullptr;
    }
    return &*it;
  }

  const json& typed(const std::string& key, json::value_t type, const char* type_name) {
    const json& v = *field(key, true);
    check_type(v, type, type_name, at(key));
    return v;
  }

  std::string str(const std::string& key) {
    return typed(key, json::value_t::string, "string").get<std::string>();
  }

  std::string opt_str(const std::string& key) {
    const json* v = field(key, false);
    if (!v) return "";
    check_type(*v, json::value_t::string, "string", at(key));
    return v->get<std::string>();
  }

  bool boolean(const std::string& key) {
    return typed(key, json::value_t::boolean, "boolean").get<bool>();
  }

  int64_t integer(const std::string& key, int64_t lo, int64_t hi) {
    const json& v = *field(key, true);
    return integer_value(v, lo, hi, at(key));
  }

  double number(const std::string& key) {
    const json& v = *field(key, true);
    if (!v.is_number()) type_error(v, "number", at(key));
    return v.get<double>();
  }

  const json& array(const std::string& key) { return typed(key, json::value_t::array, "array"); }

  // Every key of the object must have been asked for.
  void finish() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!known_.count(it.key())) fail_at(it.key(), "unknown key " + quote(it.key()));
    }
  }

  [[noreturn]] void type_error(const json& v, const char* expected, const std::string& ptr,
                               const std::string& note = "") const {
    fail(origin_, ptr, std::string("expected ") + expected + ", got " + v.type_name() + note);
  }

  int64_t integer_value(const json& v, int64_t lo, int64_t hi, const std::string& ptr) const {
    if (!v.is_number_integer()) type_error(v, "integer", ptr);
    bool too_big = v.is_number_unsigned() &&
                   v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    int64_t x = too_big ? 0 : v.get<int64_t>();
    if (too_big || x < lo || x > hi) {
      fail(origin_, ptr,
           "integer " + v.dump() + " out of range [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "]");
    }
    return x;
  }

 private:
  void check_type(const json& v, json::value_t type, const char* type_name,
                  const std::string& ptr) const {
    if (v.type() != type) type_error(v, type_name, ptr);
  }

  const std::string& origin_;
  const json& j_;
  std::string ptr_;
  std::set<std::string> known_;
};

std::vector<std::string> string_array(const std::string& origin, const json& a,
                                      const std::string& ptr) {
  std::vector<std::string> out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_string()) {
      fail(origin, child(ptr, i), std::string("expected string, got ") + a[i].type_name());
    }
    out.push_back(a[i].get<std::string>());
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Names

bool is_lower(char c) {
  return c >= 'a' && c <= 'z';
}
bool is_upper(char c) {
  return c >= 'A' && c <= 'Z';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_ident_char(char c) {
  return is_lower(c) || is_upper(c) || is_digit(c) || c == '_';
}
bool is_path_char(char c) {
  return is_ident_char(c) || c == '.' || c == '-' || c == '/';
}

// Kernel argument names come from Halide ("var", "updated.0"): [A-Za-z0-9_.], 1..128 chars.
bool is_valid_kernel_arg_name(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (!is_ident_char(c) && c != '.') return false;
  }
  return true;
}

// CPU feature names as __builtin_cpu_supports spells them ("avx2", "sse4.1", "x86-64-v3"):
// [A-Za-z0-9_.-], 1..64 chars.
bool is_valid_cpu_feature(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!is_ident_char(c) && c != '.' && c != '-') return false;
  }
  return true;
}

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!is_digit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

std::string checked_name(Obj& o, const std::string& key, bool (*valid)(const std::string&),
                         const char* what) {
  std::string s = o.str(key);
  if (!valid(s)) o.fail_at(key, quote(s) + " is not a valid " + what);
  return s;
}

std::string ident(Obj& o, const std::string& key) {
  return checked_name(o, key, is_valid_identifier, "identifier ([A-Za-z_][A-Za-z0-9_]*, 1..128)");
}

std::string safe_path(Obj& o, const std::string& key) {
  return checked_name(o, key, is_safe_relative_path, "relative path inside the registry");
}

// ---------------------------------------------------------------------------------------
// Enum names

const char* const kDTypeNames[] = {"float16", "bfloat16", "float32", "float64", "int32", "int64"};
const DType kDTypes[] = {DType::f16, DType::bf16, DType::f32, DType::f64, DType::i32, DType::i64};

const char* const kRoleNames[] = {"state", "gradient", "tensor", "scalar", "result"};
const Input::Role kRoles[] = {Input::Role::state, Input::Role::gradient, Input::Role::tensor,
                              Input::Role::scalar, Input::Role::result};

const char* const kAttrTypeNames[] = {"bool", "int", "float", "string"};
const Attr::Type kAttrTypes[] = {Attr::Type::boolean, Attr::Type::integer, Attr::Type::real,
                                 Attr::Type::string};

const char* const kArgKindNames[] = {"input_buffer", "input_scalar", "output_buffer"};
const KernelArg::Kind kArgKinds[] = {KernelArg::Kind::input_buffer, KernelArg::Kind::input_scalar,
                                     KernelArg::Kind::output_buffer};

const char* const kKinds[] = {"optimizer", "bandwidth", "nn"};

template <typename E, size_t N>
const char* enum_name(E value, const E (&values)[N], const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (values[i] == value) return names[i];
  }
  return "unknown";
}

template <typename E, size_t N>
std::optional<E> enum_parse(const std::string& s, const E (&values)[N],
                            const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (s == names[i]) return values[i];
  }
  return std::nullopt;
}

template <size_t N>
std::string one_of(const char* const (&names)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) out += (i ? ", " : "") + std::string(names[i]);
  return "one of: " + out;
}

template <typename E, size_t N>
E enum_field(Obj& o, const std::string& key, const char* what, const E (&values)[N],
             const char* const (&names)[N]) {
  std::string s = o.str(key);
  std::optional<E> v = enum_parse(s, values, names);
  if (!v)
    o.fail_at(key, "unknown " + std::string(what) + " " + quote(s) + " (" + one_of(names) + ")");
  return *v;
}

DType dtype_field(Obj& o, const std::string& key) {
  return enum_field(o, key, "dtype", kDTypes, kDTypeNames);
}

// ---------------------------------------------------------------------------------------
// Attr values: canonical strings <-> typed JSON

std::string format_float(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

std::optional<int64_t> parse_int(const std::string& s) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || std::to_string(v) != s) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<double> parse_float(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v) || format_float(v) != s) return std::nullopt;
  return v;
}

}  // namespace

std::string canonical_attr_value(Attr::Type type, const std::vector<std::string>& choices,
                                 const std::string& text) {
  auto bad = [&](const std::string& want) {
    return std::invalid_argument("expected " + want + ", got '" + text + "'");
  };
  switch (type) {
    case Attr::Type::boolean:
      if (text == "true" || text == "1" || text == "True") return "true";
      if (text == "false" || text == "0" || text == "False") return "false";
      throw bad("true or false");
    case Attr::Type::integer: {
      errno = 0;
      char* end = nullptr;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || errno == ERANGE) throw bad("an integer");
      return std::to_string(v);
    }
    case Attr::Type::real: {
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(v)) throw bad("a finite number");
      return format_float(v);
    }
    case Attr::Type::string:
      if (choices.empty() || std::find(choices.begin(), choices.end(), text) != choices.end()) {
        return text;
      }
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
      throw bad("one of " + list);
  }
  throw bad("a known attr type");
}

namespace {

// Canonical string -> typed JSON; throws when `s` is not canonical for `type`.
ojson attr_value_json(Attr::Type type, const std::string& s, const std::string& origin,
                      const std::string& ptr) {
  switch (type) {
    case Attr::Type::boolean:
      if (s == "true" || s == "false") return s == "true";
      break;
    case Attr::Type::integer:
      if (auto v = parse_int(s)) return *v;
      break;
    case Attr::Type::real:
      if (auto v = parse_float(s)) return *v;
      break;
    case Attr::Type::string:
      return s;
  }
  fail(origin, ptr,
       quote(s) + " is not a canonical " + attr_type_name(type) +
           " value (bool: true/false, int: decimal, float: %.17g, finite)");
}

// Typed JSON -> canonical string.
std::string attr_value_string(Attr::Type type, const json& v, const Obj& o,
                              const std::string& ptr) {
  switch (type) {
    case Attr::Type::boolean:
      if (!v.is_boolean()) o.type_error(v, "boolean", ptr, " (attr type bool)");
      return v.get<bool>() ? "true" : "false";
    case Attr::Type::integer:
      return std::to_string(o.integer_value(v, std::numeric_limits<int64_t>::min(),
                                            std::numeric_limits<int64_t>::max(), ptr));
    case Attr::Type::real:
      if (!v.is_number()) o.type_error(v, "number", ptr, " (attr type float)");
      return format_float(v.get<double>());
    case Attr::Type::string:
      if (!v.is_string()) o.type_error(v, "string", ptr, " (attr type string)");
      return v.get<std::string>();
  }
  return "";
}

// ---------------------------------------------------------------------------------------
// Descriptor -> JSON

ojson input_json(const Input& in) {
  ojson j;
  j["name"] = in.name;
  j["role"] = role_name(in.role);
  j["dtype"] = dtype_name(in.dtype);
  j["rank"] = in.rank;
  j["description"] = in.description;
  if (!in.dims.empty()) j["dims"] = in.dims;
  return j;
}

ojson output_json(const Output& out) {
  ojson j;
  j["name"] = out.name;
  j["kernel_arg"] = out.kernel_arg;
  j["aliases"] = out.aliases;
  j["dtype"] = dtype_name(out.dtype);
  j["rank"] = out.rank;
  if (!out.dims.empty()) j["dims"] = out.dims;
  return j;
}

ojson attr_json(const Attr& a, const std::string& origin, const std::string& ptr) {
  ojson j;
  j["name"] = a.name;
  j["type"] = attr_type_name(a.type);
  j["default"] = attr_value_json(a.type, a.default_value, origin, child(ptr, "default"));
  j["value"] = attr_value_json(a.type, a.value, origin, child(ptr, "value"));
  j["description"] = a.description;
  j["choices"] = ojson::array();
  for (size_t i = 0; i < a.choices.size(); ++i) {
    j["choices"].push_back(
        attr_value_json(a.type, a.choices[i], origin, child(child(ptr, "choices"), i)));
  }
  return j;
}

ojson shape_json(const ShapeConstraints& s) {
  ojson j;
  j["elementwise"] = s.elementwise;
  j["same_shape"] = s.same_shape;
  j["max_elements"] = s.max_elements;
  j["splittable"] = s.splittable;
  j["multi_tensor"] = s.multi_tensor;
  if (!s.segments.empty()) j["segments"] = s.segments;
  if (s.named_dims) {
    j["named_dims"] = true;
    j["checks"] = ojson::array();
    for (const auto& c : s.checks) {
      ojson jc;
      jc["condition"] = c.condition;
      jc["message"] = c.message;
      j["checks"].push_back(jc);
    }
  } else if (!s.elementwise) {
    j["indices"] = s.indices;
    j["row_slices"] = s.row_slices;
  }
  return j;
}

ojson kernel_json(const Kernel& k) {
  ojson j;
  j["file"] = k.file;
  j["entry"] = k.entry;
  j["args"] = ojson::array();
  for (const KernelArg& a : k.args) {
    ojson ja;
    ja["name"] = a.name;
    ja["kind"] = kernel_arg_kind_name(a.kind);
    ja["dtype"] = dtype_name(a.dtype);
    ja["dims"] = a.dims;
    j["args"].push_back(ja);
  }
  return j;
}

ojson target_json(const TargetInfo& t) {
  ojson j;
  j["isa"] = t.isa;
  j["halide_target"] = t.halide_target;
  j["cpu_features"] = t.cpu_features;
  j["priority"] = t.priority;
  return j;
}

ojson schedule_json(const Schedule& s) {
  ojson j;
  j["recipe"] = s.recipe;
  j["params"] = ojson::object();
  for (const auto& [k, v] : s.params) j["params"][k] = v;
  j["summary"] = s.summary;
  return j;
}

template <typename T, typename F>
ojson array_json(const std::vector<T>& items, F&& to) {
  ojson a = ojson::array();
  for (const T& item : items) a.push_back(to(item));
  return a;
}

std::string dump(const ojson& j, const std::string& origin) {
  try {
    return j.dump(2) + "\n";
  } catch (const ojson::exception& e) {  // invalid UTF-8 in a string
    throw FormatError(origin + ": cannot write JSON: " + parse_error_detail(e.what()));
  }
}

// ---------------------------------------------------------------------------------------
// JSON -> Descriptor: one function per object

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

template <typename T>
std::vector<T> parse_array(Obj& o, const std::string& key,
                           T (*parse)(const std::string&, const json&, const std::string&)) {
  const json& a = o.array(key);
  std::string ptr = o.at(key);
  std::vector<T> out;
  for (size_t i = 0; i < a.size(); ++i) {
    out.push_back(parse(o.origin(), a[i], child(ptr, i)));
  }
  return out;
}

Kernel parse_kernel(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  Kernel k;
  k.file = safe_path(o, "file");
  k.entry = ident(o, "entry");
  k.args = parse_array(o, "args", parse_kernel_arg);
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

std::map<std::string, std::string> string_map(const std::string& origin, const json& j,
                                              const std::string& ptr) {
  if (!j.is_object()) fail(origin, ptr, std::string("expected object, got ") + j.type_name());
  std::map<std::string, std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string p = child(ptr, it.key());
    if (!is_valid_identifier(it.key())) fail(origin, p, quote(it.key()) + " is not a valid name");
    if (!it->is_string()) fail(origin, p, std::string("expected string, got ") + it->type_name());
    out[it.key()] = it->get<std::string>();
  }
  return out;
}

Schedule parse_schedule(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  Schedule s;
  s.recipe = o.str("recipe");
  if (const json* p = o.field("params", false)) s.params = string_map(origin, *p, o.at("params"));
  s.summary = o.opt_str("summary");
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

void check_schema(Obj& o, const char* expected) {
  std::string s = o.str("schema");
  if (s != expected) {
    o.fail_at("schema", "unsupported schema " + quote(s) + " (expected " + quote(expected) + ")");
  }
}

// ---------------------------------------------------------------------------------------
// Cross-field checks

void check_unique_names(const std::string& origin, const std::vector<std::string>& names,
                        const std::string& array_ptr, const char* what) {
  std::set<std::string> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!seen.insert(names[i]).second) {
      fail(origin, child(child(array_ptr, i), "name"),
           std::string("duplicate ") + what + " " + quote(names[i]));
    }
  }
}

template <typename T>
std::vector<std::string> names_of(const std::vector<T>& items) {
  std::vector<std::string> out;
  for (const T& item : items) out.push_back(item.name);
  return out;
}

const KernelArg* find_kernel_arg(const Kernel& k, const std::string& name) {
  for (const KernelArg& a : k.args) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

void check_alias(const Descriptor& d, const std::string& origin, size_t i,
                 std::set<std::string>& aliased) {
  const Output& out = d.outputs[i];
  std::string ptr = child(child("/outputs", i), "aliases");
  const Input* in = d.find_input(out.aliases);
  if (!in) fail(origin, ptr, quote(out.aliases) + " names no input");
  if (in->role != Input::Role::state && in->role != Input::Role::result) {
    fail(origin, ptr,
         "input " + quote(in->name) + " has role " + role_name(in->role) +
             "; only state and result inputs can be aliased");
  }
  if (in->dtype != out.dtype) {
    fail(origin, child(child("/outputs", i), "dtype"),
         std::string(dtype_name(out.dtype)) + " differs from aliased input " + quote(in->name) +
             " (" + dtype_name(in->dtype) + ")");
  }
  if (!aliased.insert(in->name).second) {
    fail(origin, ptr, "input " + quote(in->name) + " is aliased by two outputs");
  }
}

void check_output_kernel_arg(const Descriptor& d, const std::string& origin, size_t i,
                             std::set<std::string>& claimed) {
  const Output& out = d.outputs[i];
  std::string ptr = child(child("/outputs", i), "kernel_arg");
  const KernelArg* a = find_kernel_arg(d.kernel, out.kernel_arg);
  if (!a || a->kind != KernelArg::Kind::output_buffer) {
    fail(origin, ptr, quote(out.kernel_arg) + " is not an output_buffer in /kernel/args");
  }
  if (a->dtype != out.dtype) {
    fail(origin, ptr,
         "kernel argument " + quote(a->name) + " is " + dtype_name(a->dtype) + ", output is " +
             dtype_name(out.dtype));
  }
  if (!claimed.insert(a->name).second) {
    fail(origin, ptr, "kernel argument " + quote(a->name) + " is used by two outputs");
  }
}

void check_outputs(const Descriptor& d, const std::string& origin) {
  check_unique_names(origin, names_of(d.outputs), "/outputs", "output name");
  std::set<std::string> aliased, claimed;
  for (size_t i = 0; i < d.outputs.size(); ++i) {
    if (!d.outputs[i].aliases.empty()) check_alias(d, origin, i, aliased);
    check_output_kernel_arg(d, origin, i, claimed);
  }
}

void check_input_kernel_arg(const Descriptor& d, const std::string& origin, size_t i) {
  const KernelArg& a = d.kernel.args[i];
  std::string ptr = child("/kernel/args", i);
  const Input* in = d.find_input(a.name);
  if (!in) fail(origin, child(ptr, "name"), quote(a.name) + " names no input");
  bool scalar = in->role == Input::Role::scalar;
  if (scalar != (a.kind == KernelArg::Kind::input_scalar)) {
    fail(origin, child(ptr, "kind"),
         std::string(kernel_arg_kind_name(a.kind)) + " does not fit input " + quote(in->name) +
             " of role " + role_name(in->role));
  }
  if (a.dtype != in->dtype) {
    fail(origin, child(ptr, "dtype"),
         std::string(dtype_name(a.dtype)) + " differs from input " + quote(in->name) + " (" +
             dtype_name(in->dtype) + ")");
  }
}

bool is_output_kernel_arg(const Descriptor& d, const std::string& name) {
  for (const Output& out : d.outputs) {
    if (out.kernel_arg == name) return true;
  }
  return false;
}

void check_kernel_args(const Descriptor& d, const std::string& origin) {
  check_unique_names(origin, names_of(d.kernel.args), "/kernel/args", "kernel argument");
  for (size_t i = 0; i < d.kernel.args.size(); ++i) {
    const KernelArg& a = d.kernel.args[i];
    if (a.kind != KernelArg::Kind::output_buffer) {
      check_input_kernel_arg(d, origin, i);
    } else if (!is_output_kernel_arg(d, a.name)) {
      fail(origin, child(child("/kernel/args", i), "name"),
           "output_buffer " + quote(a.name) + " is the kernel_arg of no output");
    }
  }
  for (size_t i = 0; i < d.inputs.size(); ++i) {
    const KernelArg* a = find_kernel_arg(d.kernel, d.inputs[i].name);
    if (!a || a->kind == KernelArg::Kind::output_buffer) {
      fail(origin, child(child("/inputs", i), "name"),
           "input " + quote(d.inputs[i].name) + " is not among the kernel's input arguments");
    }
  }
}

void check_shape(const Descriptor& d, const std::string& origin) {
  std::set<std::string> seen;
  for (size_t i = 0; i < d.shape.same_shape.size(); ++i) {
    const std::string& name = d.shape.same_shape[i];
    std::string ptr = child("/shape/same_shape", i);
    const Input* in = d.find_input(name);
    if (!in) fail(origin, ptr, quote(name) + " names no input");
    if (in->role == Input::Role::scalar) fail(origin, ptr, quote(name) + " is a scalar input");
    if (in->role == Input::Role::result) fail(origin, ptr, quote(name) + " is a result input");
    if (!seen.insert(name).second) fail(origin, ptr, quote(name) + " is listed twice");
  }
  if (d.shape.multi_tensor && !d.shape.elementwise) {
    fail(origin, "/shape/multi_tensor",
         "a sparse-rows op (elementwise false) cannot be multi_tensor");
  }
  if (d.shape.splittable && !d.shape.elementwise) {
    fail(origin, "/shape/splittable", "a sparse-rows op (elementwise false) cannot be splittable");
  }
  if (!d.shape.segments.empty()) {
    const Input* seg = d.find_input(d.shape.segments);
    if (!d.shape.elementwise || d.shape.splittable || !seg || seg->role != Input::Role::tensor ||
        seg->dtype != DType::i32 || seen.count(d.shape.segments)) {
      fail(origin, "/shape/segments",
           quote(d.shape.segments) +
               " must name an int32 tensor input outside same_shape, in an elementwise, "
               "unsplittable op");
    }
  }
  if (d.shape.elementwise || d.shape.named_dims) return;
  const Input* idx = d.find_input(d.shape.indices);
  if (!idx || idx->role == Input::Role::scalar ||
      (idx->dtype != DType::i32 && idx->dtype != DType::i64)) {
    fail(origin, "/shape/indices",
         quote(d.shape.indices) + " must name an int32 or int64 tensor input");
  }
  for (size_t i = 0; i < d.shape.row_slices.size(); ++i) {
    const std::string& name = d.shape.row_slices[i];
    const Input* in = d.find_input(name);
    if (!in || in->role == Input::Role::scalar || !seen.insert(name).second ||
        name == d.shape.indices) {
      fail(origin, child("/shape/row_slices", i),
           quote(name) + " must name a tensor input not listed elsewhere in /shape");
    }
  }
}

void check_descriptor(const Descriptor& d, const std::string& origin) {
  check_unique_names(origin, names_of(d.inputs), "/inputs", "input name");
  check_unique_names(origin, names_of(d.attrs), "/attrs", "attr name");
  check_outputs(d, origin);
  check_kernel_args(d, origin);
  check_shape(d, origin);
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

// An NN descriptor's dims and expressions: dim names are identifiers (a leading "B?" may be
// optional), ranks match, every expression parses and names only dims, int/bool scalars and
// int/bool attrs; outputs are fresh buffers.
void check_named_dims(const Descriptor& d, const std::string& origin) {
  std::set<std::string> names;
  for (size_t i = 0; i < d.inputs.size(); ++i) {
    const Input& in = d.inputs[i];
    const std::string ptr = child("/inputs", i);
    if (in.role == Input::Role::scalar) {
      if (in.dtype == DType::i32 || in.dtype == DType::i64) names.insert(in.name);
      continue;
    }
    if (in.role != Input::Role::tensor)
      fail(origin, child(ptr, "role"), "an NN op's tensor inputs have role tensor");
    if (static_cast<int>(in.dims.size()) != in.rank)
      fail(origin, child(ptr, "dims"),
           "names " + std::to_string(in.dims.size()) + " dims for rank " + std::to_string(in.rank));
    for (size_t k = 0; k < in.dims.size(); ++k) {
      std::string n = in.dims[k];
      if (k == 0 && !n.empty() && n.back() == '?') n.pop_back();
      if (!is_valid_identifier(n))
        fail(origin, child(child(ptr, "dims"), k),
             quote(in.dims[k]) + " is not a dim name (an identifier; \"B?\" first for optional)");
      names.insert(n);
    }
  }
  for (const Attr& a : d.attrs) {
    if (a.type == Attr::Type::boolean || a.type == Attr::Type::integer) names.insert(a.name);
  }
  auto check_expr = [&](const std::string& text, const std::string& ptr) {
    try {
      for (const auto& n : ShapeExpr::parse(text).names()) {
        if (!names.count(n))
          fail(origin, ptr,
               quote(n) + " in " + quote(text) +
                   " is not a dim, an int scalar or an int/bool attr of the op");
      }
    } catch (const ShapeExprError& e) {
      fail(origin, ptr, e.what());
    }
  };
  for (size_t i = 0; i < d.outputs.size(); ++i) {
    const Output& out = d.outputs[i];
    const std::string ptr = child("/outputs", i);
    if (!out.aliases.empty()) fail(origin, child(ptr, "aliases"), "NN outputs are fresh buffers");
    if (static_cast<int>(out.dims.size()) != out.rank)
      fail(origin, child(ptr, "dims"),
           "has " + std::to_string(out.dims.size()) + " dims for rank " + std::to_string(out.rank));
    for (size_t k = 0; k < out.dims.size(); ++k) {
      std::string e = out.dims[k];
      if (k == 0 && !e.empty() && e.back() == '?') e.pop_back();
      check_expr(e, child(child(ptr, "dims"), k));
    }
  }
  for (size_t i = 0; i < d.shape.checks.size(); ++i)
    check_expr(d.shape.checks[i].condition, child(child("/shape/checks", i), "condition"));
  if (!d.algorithm.applies_when.empty())
    check_expr(d.algorithm.applies_when, "/algorithm/applies_when");
  if (!d.cost.flops.empty()) check_expr(d.cost.flops, "/cost/flops");
  if (!d.cost.bytes.empty()) check_expr(d.cost.bytes, "/cost/bytes");
  for (size_t i = 0; i < d.kernel.args.size(); ++i) {
    const KernelArg& a = d.kernel.args[i];
    int rank = -1;
    if (const Input* in = d.find_input(a.name)) rank = in->rank;
    for (const Output& out : d.outputs) {
      if (out.kernel_arg == a.name) rank = out.rank;
    }
    if (rank != a.dims)
      fail(origin, child(child("/kernel/args", i), "dims"),
           "has " + std::to_string(a.dims) + " dims, its tensor has rank " + std::to_string(rank));
  }
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

// ---------------------------------------------------------------------------------------
// Index

IndexEntry parse_index_entry(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  IndexEntry e;
  e.variant = ident(o, "variant");
  e.op = checked_name(o, "op", is_valid_op_name, "op name (^[a-z][a-z0-9_]{0,63}$)");
  e.descriptor = safe_path(o, "descriptor");
  e.isa = ident(o, "isa");
  e.attrs = string_map(origin, *o.field("attrs", true), o.at("attrs"));
  o.finish();
  return e;
}

void check_index(const Index& idx, const std::string& origin) {
  std::set<std::string> variants, files;
  for (size_t i = 0; i < idx.variants.size(); ++i) {
    const IndexEntry& e = idx.variants[i];
    std::string ptr = child("/variants", i);
    if (!variants.insert(e.variant).second) {
      fail(origin, child(ptr, "variant"), "duplicate variant " + quote(e.variant));
    }
    if (!files.insert(e.descriptor).second) {
      fail(origin, child(ptr, "descriptor"),
           "descriptor " + quote(e.descriptor) + " is listed twice");
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Public API

const char* dtype_name(DType t) {
  return enum_name(t, kDTypes, kDTypeNames);
}

std::optional<DType> parse_dtype(const std::string& s) {
  return enum_parse(s, kDTypes, kDTypeNames);
}

int dtype_bytes(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f64:
    case DType::i64:
      return 8;
  }
  return 0;
}

std::string storage_tag(DType grad, std::optional<DType> model, std::optional<DType> state) {
  auto short_name = [](DType t) {
    return t == DType::f16 ? std::string("f16") : t == DType::bf16 ? std::string("bf16") : "f32";
  };
  std::string t;
  if (model) {
    t = short_name(grad) + (*model != grad ? short_name(*model) : "") + "m";
  } else if (grad != DType::f32) {
    t = short_name(grad) + "g";
  }
  if (state) t += (t.empty() || *state != grad ? short_name(*state) : "") + "s";
  return t.empty() ? "f32" : t;
}

const char* role_name(Input::Role r) {
  return enum_name(r, kRoles, kRoleNames);
}

const char* attr_type_name(Attr::Type t) {
  return enum_name(t, kAttrTypes, kAttrTypeNames);
}

const char* kernel_arg_kind_name(KernelArg::Kind k) {
  return enum_name(k, kArgKinds, kArgKindNames);
}

const Input* Descriptor::find_input(const std::string& name) const {
  for (const Input& in : inputs) {
    if (in.name == name) return &in;
  }
  return nullptr;
}

const Attr* Descriptor::find_attr(const std::string& name) const {
  for (const Attr& a : attrs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::map<std::string, std::string> Descriptor::attr_values() const {
  std::map<std::string, std::string> out;
  for (const Attr& a : attrs) out[a.name] = a.value;
  return out;
}

std::string to_json(const Descriptor& d) {
  std::string origin = "descriptor " + quote(d.variant);
  ojson j;
  j["schema"] = Descriptor::kSchema;
  j["op"] = d.op;
  j["op_version"] = d.op_version;
  j["variant"] = d.variant;
  j["kind"] = d.kind;
  j["summary"] = d.summary;
  j["formula"] = d.formula;
  j["reference"] = d.reference;
  j["inputs"] = array_json(d.inputs, input_json);
  j["outputs"] = array_json(d.outputs, output_json);
  j["attrs"] = ojson::array();
  for (size_t i = 0; i < d.attrs.size(); ++i) {
    j["attrs"].push_back(attr_json(d.attrs[i], origin, child("/attrs", i)));
  }
  j["shape"] = shape_json(d.shape);
  j["kernel"] = kernel_json(d.kernel);
  j["target"] = target_json(d.target);
  j["schedule"] = schedule_json(d.schedule);
  j["tolerance"] = {{"rtol", d.tolerance.rtol}, {"atol", d.tolerance.atol}};
  j["traffic"] = {{"bytes_read_per_element", d.traffic.bytes_read_per_element},
                  {"bytes_written_per_element", d.traffic.bytes_written_per_element}};
  j["cache_key"] = d.cache_key;
  j["halide_version"] = d.halide_version;
  j["bandwidth_op"] = d.bandwidth_op;
  if (d.shape.named_dims) {
    j["algorithm"] = {{"name", d.algorithm.name},
                      {"applies_when", d.algorithm.applies_when},
                      {"priority", d.algorithm.priority},
                      {"description", d.algorithm.description}};
    j["cost"] = {{"flops", d.cost.flops}, {"bytes", d.cost.bytes}, {"example", d.cost.example}};
  }
  return dump(j, origin);
}

Descriptor descriptor_from_json(const std::string& text, const std::string& origin) {
  return parse_descriptor(origin, parse_text(text, origin));
}

std::string to_json(const Index& idx) {
  ojson j;
  j["schema"] = Index::kSchema;
  j["runtime_library"] = idx.runtime_library;
  j["halide_version"] = idx.halide_version;
  j["variants"] = ojson::array();
  for (const IndexEntry& e : idx.variants) {
    ojson je;
    je["variant"] = e.variant;
    je["op"] = e.op;
    je["descriptor"] = e.descriptor;
    je["isa"] = e.isa;
    je["attrs"] = ojson::object();
    for (const auto& [k, v] : e.attrs) je["attrs"][k] = v;
    j["variants"].push_back(je);
  }
  return dump(j, "index");
}

Index index_from_json(const std::string& text, const std::string& origin) {
  json root = parse_text(text, origin);
  Obj o(origin, root, "");
  Index idx;
  check_schema(o, Index::kSchema);
  idx.runtime_library = safe_path(o, "runtime_library");
  idx.halide_version = o.str("halide_version");
  idx.variants = parse_array(o, "variants", parse_index_entry);
  o.finish();
  check_index(idx, origin);
  return idx;
}

bool is_valid_op_name(const std::string& s) {
  if (s.empty() || s.size() > 64 || !is_lower(s[0])) return false;
  for (char c : s) {
    if (!is_lower(c) && !is_digit(c) && c != '_') return false;
  }
  return true;
}

bool is_valid_identifier(const std::string& s) {
  if (s.empty() || s.size() > 128 || is_digit(s[0])) return false;
  for (char c : s) {
    if (!is_ident_char(c)) return false;
  }
  return true;
}

bool is_safe_relative_path(const std::string& s) {
  if (s.empty() || s.size() > 255 || s[0] == '/') return false;
  for (char c : s) {
    if (!is_path_char(c)) return false;
  }
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('/', start);
    if (end == std::string::npos) end = s.size();
    std::string seg = s.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace opforge::registry
