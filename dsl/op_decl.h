// An optimizer op, declared once: name, arguments in the op's (TensorFlow) order, compile-time
// attributes, and the update as Halide Exprs. The Halide pipeline, the registry descriptor and
// the CLI help all come from this one declaration.
//
//   OptimizerDecl("apply_sign_sqrt")
//       .state("var", "Variable to update")
//       .scalar("lr", "Learning rate")
//       .grad("grad", "The gradient")
//       .update([](const UpdateContext& c) {
//         return Updates{{"var", c["var"] - c["lr"] * sign(c["grad"]) * sqrt(abs(c["grad"]))}};
//       });
//
// Updates are simultaneous assignments: every Expr reads the old values of the states.
#pragma once

#include <Halide.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dsl/math.h"
#include "dsl/op_decl_base.h"
#include "dsl/quant8.h"
#include "opforge/descriptor.h"

namespace opforge::dsl {

using Halide::Expr;

// An argument exists in a variant when its condition holds (e.g. v_max only with amsgrad):
// attr == value, or any of the alternatives `or_any` (attr, value) holds.
struct Condition {
  std::string attr, value;  // empty attr: always
  std::vector<std::pair<std::string, std::string>> or_any = {};
  bool holds(const std::map<std::string, std::string>& attrs) const;
};

struct ArgDecl {
  std::string name;
  registry::Input::Role role = registry::Input::Role::state;
  std::string description;
  registry::DType dtype = registry::DType::f32;  // scalars may be int64 (global_step)
  Condition when;
  std::optional<double> default_value;  // scalars: a rule's hyper default (used by check)
  // Scalars: the values a call may pass (opforge/scalar_domain.h), written into the
  // descriptor and checked by the runtime. Every scalar is finite unless declared otherwise.
  std::string domain = "finite";
  // Scalars: a value typical of real training (beta1 0.9, FTRL's lr_power -0.5), inside the
  // domain: what `opforge check`, bench, profile and report pass when the user names none.
  std::optional<double> typical = std::nullopt;
  // uint8 states of the 8-bit storage (Storage::quant): the map their codes index.
  std::optional<StateQuant> quant = std::nullopt;
};

// How a variant stores its tensors (arithmetic is always fp32). The default is all fp32.
// With `grad` f16/bf16 the gradients are stored narrow and read with an exact cast to fp32.
// With `grad` f8e4m3/f8e5m2 (FP8 gradients, dsl/fp8.h; dense single-tensor ops) each gradient
// is one byte of OCP FP8 bits, decoded exactly, and a scalar "grad_scale_inv" (the per-tensor
// scale's inverse) is added: the update sees bits-value * grad_scale_inv, before anything else
// (grad_scaling()'s inv_scale and non-finite check included; NaN codes and E5M2's infinities
// are not finite there).
// With `model` set (master-weights mode), the first state (the parameter, `var`) stays the fp32
// master, every state stays fp32, and a write-only state argument "model" of that dtype is
// inserted right after the last state argument, receiving the new master rounded to nearest
// even (dsl/math.h to_storage) in the same pass. Its output is the FIRST element of the output
// Tuple (updated.0; the other states follow in declaration order): it is computed from the old
// values, so it must be stored before they are overwritten in place. The update never reads
// `model`, so Halide never loads it; the runtime still passes it as an aliased in/out buffer
// like every state.
// With `state` set, every state but the first (Adam's m, v, v_max) is stored in that dtype:
// read with an exact cast, updated in fp32, rounded to nearest even (NaN stays NaN) when
// stored. The first state is never narrowed, and its update reads the fp32 new states, before
// they are rounded.
// With `quant` set (exclusive with `state`), every state the declaration marks quantizable()
// is stored in 8 bits, blockwise (dsl/quant8.h): a uint8 code per element, in place under the
// state's own name, and an fp32 argument "<state>_absmax" (role block_scale, in place) with
// one absmax per `block` elements, placed after the last state argument. The pipeline
// dequantizes each block, updates in fp32, and requantizes with the block's new absmax in the
// same pass; the first state's update reads the new states before they are quantized.
struct Storage {
  registry::DType grad = registry::DType::f32;
  std::optional<registry::DType> model;
  std::optional<registry::DType> state;
  std::optional<QuantMap> quant;
  int block = kDefaultQuantBlock;
  bool is_f32() const { return grad == registry::DType::f32 && !model && !state && !quant; }
  // "f32"; "bf16m" / "f16m" (narrow gradients and model copy, fp32 master and states);
  // "bf16g" / "f16g" (narrow gradients only); a trailing "s" for narrow states: "bf16s" (fp32
  // var and gradients), "bf16ms" (bf16m with bf16 states). A C identifier fragment used in
  // variant ids (registry::storage_tag). 8-bit states: "q8s" (dynamic map), "q8ls" (linear),
  // after the gradient part ("bf16gq8s", "bf16mq8s"), with the block size appended when it is
  // not 256 ("q8s64"). FP8 gradients: "e4m3g", "e5m2g" (and "e4m3gq8s").
  std::string tag() const;
  static Storage from_tag(const std::string& tag);  // throws std::invalid_argument
};
// The block-scale argument of quantized state `state`.
inline std::string absmax_arg(const std::string& state) {
  return state + "_absmax";
}
// The per-tensor scale argument of FP8 gradient storage.
inline constexpr const char* kFp8ScaleInvArg = "grad_scale_inv";
// The name of the model-copy argument in master-weights mode.
inline constexpr const char* kModelArg = "model";
// The chunk -> model tensor table of the multi-tensor form.
inline constexpr const char* kSegmentsArg = "segments";

// Whole-tensor reduction of a per-element Expr: returns the fp64 sum (of squares when
// `squares`), as a scalar Expr usable in the update. Provided by the pipeline builder. In the
// multi-tensor form a reduction is per model tensor, unless `whole_call` (every element of the
// call, e.g. the non-finite check of grad_scaling()); in the other forms both are the same.
using Reducer = std::function<Expr(const Expr& per_element, bool squares, bool whole_call)>;

// What an update function sees: the current element of every tensor argument and every
// run-time scalar (fp32 Exprs; int64 scalars as Int(64)), the compile-time attribute values,
// and whole-tensor reductions.
class UpdateContext {
 public:
  UpdateContext(std::map<std::string, Expr> values, AttrValues attrs, std::string op,
                Reducer reducer = nullptr)
      : values_(std::move(values)),
        attrs_(std::move(attrs)),
        op_(std::move(op)),
        reducer_(std::move(reducer)) {}
  Expr operator[](const std::string& name) const;
  // sum over every element of the tensor of `e` (accumulated in fp64, returned as fp32)
  Expr sum(const Expr& e) const;
  // sqrt(sum of e^2) over the tensor (fp64 accumulation, returned as fp32)
  Expr norm2(const Expr& e) const;
  // sum over every element of the call: in the multi-tensor form, over all model tensors
  Expr sum_all(const Expr& e) const;
  // The same context reading `overrides` instead of those arguments' values (attrs,
  // reductions, fast paths shared: fast paths asked for through the copy reach this one).
  UpdateContext with_values(const std::map<std::string, Expr>& overrides) const;
  // Asks for a copy of the kernel specialized on a run-time condition over scalars, e.g.
  // lr_power == -0.5 in Ftrl: Halide substitutes param == constant into that copy, so a
  // select on it keeps only the cheap branch (sqrt instead of a scalar pow per element).
  void fast_path(const Expr& condition) const;
  const std::vector<Expr>& fast_paths() const { return *fast_paths_; }
  // Records that every state keeps its old value where `condition` (a scalar) holds: the
  // update already selects the old values, and 8-bit states keep their codes and absmax
  // (requantizing the dequantized old block need not give them back).
  void skip_when(const Expr& condition) const { *skip_ = condition; }
  const Expr& skip_condition() const { return *skip_; }
  bool attr_bool(const std::string& name) const;
  int64_t attr_int(const std::string& name) const;
  double attr_float(const std::string& name) const;
  const std::string& attr_string(const std::string& name) const;

