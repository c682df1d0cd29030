// Descriptor -> JSON (the form registry/SCHEMA.md documents).
#include "registry/format/format_json.h"

namespace opforge::registry {

using namespace detail;

namespace {

ojson input_json(const Input& in) {
  ojson j;
  j["name"] = in.name;
  j["role"] = role_name(in.role);
  j["dtype"] = dtype_name(in.dtype);
  j["rank"] = in.rank;
  j["description"] = in.description;
  if (!in.dims.empty()) j["dims"] = in.dims;
  if (!in.domain.empty()) j["domain"] = in.domain;
  if (!in.quant_map.empty()) j["quant_map"] = in.quant_map;
  if (in.default_value) j["default"] = *in.default_value;
  if (in.typical) j["typical"] = *in.typical;
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
  if (s.block > 0) j["block"] = s.block;
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
  if (!k.sha256.empty()) j["sha256"] = k.sha256;
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
  if (!s.tuning_machine.empty()) {
    j["tuning"] = {{"machine", s.tuning_machine}, {"family", s.tuning_family}};
  }
  return j;
}

template <typename T, typename F>
ojson array_json(const std::vector<T>& items, F&& to) {
  ojson a = ojson::array();
  for (const T& item : items) a.push_back(to(item));
  return a;
}

}  // namespace

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
  if (d.tolerance.conditioning > 0) j["tolerance"]["conditioning"] = d.tolerance.conditioning;
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

}  // namespace opforge::registry
