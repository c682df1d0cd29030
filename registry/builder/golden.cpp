#include "registry/builder/golden.h"

#include <Halide.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "dsl/optimizer_pipeline.h"
#include "dsl/ulp.h"

namespace opforge::builder {

using registry::Input;

void run_golden(const dsl::ResolvedOp& op, GoldenData& d) {
  const dsl::OptimizerDecl& decl = op.as_optimizer();
  if (decl.is_multi_tensor()) {
    throw std::invalid_argument("op '" + decl.name() +
                                "': the fp64 golden runs single-tensor forms; check the op it "
                                "applies per tensor (tests/generators/test_multi_tensor_ops.cpp "
                                "checks this form)");
  }
  if (decl.storage().quant) {
    throw std::invalid_argument("op '" + decl.name() + "': storage " + decl.storage().tag() +
                                " (8-bit states) is not in the fp64 golden yet; "
                                "tests/generators/test_kernels.cpp checks it against a "
                                "blockwise-quantizing fp64 reference");
  }
  dsl::Bindings in;
  in.compute = Halide::Float(64);
  in.scheduled = false;
  in.root_reductions = true;
  std::vector<Halide::ImageParam> images;
  std::vector<Halide::Param<>> params;
  std::map<std::string, Halide::Buffer<>> buffers;  // keeps the data views alive
  for (const auto& [a, dims] : dsl::argument_layout(op)) {
    if (a.role == Input::Role::scalar) {
      const bool integer = a.dtype == registry::DType::i64;
      Halide::Param<> p(integer ? Halide::Int(64) : Halide::Float(64), a.name);
      if (integer) {
        p.set<int64_t>(static_cast<int64_t>(d.scalars.at(a.name)));
      } else {
        p.set<double>(d.scalars.at(a.name));
      }
      in.scalars[a.name] = p;
      params.push_back(p);
      continue;
    }
    Halide::Buffer<> b;
    if (decl.sparse() && a.name == "indices") {
      b = Halide::Buffer<int64_t>(d.indices.at(a.name).data(), static_cast<int>(d.count));
    } else if (decl.sparse()) {
      const int64_t rows = a.role == Input::Role::state ? d.rows : d.count;
      b = Halide::Buffer<double>(d.tensors.at(a.name).data(), static_cast<int>(d.cols),
                                 static_cast<int>(rows));
    } else {
      // A result holds one element whatever n is.
      const int n = a.role == Input::Role::result ? 1 : static_cast<int>(d.n);
      if (static_cast<int>(d.tensors.at(a.name).size()) < n)
        throw std::invalid_argument("golden: tensor '" + a.name + "' is too short");
      b = Halide::Buffer<double>(d.tensors.at(a.name).data(), n);
    }
    Halide::ImageParam im(b.type(), dims, a.name);
    im.set(b);
    for (int k = 0; k < dims; ++k) in.extents[a.name].push_back(im.dim(k).extent());
    in.tensors[a.name] = im;
    images.push_back(im);
    buffers[a.name] = b;
  }
  Halide::Func out{Halide::Internal::Function("golden")};
  const dsl::Definition def = dsl::define_optimizer(op, in, out, {});
  // Outputs are fresh copies of the states (the sparse form only rewrites indexed rows).
  const std::vector<std::string> states = dsl::output_order(op);  // the Tuple's order
  std::vector<Halide::Buffer<double>> results;
  for (const auto& s : states) results.push_back(Halide::Buffer<double>(buffers.at(s)).copy());
  const std::vector<std::string>& result_names = op.results;
  for (const auto& r : result_names)
    results.push_back(Halide::Buffer<double>(buffers.at(r)).copy());
  std::vector<Halide::Buffer<>> outs(results.begin(), results.end());
  std::vector<Halide::Func> funcs;
  if (!states.empty()) funcs.push_back(out);
  funcs.insert(funcs.end(), def.results.begin(), def.results.end());
  Halide::Pipeline(funcs).realize(Halide::Realization(outs),
                                  Halide::get_jit_target_from_environment());
  std::vector<std::string> names = states;
  names.insert(names.end(), result_names.begin(), result_names.end());
  for (size_t k = 0; k < names.size(); ++k) {
    std::vector<double>& dst = d.tensors.at(names[k]);
    std::copy(results[k].data(), results[k].data() + results[k].number_of_elements(), dst.begin());
  }
}

GoldenErrors compare_with_golden(const std::vector<float>& kernel,
                                 const std::vector<double>& golden, double rtol, double atol) {
  if (kernel.size() != golden.size())
    throw std::invalid_argument("compare_with_golden: " + std::to_string(kernel.size()) +
                                " kernel values against " + std::to_string(golden.size()));
  GoldenErrors e;
  for (size_t i = 0; i < kernel.size(); ++i) {
    const float k = kernel[i];
    const double g = golden[i];
    ++e.elements;
    if (std::isnan(k) || std::isnan(g)) {
      e.exceeding += std::isnan(k) != std::isnan(g);
      continue;
    }
    const double err = std::fabs(k - g);
    e.max_abs = std::max(e.max_abs, err);
    if (g != 0) e.max_rel = std::max(e.max_rel, err / std::fabs(g));
    e.max_ulp = std::max(e.max_ulp, dsl::ulp_distance(k, static_cast<float>(g)));
    e.exceeding += !(err <= atol + rtol * std::fabs(g));
  }
  return e;
}

}  // namespace opforge::builder
