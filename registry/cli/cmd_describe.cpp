// opforge describe: one op's descriptor, variants and how to call it.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "opforge/runtime.hpp"
#include "registry/cli/commands.h"
#include "registry/cli/text.h"

namespace opforge::cli {

namespace {

// The op's declared attrs: name, type, default, description; a string attr's choices.
void print_attrs(const registry::Descriptor& d) {
  std::printf("attrs:\n");
  if (d.attrs.empty()) std::printf("  (none)\n");
  for (const auto& at : d.attrs) {
    std::printf("  %-14s %-6s default %-6s %s\n", at.name.c_str(),
                registry::attr_type_name(at.type), at.default_value.c_str(),
                at.description.c_str());
    if (!at.choices.empty()) {
      std::string list;
      for (const auto& c : at.choices) list += (list.empty() ? "" : " | ") + c;
      std::printf("  %-14s choices %s\n", "", list.c_str());
    }
  }
}

// The variants (id, ISA, attrs, schedule) and the `opforge run` line of the op.
void print_variants_and_run(const std::vector<registry::Descriptor>& vs) {
  const registry::Descriptor& d = vs.front();
  std::printf("variants:\n");
  for (const auto& v : vs) {
    // Optimizer ops select their storage (f32, bf16s, q8ls, ...) by --attr storage=TAG too.
    std::map<std::string, std::string> attrs = v.attr_values();
    if (!v.shape.named_dims) attrs["storage"] = storage_tag(v);
    std::printf("  %-50s %-7s attrs %s\n      %s\n", v.variant.c_str(), v.target.isa.c_str(),
                attrs_text(attrs).c_str(), v.schedule.summary.c_str());
    if (!v.schedule.tuning_machine.empty()) std::printf("      %s\n", tuning_text(v).c_str());
  }
  std::printf("\nrun it: opforge run %s", d.op.c_str());
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::scalar) {
      std::printf(" --scalar %s=VALUE", in.name.c_str());
    } else {
      std::printf(" --in %s=%s.npy", in.name.c_str(), in.name.c_str());
    }
  }
  std::printf(" --out DIR\n");
}

std::string dims_text(const std::vector<std::string>& dims) {
  return "[" + join(dims, ", ") + "]";
}

// An NN op: named dims, fresh outputs and their shape rule, the checks, and every algorithm
// with the condition under which the runtime picks it.
void describe_nn(const std::vector<registry::Descriptor>& vs) {
  const registry::Descriptor& d = vs.front();
  std::printf("arguments (in order; dims outermost first, a leading \"B?\" may be omitted):\n");
  for (const auto& in : d.inputs) {
    const bool scalar = in.role == registry::Input::Role::scalar;
    std::printf("  %-12s %-8s %-22s %s\n", in.name.c_str(), registry::dtype_name(in.dtype),
                scalar ? "scalar" : dims_text(in.dims).c_str(), in.description.c_str());
  }
  std::printf("outputs (fresh buffers, passed by name):\n");
  for (const auto& o : d.outputs) {
    std::printf("  %-12s %-8s %s\n", o.name.c_str(), registry::dtype_name(o.dtype),
                dims_text(o.dims).c_str());
  }
  std::printf("checks (every call):\n");
  if (d.shape.checks.empty()) std::printf("  (none beyond equal extents of equal dim names)\n");
  for (const auto& c : d.shape.checks)
    std::printf("  %-40s %s\n", c.condition.c_str(), c.message.c_str());
  print_attrs(d);
  // One line per algorithm, best priority first: the runtime's choice rule.
  std::vector<const registry::Descriptor*> algos;
  std::set<std::string> seen;
  for (const auto& v : vs) {
    if (seen.insert(v.algorithm.name).second) algos.push_back(&v);
  }
  std::stable_sort(algos.begin(), algos.end(), [](const auto* a, const auto* b) {
    return a->algorithm.priority > b->algorithm.priority;
  });
  std::printf(
      "algorithms (the runtime takes the highest priority whose condition holds for the call; "
      "--attr algorithm=NAME forces one):\n");
  for (const auto* v : algos) {
    const auto& al = v->algorithm;
    std::printf(
        "  %-10s priority %-3d when %s\n      %s\n      tolerance vs fp64 reference: "
        "|err| <= %g + %g*|ref|\n",
        al.name.empty() ? "(default)" : al.name.c_str(), al.priority,
        al.applies_when.empty() ? "always" : al.applies_when.c_str(), al.description.c_str(),
        v->tolerance.atol, v->tolerance.rtol);
  }
  if (!d.cost.flops.empty() || !d.cost.bytes.empty())
    std::printf("cost per call: flops %s; bytes %s\n",
                d.cost.flops.empty() ? "-" : d.cost.flops.c_str(),
                d.cost.bytes.empty() ? "-" : d.cost.bytes.c_str());
  std::printf("\n");
  print_variants_and_run(vs);
}