 private:
  const std::string& attr(const std::string& name) const;
  std::map<std::string, Expr> values_;
  AttrValues attrs_;
  std::string op_;
  Reducer reducer_;
  // Shared with copies made by with_values().
  std::shared_ptr<std::vector<Expr>> fast_paths_ = std::make_shared<std::vector<Expr>>();
  std::shared_ptr<Expr> skip_ = std::make_shared<Expr>();
};

using Updates = std::vector<std::pair<std::string, Expr>>;  // state -> new value
using UpdateFn = std::function<Updates(const UpdateContext&)>;

class OptimizerDecl : public DeclBuilder<OptimizerDecl> {
 public:
  explicit OptimizerDecl(std::string name);

  // Arguments, in the op's argument order (the kernel's and the C API's order too).
  // `dtype`: uint8 for the raw byte states of bandwidth kernels (an op's 8-bit states come
  // from quantizable() and the storage).
  OptimizerDecl& state(const std::string& name, const std::string& description, Condition when = {},
                       registry::DType dtype = registry::DType::f32);
  OptimizerDecl& grad(const std::string& name, const std::string& description);
  // Marks a declared state as storable in 8 bits (Storage::quant) with a signed map (values
  // of either sign: momenta) or an unsigned one (second moments). The first state (the
  // parameter) never is.
  OptimizerDecl& quantizable(const std::string& state, bool is_signed);
  bool has_quantizable_states() const;
  OptimizerDecl& scalar(const std::string& name, const std::string& description,
                        Condition when = {}, std::optional<double> default_value = {});
  OptimizerDecl& scalar_i64(const std::string& name, const std::string& description);
  // A result: a one-element fp32 tensor the call overwrites in place (role "result"), e.g. a
  // flag or a norm of the whole call. The update assigns it like a state, from scalars,
  // whole-tensor reductions and its own old value (c[name]); never from per-element values.
  OptimizerDecl& result(const std::string& name, const std::string& description,
                        Condition when = {});

