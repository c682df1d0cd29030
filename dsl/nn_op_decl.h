// An NN op (layer_norm, softmax, matmul, conv2d, ...), declared once: tensors with named
// dimensions, run-time scalars, compile-time attrs, the shape rule of its outputs, and one or
// more algorithms, each with the shape condition under which it applies and a function that
// defines and schedules its Halide pipeline. The registry descriptor (kind "nn"), the runtime's
// shape checks and algorithm choice, and the CLI help all come from this one declaration.
//
//   NnOpDecl("rms_norm")
//       .input("x", {"R", "C"}, "Rows to normalize")
//       .input("gamma", {"C"}, "Scale")
//       .scalar("eps", "Added to the mean square")
//       .output("y", {"R", "C"}, "Normalized rows")
//       .algorithm("", "", 0, "", [](const NnArgs& a) { ... return NnKernel{{y}, "..."}; });
//
// Shapes: dims are listed outermost first (numpy order). A dim name used by several tensors
// must have one extent. A leading dim spelled "B?" may be absent from a tensor (then it counts
// as 1); an output whose first dim is "B?" has it only when some input had it. Output dims and
// conditions are shape expressions (registry/format/shape_expr.h): integers, dim names, int
// and bool scalars and attrs, + - * / % (Halide's: division rounds down), min(a, b),
// max(a, b), comparisons, && || !, parentheses.
//
// Halide side: every tensor is an ImageParam indexed innermost first (x[N, C, H, W] is
// x(w, h, c, n)), dense row-major (dim 0 stride 1). An algorithm's output Funcs must be named
// like the declared outputs and take their dims innermost first.
#pragma once

#include <Halide.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dsl/op_decl_base.h"
#include "opforge/descriptor.h"

namespace opforge::dsl {

struct NnTensorDecl {
  std::string name;
  std::vector<std::string> dims;  // outermost first; a leading "B?" is optional
  std::string description;
  registry::DType dtype = registry::DType::f32;
};

struct NnScalarDecl {
  std::string name;
  registry::DType dtype = registry::DType::f32;  // f32 or i32
  std::string description;
  std::string domain = "finite";  // opforge/scalar_domain.h
};

struct NnOutputDecl {
  std::string name;
  std::vector<std::string> dims;  // shape expressions, outermost first
  std::string description;
  registry::DType dtype = registry::DType::f32;
};

// A condition every call must meet (checked in declaration order, before any output dim is
// evaluated); the message says what is wrong in the user's terms.
struct NnShapeCheck {
  std::string condition;
  std::string message;
};

// What an algorithm's build function gets.
struct NnArgs {
  std::map<std::string, Halide::ImageParam> tensors;  // by input name, innermost dim first
  std::map<std::string, Halide::Expr> scalars;        // by scalar name (Param Exprs)
  AttrValues attrs;                                   // resolved (every declared attr)
  Halide::Target target;
  std::map<std::string, registry::DType> output_dtypes;  // by output name (resolved)
  // Overrides of the algorithm's schedule params (`--set` previews). An algorithm that takes
  // them resolves them against its declared params (dsl/schedule_params.h); every given
  // name must come back in NnKernel::schedule_params with its value (build_nn_pipeline
  // checks), so an algorithm that reads none rejects them all.
  std::map<std::string, int64_t> schedule;
  bool attr_bool(const std::string& name) const;
  int64_t attr_int(const std::string& name) const;
  const std::string& attr_string(const std::string& name) const;
  // Input `name` as fp32 values: the ImageParam itself when it is fp32, else a (inlined)
  // widening of its bf16 elements, which is exact. Algorithms over activations that may be
  // bf16 (NnOpDecl::activations) read them through this and compute in fp32.
  Halide::Func f32(const std::string& name) const;
  // An fp32 `value` in output `name`'s dtype: itself, or rounded to nearest even bf16, every
  // NaN kept a NaN (as torch's bf16 conversion; the bare rounding stored some NaNs as 0).
  Halide::Expr store(const std::string& output, const Halide::Expr& value) const;
};

// What it returns: the outputs in declaration order (scheduled), and a one-line summary of the
// schedule plus its tunables (both in the descriptor; the tunables are in the cache key).
struct NnKernel {
  std::vector<Halide::Func> outputs;
  std::string schedule_summary;
  std::map<std::string, int64_t> schedule_params;
};

using NnBuildFn = std::function<NnKernel(const NnArgs&)>;

// The Func of a declared output, named exactly `name`: the output's name is the kernel's
// argument name, and Func(name) would become "name$1" in the second pipeline of a process.
Halide::Func output_func(const std::string& name);

struct NnAlgorithm {
  std::string name;          // "" when the op has one algorithm; else e.g. "direct", "winograd"
  std::string applies_when;  // shape expression; "" = always
  int priority = 0;          // among the algorithms that apply, the highest wins
  std::string description;
  NnBuildFn build;
  // Its own accepted error against the fp64 reference, when it differs from the op's (Winograd
  // rounds more than direct): each variant's descriptor carries its algorithm's.
  std::optional<registry::Tolerance> tolerance = {};
};

// Work per call, as shape expressions (for `opforge bench`: GFLOP/s and GB/s by shape).
struct NnCost {
  std::string flops;  // floating-point operations ("" for memory-bound ops)
  std::string bytes;  // bytes an ideal kernel moves: every input read once, outputs written
  // A typical call, `opforge bench`'s default problem: tensor shapes (outermost first) and
  // scalar values, e.g. "x=4096,1024 gamma=1024 beta=1024 eps=1e-05".
  std::string example;
};

class NnOpDecl : public DeclBuilder<NnOpDecl> {
 public:
  explicit NnOpDecl(std::string name);