// A scalar's typical value and domain, as describe and an op's --help show them:
// " (typical 0.9, in [0, 1))"; "" for tensors.
std::string scalar_values_text(const registry::Input& in) {
  if (in.role != registry::Input::Role::scalar) return "";
  std::vector<std::string> parts;
  if (in.typical) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "typical %.9g", *in.typical);
    parts.push_back(buf);
  }
  if (!in.domain.empty() && in.domain != "any") parts.push_back("in " + in.domain);
  if (parts.empty()) return "";
  return " (" + join(parts, ", ") + ")";
}

}  // namespace

std::string op_help(const Args& a, const std::string& op) {
  const registry::Descriptor d = Registry::open(registry_dir(a))->variants(op).front();
  std::string s = d.op + ": " + d.summary + "\n  " + d.formula + "\n\narguments (in order):\n";
  for (const auto& in : d.inputs) {
    const bool scalar = in.role == registry::Input::Role::scalar;
    std::string left = std::string(scalar ? "  --scalar " : "  --in ") + in.name +
                       (scalar ? "=VALUE" : "=FILE.npy");
    left.resize(std::max<size_t>(left.size() + 1, 32), ' ');
    s += left + (in.dims.empty() ? registry::role_name(in.role) : dims_text(in.dims)) + ", " +
         registry::dtype_name(in.dtype) + ": " + in.description + scalar_values_text(in) + "\n";
  }
  for (const auto& at : d.attrs) {
    std::string left = "  --attr " + at.name + "=" + registry::attr_type_name(at.type);
    left.resize(std::max<size_t>(left.size() + 1, 32), ' ');
    s += left + "default " + at.default_value + ": " + at.description + "\n";
  }
  if (!d.shape.named_dims) return s;
  // NN ops: the algorithm pseudo-attr and the outputs run allocates.
  std::set<std::string> algos;
  for (const auto& v : Registry::open(registry_dir(a))->variants(op)) {
    if (!v.algorithm.name.empty()) algos.insert(v.algorithm.name);
  }
  if (!algos.empty()) {
    std::string left = "  --attr algorithm=NAME";
    left.resize(32, ' ');
    s += left + "one of " + join({algos.begin(), algos.end()}, ", ") +
         " (default: picked by shape; `opforge describe " + op + "` shows the rule)\n";
  }
  s += "\noutputs (allocated by run, written to DIR/NAME.npy):\n";
  for (const auto& o : d.outputs) s += "  " + o.name + " " + dims_text(o.dims) + "\n";
  return s;
}