  // Loss scaling of mixed-precision training fused into the update (torch.cuda.amp.GradScaler
  // with its unscale_ and step; the grad_scale / found_inf arguments of torch's fused Adam).
  // Call after update(). Declares two bool attrs, both false by default (and then named in no
  // variant id):
  //   unscale: a scalar `inv_scale`; the update reads every gradient multiplied by it.
  //   skip_if_nonfinite: when the step finds a non-finite gradient, or `found_inf` is already
  //     set on entry, every state keeps its value bit for bit (the step is skipped).
  // and, with either, a result `found_inf`: 1 when any (unscaled) gradient element is inf or
  // NaN, else unchanged (torch: never cleared by the step; several calls may accumulate into
  // one flag). The check is a whole-tensor reduction pass over the gradients before the update.
  // In master-weights storage the model copy is rewritten from the (unchanged) master.
  OptimizerDecl& grad_scaling();
  bool has_grad_scaling() const { return grad_scaling_; }

  // Makes this the indexed-row (sparse) form: states are [rows, ...], gradients hold one row
  // per index, an `indices` argument follows the last gradient (TensorFlow's order), and an
  // attr Tindices ("int32"/"int64") selects its dtype. Rows are updated in index order, so
  // duplicate indices apply one after another. Reductions are not available.
  OptimizerDecl& sparse_rows();
  // Makes this the multi-tensor form: one call updates many model tensors stored back to back
  // in flat buffers, each starting on a chunk boundary (zero padding after it); an int32
  // argument `segments` (after the last gradient) names the model tensor of each chunk, and
  // sum()/norm2() become per-tensor (segmented) reductions: LAMB's and LARS's trust ratios per
  // tensor, one launch for the whole model. The kernel sees every tensor as (C, K): K chunks
  // of C = elements / K. Needs a dense op; the op's results stay whole-call.
  OptimizerDecl& multi_tensor();
  bool is_multi_tensor() const { return multi_tensor_; }
  // The single-tensor form a multi-tensor op applies to each model tensor (without the
  // `segments` argument); a copy of this op when it is not multi-tensor. The fp64 golden of
  // the multi-tensor form runs it per tensor.
  OptimizerDecl per_tensor() const;
  // For updates where a state's new value reads another state that the output Tuple stores
  // before it (LARS: m reads var for the L2 term, var reads m). Halide stores a Tuple's
  // elements one after another, each recomputed from the inputs; in place, a masked tail
  // vector then reloads the state already overwritten (wrong results at N not a multiple of
  // the vector; full vectors only stay right while LLVM forwards the earlier loads). With
  // this the dense form computes every new value into a buffer at root first, then copies
  // them over the states: 16 more bytes of traffic per element. (An update definition of the
  // output reading its own old values is evaluated whole before storing, but Halide 14 takes
  // those loads as aligned to the native vector: they fault on a caller's unaligned buffer.)
  // Dense f32 ops without results; the multi-tensor form (whole vectors only) keeps the plain
  // definition.
  OptimizerDecl& new_values_first();
  bool computes_new_values_first() const { return new_values_first_; }
  // A copy under another name (e.g. the sparse form of a dense op shares its update).
  OptimizerDecl renamed(std::string name) const;

