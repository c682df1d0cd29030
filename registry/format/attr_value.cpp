// Attr values: the canonical strings a descriptor holds <-> their typed JSON form.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "registry/format/format_json.h"

namespace opforge::registry {

namespace detail {

std::string format_float(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

namespace {

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

}  // namespace detail

using detail::format_float;

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

}  // namespace opforge::registry
