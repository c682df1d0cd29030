// Every op of the table as a standard Halide Generator, "opforge_optimizer", so Halide's own
// tooling (GenGen command lines, add_halide_library) can build any opforge op:
//
//   opforge_gen -g opforge_optimizer -o out -e static_library,c_header,stmt
//       target=x86-64-linux-avx2 op=apply_adam attrs=use_nesterov:true schedule=tasks:16
//
// (one command line; GenGen takes one '=' per argument, so lists use NAME:VALUE.)
//
// Inputs are added in configure() in the op's argument order (TensorFlow's), from the same
// declaration the opforge builder uses; the one Tuple-valued output overwrites the states.
// The update and its schedule come from dsl::define_optimizer, as in opforge's own builds.
#include <Halide.h>

#include <sstream>

#include "dsl/elementwise_schedule.h"
#include "dsl/optimizer_pipeline.h"
#include "generators/op_table.h"

namespace opforge::generators {
namespace {

// "a:1,b:2" (or "a=1,b=2" from C++) -> map; empty text -> empty map.
std::map<std::string, std::string> parse_list(const std::string& text, const char* what) {
  std::map<std::string, std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find_first_of(":=");
    if (eq == std::string::npos || eq == 0) {
      throw std::invalid_argument(std::string(what) + " '" + item + "': expected NAME:VALUE");
    }
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

class OptimizerGenerator : public Halide::Generator<OptimizerGenerator> {
 public:
  GeneratorParam<std::string> op{"op", ""};
  GeneratorParam<std::string> attrs{"attrs", ""};      // "use_nesterov:true,..."
  GeneratorParam<std::string> recipe{"schedule", ""};  // elementwise recipe: "tasks:16,..."

  Output<Halide::Func> updated{"updated"};

  void configure() {
    op_ = dsl::resolve(find_decl(op), parse_list(attrs, "attrs"));
    decl_ = &op_.as_optimizer();
    // The Generator's one Tuple-valued Output is the states; a results-only op (global_norm)
    // has none to define.
    if (op_.states.empty())
      throw std::invalid_argument("op '" + decl_->name() +
                                  "' writes results only; its Generator form needs states");
    for (const auto& [a, dims] : dsl::argument_layout(op_)) {
      const Halide::Type t = dsl::halide_type(a.dtype);
      if (dims == 0) {
        scalars_[a.name] = add_input<Halide::Expr>(a.name, t);
      } else {
        buffers_[a.name] = {add_input<Halide::Buffer<>>(a.name, t, dims), dims};
      }
    }
    out_dims_ = decl_->sparse() || decl_->is_multi_tensor() ? 2 : 1;
    updated.set_dimensions(out_dims_);
    // Results (found_inf, global_norm): one-element outputs after `updated`.
    for (const auto& r : op_.results)
      results_.push_back(add_output<Halide::Func>("result_" + r, Halide::Float(32), 1));
  }

  void generate() {
    dsl::Bindings in;
    in.mask_compares = get_target().has_feature(Halide::Target::AVX512);
    in.permutes = dsl::permutes_of(get_target());
    // The 8-bit states' lookups call dsl/table_lookup.c: its bitcode goes with the module.
    const std::vector<uint8_t>& lookups = dsl::table_lookup_bitcode(get_target());
    if (!lookups.empty()) {
      get_externs_map()->emplace(
          "opforge.table_lookup",
          Halide::ExternalCode::bitcode_wrapper(get_target(), lookups, "opforge.table_lookup"));
    }
    for (auto& [name, b] : buffers_) {
      in.tensors[name] = *b.first;
      for (int d = 0; d < b.second; ++d) in.extents[name].push_back(b.first->dim(d).extent());
    }
    for (auto& [name, s] : scalars_) in.scalars[name] = *s;
    std::map<std::string, int64_t> given;
    for (const auto& [k, v] : parse_list(recipe, "schedule")) given[k] = std::stoll(v);
    const auto sched = dsl::ElementwiseSchedule::resolve(given, get_target());
    Halide::Func out = updated;
    const dsl::Definition def = dsl::define_optimizer(op_, in, out, sched);
    for (size_t k = 0; k < results_.size(); ++k) {
      *results_[k] = def.results.at(k);
      results_[k]->set_estimates({{0, 1}});
    }
    for (auto& [name, b] : buffers_) {
      for (int d = 0; d < b.second; ++d) b.first->dim(d).set_estimate(0, 1 << 16);
    }
    for (auto ob : out.output_buffers()) {
      for (int d = 0; d < out_dims_; ++d) ob.dim(d).set_estimate(0, 1 << 16);
    }
  }

 private:
  dsl::ResolvedOp op_;
  const dsl::OptimizerDecl* decl_ = nullptr;
  std::map<std::string, std::pair<Input<Halide::Buffer<>>*, int>> buffers_;
  std::map<std::string, Input<Halide::Expr>*> scalars_;
  std::vector<Output<Halide::Func>*> results_;
  int out_dims_ = 1;
};

}  // namespace
}  // namespace opforge::generators

HALIDE_REGISTER_GENERATOR(opforge::generators::OptimizerGenerator, opforge_optimizer)