  // Arguments in the op's order: tensors and scalars interleave as declared.
  NnOpDecl& input(const std::string& name, std::vector<std::string> dims,
                  const std::string& description, registry::DType dtype = registry::DType::f32);
  NnOpDecl& scalar(const std::string& name, const std::string& description,
                   registry::DType dtype = registry::DType::f32);
  NnOpDecl& output(const std::string& name, std::vector<std::string> dims,
                   const std::string& description, registry::DType dtype = registry::DType::f32);
  NnOpDecl& check(const std::string& condition, const std::string& message);
  // The domain of a declared scalar ("[0, inf)", "any"; every scalar is finite by default).
  NnOpDecl& domain(const std::string& scalar, const std::string& text);
  // Sets the tolerance of one declared algorithm (NnAlgorithm::tolerance).
  NnOpDecl& algorithm_tolerance(const std::string& name, double rtol, double atol);
  NnOpDecl& algorithm(const std::string& name, const std::string& applies_when, int priority,
                      const std::string& description, NnBuildFn build);

  // Typical extent of a dim: the estimate set on every buffer dim of that name.
  NnOpDecl& estimate(const std::string& dim, int64_t extent);
  // Shape expressions; they may also name bytes_<tensor>, the element size of a declared input
  // or output in the variant (its dtype may follow an attr: activations, input_dtype_when).
  NnOpDecl& cost(std::string flops, std::string bytes);
  // A cost expression of this op with every bytes_<tensor> replaced by its variant's number.
  std::string cost_for_variant(const std::string& expr, const AttrValues& attrs) const;
  NnOpDecl& example(std::string call);
  // The bandwidth kernel (an NN op of kind "bandwidth") `opforge bench` compares this op with.
  NnOpDecl& bandwidth_op(std::string op);
  // Declares the op's activations: the fp32 inputs and outputs named here are stored as fp32
  // or bf16, by the string attr kActivationDtypeAttr ("float32", the default, or "bfloat16";
  // named in variant ids only off its default). The op computes in fp32 either way: bf16
  // loads widen exactly (NnArgs::f32), stores round to nearest even (NnArgs::store). Meant for
  // memory-bound ops, whose traffic the bf16 storage halves; small per-channel parameters
  // (gamma, beta) stay fp32. Cost expressions count bytes with bytes_<tensor> (see cost), and bf16
  // variants' tolerance widens by the output rounding (activation_tolerance).
  NnOpDecl& activations(std::vector<std::string> tensors);
  const std::vector<std::string>& activation_tensors() const { return activations_; }
  // Input `tensor` has `dtype` in the variants where string attr `attr` (declared first) is
  // `value`: e.g. an attention mask that is float32 (additive) or bool (which keys are seen).
  NnOpDecl& input_dtype_when(const std::string& tensor, const std::string& attr,
                             const std::string& value, registry::DType dtype);
  // A declared input's or output's dtype under resolved `attrs` (throws for an unknown name).
  registry::DType tensor_dtype(const std::string& name, const AttrValues& attrs) const;

  // Arguments in order: each is a tensor (dims set, possibly empty for rank 0) or a scalar.
  struct Arg {
    bool is_scalar = false;
    NnTensorDecl tensor;  // when !is_scalar
    NnScalarDecl scalar;  // when is_scalar
    const std::string& name() const { return is_scalar ? scalar.name : tensor.name; }
  };
  const std::vector<Arg>& args() const { return args_; }
  const std::vector<NnOutputDecl>& outputs() const { return outputs_; }
  const std::vector<NnShapeCheck>& checks() const { return checks_; }
  const std::vector<NnAlgorithm>& algorithms() const { return algorithms_; }
  const NnAlgorithm& find_algorithm(const std::string& name) const;  // throws invalid_argument
  const std::map<std::string, int64_t>& estimates() const { return estimates_; }
  const NnCost& cost() const { return cost_; }
  const std::string& bandwidth_op() const { return bandwidth_op_; }

  // Checks the declaration: names, duplicates, every expression parses and names only dims,
  // int/bool scalars and attrs, at least one output and one algorithm.
  void validate() const override;

 private:
  std::vector<std::string> argument_names() const override;
  // A declared input's or output's own dtype (nullopt for an unknown name or a scalar).
  std::optional<registry::DType> declared_dtype(const std::string& tensor) const;
  std::vector<Arg> args_;
  std::vector<NnOutputDecl> outputs_;
  std::vector<NnShapeCheck> checks_;
  std::vector<NnAlgorithm> algorithms_;
  std::map<std::string, int64_t> estimates_;
  NnCost cost_;
  std::string bandwidth_op_;
  std::vector<std::string> activations_;
  struct DtypeWhen {
    std::string tensor, attr, value;
    registry::DType dtype;
  };
  std::vector<DtypeWhen> dtype_when_;
};

// The string attr selecting an NN op's activation dtype (NnOpDecl::activations): "float32" or
// "bfloat16".
inline constexpr const char* kActivationDtypeAttr = "dtype";

// The accepted error of a variant whose activations are bf16: rtol + 2^-8 for the rounding of
// the result to nearest even bf16 (at most half a step, 2^-8 relative, bf16 having 8
// significant bits), and 8 atol: bf16 inputs take few distinct values, so the fp32 rounding
// errors of a row's statistics add coherently rather than as a random walk. Measured on
// bf16-quantized rows of mean 10 (gamma, beta in [9, 11], C = 8192, 60 seeds): layer_norm's
// fp32 arithmetic reached 3.9x its fp32 atol near y = 0 (torch's fp32 layer_norm: 3.0e-5, 3x).
registry::Tolerance activation_tolerance(registry::Tolerance t, registry::DType dtype);

}  // namespace opforge::dsl
