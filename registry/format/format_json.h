// Internal to registry/format: the JSON plumbing that the descriptor and index reader, writer
// and checks share (errors that name a JSON pointer, strict text parsing, the one-object field
// reader, enum tables and name rules). Not installed; include only from registry/format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "opforge/descriptor.h"

namespace opforge::registry::detail {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------
// Errors and JSON pointers

std::string quote(const std::string& s);
std::string child(const std::string& ptr, const std::string& key);
std::string child(const std::string& ptr, size_t index);
[[noreturn]] void fail(const std::string& origin, const std::string& ptr, const std::string& what);

// ---------------------------------------------------------------------------------------
// JSON text: syntax errors with line:col, duplicate keys rejected; writing with 2-space indent.

json parse_text(const std::string& text, const std::string& origin);
std::string dump(const ojson& j, const std::string& origin);

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
                                      const std::string& ptr);
// An object of string values whose keys pass `key_ok` (default: identifiers).
std::map<std::string, std::string> string_map(const std::string& origin, const json& j,
                                              const std::string& ptr,
                                              bool (*key_ok)(const std::string&) = nullptr);

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

void check_schema(Obj& o, const char* expected);

// ---------------------------------------------------------------------------------------
// Names (descriptor_checks.cpp)

bool is_valid_kernel_arg_name(const std::string& s);
bool is_valid_cpu_feature(const std::string& s);
bool is_sha256_hex(const std::string& s);

// A string field whose value `valid` accepts; else fails naming `what`.
std::string checked_name(Obj& o, const std::string& key, bool (*valid)(const std::string&),
                         const char* what);
std::string ident(Obj& o, const std::string& key);
// An optional SHA-256 field (64 lowercase hex digits); "" when absent.
std::string opt_sha256(Obj& o, const std::string& key);
std::string safe_path(Obj& o, const std::string& key);

// ---------------------------------------------------------------------------------------
// Enum names

inline const char* const kDTypeNames[] = {"float16",       "bfloat16",   "float32", "float64",
                                          "int32",         "int64",      "bool",    "uint8",
                                          "float8_e4m3fn", "float8_e5m2"};
inline const DType kDTypes[] = {DType::f16, DType::bf16, DType::f32, DType::f64,    DType::i32,
                                DType::i64, DType::b8,   DType::u8,  DType::f8e4m3, DType::f8e5m2};

inline const char* const kRoleNames[] = {"state",  "gradient", "tensor",
                                         "scalar", "result",   "block_scale"};
inline const Input::Role kRoles[] = {Input::Role::state,  Input::Role::gradient,
                                     Input::Role::tensor, Input::Role::scalar,
                                     Input::Role::result, Input::Role::block_scale};

inline const char* const kAttrTypeNames[] = {"bool", "int", "float", "string"};
inline const Attr::Type kAttrTypes[] = {Attr::Type::boolean, Attr::Type::integer, Attr::Type::real,
                                        Attr::Type::string};

inline const char* const kArgKindNames[] = {"input_buffer", "input_scalar", "output_buffer"};
inline const KernelArg::Kind kArgKinds[] = {
    KernelArg::Kind::input_buffer, KernelArg::Kind::input_scalar, KernelArg::Kind::output_buffer};

inline const char* const kKinds[] = {"optimizer", "bandwidth", "nn"};

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

DType dtype_field(Obj& o, const std::string& key);

// ---------------------------------------------------------------------------------------
// Attr values: canonical strings <-> typed JSON (attr_value.cpp)

std::string format_float(double x);
// Canonical string -> typed JSON; throws when `s` is not canonical for `type`.
ojson attr_value_json(Attr::Type type, const std::string& s, const std::string& origin,
                      const std::string& ptr);
// Typed JSON -> canonical string.
std::string attr_value_string(Attr::Type type, const json& v, const Obj& o, const std::string& ptr);

// ---------------------------------------------------------------------------------------
// Cross-field checks of a parsed descriptor (descriptor_checks.cpp)

void check_descriptor(const Descriptor& d, const std::string& origin);
// An NN descriptor's dims and expressions.
void check_named_dims(const Descriptor& d, const std::string& origin);

}  // namespace opforge::registry::detail
