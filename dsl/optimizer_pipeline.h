// Turns a resolved optimizer op (+ schedule params, target) into a scheduled Halide pipeline
// with the kernel's argument list and the registry descriptor's op-level parts (a
// KernelPipeline, dsl/kernel_pipeline.h). The fp64 golden and the Generator form define the
// same update through define_optimizer.
//
// Two forms: dense (every tensor flattened to 1-D, one Tuple-valued output overwriting the
// states in place; whole-tensor reductions computed first when the update asks for them) and
// sparse rows (states [rows, cols], gradients [len(indices), cols]; the output's pure
// definition is undef and one update per index rewrites that row, in index order).
#pragma once

#include <Halide.h>

#include <map>
#include <string>
#include <vector>

#include "dsl/kernel_pipeline.h"
#include "dsl/resolved_op.h"
#include "dsl/table_lookup.h"
#include "opforge/descriptor.h"

namespace opforge::dsl {

// One kernel argument of a variant: its element type and Halide dimensions (scalars 0; dense
// tensors 1; sparse states and gradients 2 (cols, rows), indices 1).
struct ArgLayout {
  ArgDecl decl;
  int dims;
};
std::vector<ArgLayout> argument_layout(const ResolvedOp& op);

// The states in the order of the output Tuple (updated.0, updated.1, ...): declaration order,
// except that the write-only model copy of the master-weights storage comes first (it is
// computed from the old values, so it is stored before they are overwritten in place).
std::vector<std::string> output_order(const ResolvedOp& op);

// What the update reads: each tensor argument as a Func (an ImageParam or a Generator Input),
// each scalar as an Expr, and each tensor's extents (innermost first).
struct Bindings {
  std::map<std::string, Halide::Func> tensors;
  // The tensors' ImageParams where they are ones (the kernels; not a Generator's Inputs).
  std::map<std::string, Halide::ImageParam> images;
  std::map<std::string, Halide::Expr> scalars;
  std::map<std::string, std::vector<Halide::Expr>> extents;
  // The kernels compute in fp32 and are scheduled; the fp64 golden (opforge check) computes
  // the same declaration in fp64, unscheduled.
  Halide::Type compute = Halide::Float(32);
  bool scheduled = true;
  // Unscheduled pipelines run as they are (the fp64 golden) still compute a whole-tensor
  // reduction once, at root: Halide's default recomputes it per element, O(N^2) (LAMB at
  // N = 3e5 took 87 s). Off for pipelines an autoscheduler schedules.
  bool root_reductions = false;
  // The target compares into mask registers (AVX-512): the 8-bit encode picks its form of
  // the dynamic map's decade count by it (dsl/quant8.h encode8).
  bool mask_compares = false;
  // The target's permutes: the 8-bit states' dynamic map is looked up with them (dsl/quant8.h;
  // kernels that do link dsl/table_lookup.c's bitcode).
  Permutes permutes = Permutes::none;
  // The target has vrcp14ps and vfpclassps (AVX-512 at the skylake level): the update's
  // reciprocal estimate uses them (dsl/math.h lower_fp32_math).
  bool rcp14 = false;
};

struct Definition {
  std::string algorithm;                     // exact text of every definition
  std::vector<std::string> reduction_reads;  // tensors the reduction pass reads (extra traffic)
  // Some reduction is per tensor (sum(), norm2(); not sum_all()): one call over the flat
  // buffers of many tensors would mix them, unless the form is multi-tensor (segmented).
  bool per_tensor_reductions = false;
  // One output Func per result (OptimizerDecl::results order), "result_<name>"(i), one
  // element: outputs of the pipeline besides `out`.
  std::vector<Halide::Func> results;
  // 8-bit states (Storage::quant): "updated_absmax"(b), each quantized state's new absmax per
  // block (a Tuple when there are several, in output_order), overwriting its "<state>_absmax"
  // argument in place. Undefined otherwise.
  Halide::Func block_scales;
  // The update holds its two forms of 1/x, split at the schedule's divide_below
  // (ElementwiseSchedule::exact_divides); false where that param is 0 or declined.
  bool divides_by_size = false;
};

// Defines `out` (the new states, a Tuple when there are several) from the declaration and
// schedules it with the recipe.
Definition define_optimizer(const ResolvedOp& op, const Bindings& in, Halide::Func out,
                            const std::map<std::string, int64_t>& schedule);

// The tensors a variant's whole-tensor reductions read (its extra read pass), found by
// evaluating the update symbolically: no pipeline is built.
std::vector<std::string> reduction_reads(const ResolvedOp& op);

// `scheduled` false: the algorithm alone, every Func left unscheduled (schedule_recipe,
// schedule_params and schedule_summary empty), with the estimates an autoscheduler needs on
// every input and output (1 << 20 elements); the caller schedules it (an Adams2019 schedule
// file, generators/auto_schedules.h).
KernelPipeline build_optimizer_pipeline(const ResolvedOp& op,
                                        const std::map<std::string, int64_t>& schedule,
                                        const Halide::Target& target, bool scheduled = true);

}  // namespace opforge::dsl
