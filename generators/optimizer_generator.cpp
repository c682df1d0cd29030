// Every op of the table as a standard Halide Generator, "opforge_optimizer", so Halide's own
// tooling (GenGen command lines, add_halide_library) can build any opforge op:
//
//   opforge_gen -g opforge_optimizer -o out -e static_library,c_header,stmt \
//       target=x86-64-linux-avx2 op=apply_adam attrs=use_nesterov:true schedule=tasks:16
//
// (GenGen takes one '=' per argument, so lists use NAME:VALUE.)
//
// Inputs are added in configure() in the op's argument order (TensorFlow's), from the same
// declaration the opforge builder uses; the one Tuple-valued output overwrites the states.
// opforge itself compiles through the same DSL functions (dsl/optimizer_pipeline.h).
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
  GeneratorParam<std::string> attrs{"attrs", ""};      // "use_nesterov=true,..."
  GeneratorParam<std::string> recipe{"schedule", ""};  // elementwise recipe: "tasks=16,..."

  Output<Halide::Func> updated{"updated", 1};

  void configure() {
    decl_ = &find_decl(op);
    for (const auto& a : decl_->args()) {
      if (a.role == registry::Input::Role::scalar) {
        scalars_[a.name] = add_input<float>(a.name);
      } else {
        buffers_[a.name] = add_input<Halide::Buffer<float, 1>>(a.name);
      }
    }
  }

  void generate() {
    std::map<std::string, Halide::Expr> values;
    for (auto& [name, in] : buffers_) values[name] = (*in)(i_);
    for (auto& [name, in] : scalars_) values[name] = *in;
    const dsl::AttrValues resolved = decl_->resolve_attrs(parse_list(attrs, "attrs"));
    std::vector<Halide::Expr> v = dsl::state_updates(*decl_, resolved, values);
    if (v.size() == 1) {
      updated(i_) = v[0];
    } else {
      updated(i_) = Halide::Tuple(v);
    }
  }

  void schedule() {
    std::map<std::string, int64_t> given;
    for (const auto& [k, v] : parse_list(recipe, "schedule")) given[k] = std::stoll(v);
    for (auto& [name, in] : buffers_) in->dim(0).set_estimate(0, 1 << 20);
    Halide::Func out = updated;
    for (auto ob : out.output_buffers()) ob.dim(0).set_estimate(0, 1 << 20);
    if (!auto_schedule) {
      dsl::ElementwiseSchedule::apply(out, i_,
                                      dsl::ElementwiseSchedule::resolve(given, get_target()));
    }
  }

 private:
  const dsl::OptimizerDecl* decl_ = nullptr;
  std::map<std::string, Input<Halide::Buffer<float, 1>>*> buffers_;
  std::map<std::string, Input<float>*> scalars_;
  Halide::Var i_{"i"};
};

}  // namespace
}  // namespace opforge::generators

HALIDE_REGISTER_GENERATOR(opforge::generators::OptimizerGenerator, opforge_optimizer)
