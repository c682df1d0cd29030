// What the builder compiles for one variant of any op: a scheduled Halide pipeline, the
// kernel's argument list and the descriptor's op-level parts. build_pipeline makes it from a
// resolved op: dsl/optimizer_pipeline.h for optimizer ops (the update and an elementwise
// recipe), dsl/nn_pipeline.h for NN ops (the chosen algorithm's own definition and schedule).
// Nothing here lowers or compiles; the cache key is computed from what this returns.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dsl/resolved_op.h"
#include "opforge/descriptor.h"

namespace opforge::dsl {

struct KernelPipeline {
  Halide::Pipeline pipeline;
  std::vector<Halide::Argument> arguments;  // kernel call order
  std::vector<registry::KernelArg> kernel_args;
  std::vector<registry::Input> inputs;
  std::vector<registry::Output> outputs;
  std::vector<registry::Attr> attrs;
  std::map<std::string, int64_t> schedule_params;  // resolved
  std::string schedule_recipe, schedule_summary;
  // Exact text of every definition in the pipeline (floats as hex): the algorithm part of
  // the cache key. Two pipelines with equal text compute the same thing.
  std::string algorithm;
  // Optimizer ops: the tensors a whole-tensor reduction pass reads (extra traffic), and
  // whether some reduction is per tensor (Definition::per_tensor_reductions).
  std::vector<std::string> reduction_reads;
  bool per_tensor_reductions = false;
};

// `schedule`: recipe overrides (optimizer ops: the elementwise recipe's; NN ops: their
// algorithm's, NnArgs::schedule). `scheduled`
// false: an optimizer op's algorithm alone, for an autoscheduler (build_optimizer_pipeline).
KernelPipeline build_pipeline(const ResolvedOp& op, const std::map<std::string, int64_t>& schedule,
                              const Halide::Target& target, bool scheduled = true);

Halide::Type halide_type(registry::DType t);

// The exact text of every Function the outputs depend on (floats as hex, Halide's unique-name
// suffixes dropped, sorted): the algorithm part of a cache key.
std::string algorithm_text(const std::vector<Halide::Func>& outs);
std::string algorithm_text(const Halide::Func& out);

}  // namespace opforge::dsl
