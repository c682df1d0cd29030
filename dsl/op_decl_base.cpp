#include "dsl/op_decl_base.h"

#include <cstdio>
#include <stdexcept>

namespace opforge::dsl {

OpDecl::OpDecl(std::string name, std::string kind, registry::Tolerance tolerance)
    : name_(std::move(name)), kind_(std::move(kind)), tolerance_(tolerance) {
  if (!registry::is_valid_op_name(name_)) fail("op names must match ^[a-z][a-z0-9_]{0,63}$");
}

void OpDecl::fail(const std::string& msg) const {
  throw std::invalid_argument("op '" + name_ + "': " + msg);
}

void OpDecl::add_attr(AttrDecl a) {
  if (!registry::is_valid_identifier(a.name)) fail("attr name '" + a.name + "' is invalid");
  for (const auto& x : attrs_) {
    if (x.name == a.name) fail("attr '" + a.name + "' declared twice");
  }
  for (const auto& x : argument_names()) {
    if (x == a.name) fail("attr '" + a.name + "' has an argument's name");
  }
  attrs_.push_back(std::move(a));
}

void OpDecl::set_named_in_id_off_default(const std::string& attr) {
  for (auto& a : attrs_) {
    if (a.name == attr) {
      a.in_id_at_default = false;
      return;
    }
  }
  fail("named_in_id_off_default: no attr '" + attr + "' (declare it first)");
}

AttrValues OpDecl::resolve_attrs(const AttrValues& given) const {
  AttrValues out;
  for (const auto& [k, v] : given) {
    bool known = false;
    for (const auto& a : attrs_) known = known || a.name == k;
    if (!known) fail("unknown attr '" + k + "'");
  }
  for (const auto& a : attrs_) {
    auto it = given.find(a.name);
    try {
      out[a.name] = it == given.end() ? a.default_value : canonicalize_attr(a, it->second);
    } catch (const std::invalid_argument& e) {
      fail(e.what());
    }
  }
  return out;
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
