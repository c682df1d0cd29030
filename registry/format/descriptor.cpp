// The op-variant descriptor's types: enum names, dtype sizes, lookups. Reading, writing and
// checking the JSON form live in descriptor_read.cpp, descriptor_write.cpp and
// descriptor_checks.cpp; the index in index.cpp.
#include "opforge/descriptor.h"

#include "registry/format/format_json.h"

namespace opforge::registry {

using namespace detail;

const char* dtype_name(DType t) {
  return enum_name(t, kDTypes, kDTypeNames);
}

std::optional<DType> parse_dtype(const std::string& s) {
  return enum_parse(s, kDTypes, kDTypeNames);
}

int dtype_bytes(DType t) {
  switch (t) {
    case DType::b8:
    case DType::u8:
    case DType::f8e4m3:
    case DType::f8e5m2:
      return 1;
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
  auto short_name = [](DType t) -> std::string {
    switch (t) {
      case DType::f16:
        return "f16";
      case DType::bf16:
        return "bf16";
      case DType::f8e4m3:
        return "e4m3";
      case DType::f8e5m2:
        return "e5m2";
      default:
        return "f32";
    }
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

std::string quantized_storage_tag(DType grad, std::optional<DType> model, bool linear_map,
                                  int64_t block) {
  std::string t = storage_tag(grad, model, std::nullopt);
  t = (t == "f32" ? "" : t) + (linear_map ? "q8ls" : "q8s");
  return block == 256 ? t : t + std::to_string(block);
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

}  // namespace opforge::registry
