// Turns an OptimizerDecl (+ attr values, dtype, schedule params, target) into a scheduled
// Halide pipeline with the kernel's argument list, and into the registry descriptor's
// op-level parts. Nothing here lowers or compiles: that is the builder's job, and the cache
// key is computed from what this returns, before any compilation.
#pragma once

#include <Halide.h>

#include <map>
#include <string>
#include <vector>

#include "dsl/op_decl.h"
#include "registry/format/descriptor.h"

namespace opforge::dsl {

struct OptimizerPipeline {
  Halide::Pipeline pipeline;
  std::vector<Halide::Argument> arguments;  // kernel call order
  std::vector<registry::KernelArg> kernel_args;
  std::vector<registry::Input> inputs;
  std::vector<registry::Output> outputs;
  std::vector<registry::Attr> attrs;
  std::map<std::string, int64_t> schedule_params;  // resolved
  std::string schedule_summary;
  // Exact text of every definition in the pipeline (floats as hex): the algorithm part of
  // the cache key. Two pipelines with equal text compute the same thing.
  std::string algorithm;
};

// The declaration's update evaluated on `values` (every argument's current element or scalar):
// the new value of each state, in state order, as fp32. Throws std::invalid_argument naming
// the op when a non-state is assigned, a state twice, or a state never.
std::vector<Halide::Expr> state_updates(const OptimizerDecl& decl, const AttrValues& attrs,
                                        const std::map<std::string, Halide::Expr>& values);

OptimizerPipeline build_optimizer_pipeline(const OptimizerDecl& decl, const AttrValues& attrs,
                                           const std::map<std::string, int64_t>& schedule,
                                           const Halide::Target& target);

// Exact, canonical printing of Halide Exprs: like IRPrinter but floats in hex, so constants
// that differ in the last bit print differently.
std::string exact_text(const Halide::Expr& e);

}  // namespace opforge::dsl