  OptimizerDecl& update(UpdateFn fn);
  // The domain of a declared scalar ("[0, 1)", "[0, inf]", "any"; see ArgDecl::domain).
  OptimizerDecl& domain(const std::string& scalar, const std::string& text);
  // A declared scalar's typical value (see ArgDecl::typical); fails outside its domain.
  OptimizerDecl& typical(const std::string& scalar, double value);

  // A copy with this storage (see Storage): gradients' dtype set, and in master mode the
  // write-only `model` state appended and assigned to_storage(new value of the first state).
  // The name stays (variant ids carry the storage tag); `name` renames when given.
  OptimizerDecl with_storage(const Storage& s, const std::string& name = "") const;
  const Storage& storage() const { return storage_; }

  const std::vector<ArgDecl>& args() const { return args_; }
  // The arguments of the variant with these (resolved) attrs, in order.
  std::vector<ArgDecl> args_for(const AttrValues& attrs) const;
  bool sparse() const { return sparse_; }
  const UpdateFn& update_fn() const { return update_; }

  std::string storage_tag() const override { return storage_.tag(); }
  // Checks the declaration itself (names, duplicates, at least one state, an update).
  void validate() const override;

 private:
  std::vector<std::string> argument_names() const override;
  OptimizerDecl& add_arg(ArgDecl a);
  // with_storage's 8-bit part: quantizable states become uint8 codes, absmax args added.
  OptimizerDecl& quantize_states(QuantMap map, int block);
  // with_storage's FP8 part: adds grad_scale_inv and multiplies every gradient by it.
  void scale_fp8_gradients();
  // with_storage's 8-bit part: a gradient element that is not finite counts as 0, so that
  // its block's absmax stays finite.
  void zero_nonfinite_gradients();
  std::vector<ArgDecl> args_;
  std::map<std::string, bool> quantizable_;  // state -> signed map
  UpdateFn update_;
  UpdateFn unscaled_update_;  // update_ before grad_scaling() wrapped it
  bool sparse_ = false;
  bool grad_scaling_ = false;
  bool multi_tensor_ = false;
  bool new_values_first_ = false;
  Storage storage_;
};

}  // namespace opforge::dsl