int cmd_describe(const Args& a) {
  auto reg = Registry::open(registry_dir(a));
  const std::string op = a.positional.at(0);
  auto vs = reg->variants(op);
  if (a.has("json")) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& d : vs) j.push_back(nlohmann::json::parse(registry::to_json(d)));
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  const registry::Descriptor& d = vs.front();
  std::printf("%s (v%d, %s): %s\n", d.op.c_str(), d.op_version, d.kind.c_str(), d.summary.c_str());
  std::printf("  reference: %s\n  formula:   %s\n\n", d.reference.c_str(), d.formula.c_str());
  if (d.shape.named_dims) {
    describe_nn(vs);
    return 0;
  }
  std::printf("arguments (in order):\n");
  for (const auto& in : d.inputs) {
    std::printf("  %-14s %-9s %-8s %s%s\n", in.name.c_str(), registry::role_name(in.role),
                registry::dtype_name(in.dtype), in.description.c_str(),
                scalar_values_text(in).c_str());
  }
  // Arguments can depend on attrs (apply_adamw: v_max with amsgrad): list the other forms.
  std::set<std::string> forms = {join([&] {
    std::vector<std::string> n;
    for (const auto& in : d.inputs) n.push_back(in.name);
    return n;
  }())};
  std::set<std::string> storages;  // mixed-precision forms, listed in their own section
  for (const auto& v : vs) {
    std::vector<std::string> names;
    for (const auto& in : v.inputs) names.push_back(in.name);
    if (storage_tag(v) != "f32") {
      std::string dt;
      for (const auto& in : v.inputs) {
        if (in.role != registry::Input::Role::scalar && in.dtype != registry::DType::f32)
          dt += std::string(dt.empty() ? "" : ", ") + in.name + " " +
                registry::dtype_name(in.dtype) +
                (in.quant_map.empty() ? "" : " codes (" + in.quant_map + " map)");
      }
      if (v.shape.block > 0) {  // 8-bit states: their absmaxes
        dt += "; one float32 absmax per " + std::to_string(v.shape.block) +
              " elements in each *_absmax";
      }
      storages.insert(storage_tag(v) + " (" + attrs_text(v.attr_values()) + "): " + join(names) +
                      "; " + dt);
      continue;
    }
    if (forms.insert(join(names)).second) {
      std::printf("  with %s: %s\n", attrs_text(v.attr_values()).c_str(), join(names).c_str());
    }
  }
  if (!storages.empty()) {
    std::printf(
        "mixed precision (--attr storage=TAG; tensors not listed are fp32; `model` is the "
        "write-only copy of the fp32 master var):\n");
    for (const auto& l : storages) std::printf("  %s\n", l.c_str());
  }
  std::printf("outputs (in place):\n");
  for (const auto& o : d.outputs) {
    std::printf("  %-14s overwrites %-8s (kernel argument %s)\n", o.name.c_str(), o.aliases.c_str(),
                o.kernel_arg.c_str());
  }
  print_attrs(d);
  std::printf(
      "shape: elementwise, equal shapes for %s (any rank, flattened; at most %lld "
      "elements per kernel call, %s)\n",
      join(d.shape.same_shape).c_str(), static_cast<long long>(d.shape.max_elements),
      d.shape.splittable ? "larger tensors are updated in slices"
                         : "not splittable: larger tensors are refused");
  if (!d.shape.segments.empty()) {
    std::printf(
        "multi-tensor: the flat buffers of many model tensors as K chunks of C = elements/K (a "
        "multiple of 16), '%s' naming each chunk's tensor; norms per tensor (call_model builds "
        "'%s' from a ModelLayout)\n",
        d.shape.segments.c_str(), d.shape.segments.c_str());
  } else if (d.shape.multi_tensor) {
    std::printf(
        "multi-tensor: one call may update a whole model's flat buffers (call_model, "
        "bench --model)\n");
  }
  std::printf("tolerance vs fp64 reference: |err| <= %g + %g*|ref|", d.tolerance.atol,
              d.tolerance.rtol);
  if (d.tolerance.conditioning > 0) {
    std::printf(
        " + %g*(|fp32 evaluation - ref| + its one-ulp input sensitivity) (the update's "
        "conditioning)",
        d.tolerance.conditioning);
  }
  std::printf("\n");
  std::printf("traffic: %d B read + %d B written per element\n\n", d.traffic.bytes_read_per_element,
              d.traffic.bytes_written_per_element);
  print_variants_and_run(vs);
  return 0;
}

Command describe_command() {
  return {{"describe",
           "OP",
           "Show an op's declaration: formula, arguments, attrs, variants, tolerance",
           {registry_option(), json_option()}},
          cmd_describe};
}

}  // namespace opforge::cli
