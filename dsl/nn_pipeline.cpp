#include "dsl/nn_pipeline.h"

#include <stdexcept>

#include "dsl/output_prefetch.h"
#include "registry/format/shape_expr.h"

namespace opforge::dsl {

using registry::Input;
using registry::KernelArg;

KernelPipeline build_nn_pipeline(const ResolvedOp& op, const Halide::Target& target,
                                 const std::map<std::string, int64_t>& schedule) {
  const NnOpDecl& decl = op.as_nn();
  decl.validate();
  const std::string& algorithm = op.algorithm;
  const NnAlgorithm& algo = op.nn_algorithm();
  KernelPipeline r;
  NnArgs args;
  args.attrs = op.attrs;
  args.target = target;
  args.schedule = schedule;
  // Estimates by dim name (for the output too, where its dims evaluate from them alone).
  std::map<std::string, int64_t> env = decl.estimates();
  for (const auto& a : decl.attrs()) {
    if (a.type == registry::Attr::Type::integer) env[a.name] = std::stoll(args.attrs.at(a.name));
    if (a.type == registry::Attr::Type::boolean) env[a.name] = args.attrs.at(a.name) == "true";
  }
  for (const auto& a : decl.args()) {
    if (a.is_scalar) {
      Halide::Param<> p(halide_type(a.scalar.dtype), a.scalar.name);
      args.scalars[a.scalar.name] = p;
      r.arguments.push_back(p);
      r.kernel_args.push_back({a.scalar.name, KernelArg::Kind::input_scalar, a.scalar.dtype, 0});
      r.inputs.push_back({a.scalar.name,
                          Input::Role::scalar,
                          a.scalar.dtype,
                          0,
                          a.scalar.description,
                          {},
                          a.scalar.domain});
      continue;
    }
    const NnTensorDecl& t = a.tensor;
    const int dims = static_cast<int>(t.dims.size());
    const registry::DType dtype = decl.tensor_dtype(t.name, op.attrs);
    Halide::ImageParam im(halide_type(dtype), dims, t.name);
    for (int d = 0; d < dims; ++d) {
      std::string n = t.dims[dims - 1 - d];  // Halide dim 0 is the innermost
      if (!n.empty() && n.back() == '?') n.pop_back();
      auto it = env.find(n);
      if (it != env.end()) im.dim(d).set_estimate(0, static_cast<int>(it->second));
    }
    args.tensors.emplace(t.name, im);
    r.arguments.push_back(im);
    r.kernel_args.push_back({t.name, KernelArg::Kind::input_buffer, dtype, dims});
    r.inputs.push_back({t.name, Input::Role::tensor, dtype, dims, t.description, t.dims});
  }
  for (const auto& o : decl.outputs())
    args.output_dtypes[o.name] = decl.tensor_dtype(o.name, op.attrs);
  for (const auto& a : decl.attrs()) {
    r.attrs.push_back(
        {a.name, a.type, a.default_value, args.attrs.at(a.name), a.description, a.choices});
  }

  NnKernel k = algo.build(args);
  const std::string who =
      "op '" + decl.name() + "'" + (algorithm.empty() ? "" : " algorithm '" + algorithm + "'");
  for (const auto& [name, value] : schedule) {
    auto it = k.schedule_params.find(name);
    if (it != k.schedule_params.end() && it->second == value) continue;
    std::string names;
    for (const auto& [n, v] : k.schedule_params) names += (names.empty() ? "" : ", ") + n;
    throw std::invalid_argument(
        who + (it == k.schedule_params.end()
                   ? " has no schedule param '" + name + "' (its params: " + names + ")"
                   : ": schedule param '" + name + "' is fixed by its schedule, not settable"));
  }
  if (k.outputs.size() != decl.outputs().size()) {
    throw std::invalid_argument("op '" + decl.name() + "' algorithm '" + algorithm + "' returns " +
                                std::to_string(k.outputs.size()) + " outputs, the op declares " +
                                std::to_string(decl.outputs().size()));
  }
  for (size_t i = 0; i < k.outputs.size(); ++i) {
    const NnOutputDecl& o = decl.outputs()[i];
    const registry::DType dtype = args.output_dtypes.at(o.name);
    Halide::Func f = k.outputs[i];
    const int dims = static_cast<int>(o.dims.size());
    if (f.name() != o.name || f.dimensions() != dims || f.outputs() != 1 ||
        f.output_types()[0] != halide_type(dtype)) {
      throw std::invalid_argument(
          "op '" + decl.name() + "' algorithm '" + algorithm + "': output " + std::to_string(i) +
          " is Func '" + f.name() + "' with " + std::to_string(f.dimensions()) +
          " dims; the op declares '" + o.name + "' with " + std::to_string(dims) + " dims of " +
          registry::dtype_name(dtype) +
          " (make outputs with dsl::output_func(name), define them with NnArgs::store)");
    }
    Halide::OutputImageParam ob = f.output_buffer();
    for (int d = 0; d < dims; ++d) {
      std::string e = o.dims[dims - 1 - d];
      if (!e.empty() && e.back() == '?') e.pop_back();
      if (auto v = registry::ShapeExpr::parse(e).evaluate(env))
        ob.dim(d).set_estimate(0, static_cast<int>(*v));
    }
    r.kernel_args.push_back({o.name, KernelArg::Kind::output_buffer, dtype, dims});
    r.outputs.push_back({o.name, o.name, "", dtype, dims, o.dims});
  }
  r.pipeline = Halide::Pipeline(k.outputs);
  r.algorithm = algorithm_text(k.outputs);
  add_output_prefetch_pass(r.pipeline, k.outputs, r.algorithm);
  r.schedule_recipe = "nn/" + decl.name() + "/" + (algorithm.empty() ? "default" : algorithm);
  r.schedule_params = k.schedule_params;
  r.schedule_summary = k.schedule_summary;
  return r;
}

}  // namespace opforge::dsl
