#include "registry/cache/cache_key.h"

namespace opforge::cache {

namespace {

std::string format_part(const std::string& artifacts) {
  return "opforge-cache/" + std::to_string(kFormatVersion) + "/" + artifacts;
}

std::string arguments_text(const std::vector<registry::KernelArg>& args) {
  std::string s;
  for (const auto& a : args) {
    s += a.name + ":" + registry::kernel_arg_kind_name(a.kind) + ":" +
         registry::dtype_name(a.dtype) + ":" + std::to_string(a.dims) + ";";
  }
  return s;
}

std::string schedule_text(const std::string& recipe, const std::map<std::string, int64_t>& params) {
  std::string s = recipe + "{";
  for (const auto& [k, v] : params) s += k + "=" + std::to_string(v) + ",";
  return s + "}";
}

}  // namespace

KeyBuilder kernel_key(const KernelKeyParts& p) {
  KeyBuilder k;
  k.add("format", format_part(p.artifacts))
      .add("halide", p.halide)
      .add("target", p.target)
      .add("entry", p.entry)
      .add("arguments", arguments_text(p.arguments))
      .add("algorithm", p.algorithm)
      .add("schedule", schedule_text(p.schedule_recipe, p.schedule_params))
      .add("dsl_sources", p.dsl_sources);
  for (const auto& [name, value] : p.extra) k.add(name, value);
  return k;
}

KeyBuilder runtime_key(const std::string& artifacts, const std::string& halide,
                       const std::string& target) {
  KeyBuilder k;
  k.add("format", format_part(artifacts))
      .add("halide", halide)
      .add("target", target)
      .add("entry", "runtime");
  return k;
}

}  // namespace opforge::cache
