// Turns a resolved NN op (its algorithm and attrs) + target into a scheduled Halide pipeline
// with the kernel's argument list and the descriptor's op-level parts (inputs with named dims,
// fresh outputs with dim expressions). Nothing here compiles: the builder does, and keys the
// cache on what this returns.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <map>
#include <string>

#include "dsl/kernel_pipeline.h"
#include "dsl/resolved_op.h"

namespace opforge::dsl {

// Kernel arguments: the op's arguments in declaration order (tensors as ImageParams with one
// Halide dim per declared dim, innermost first; scalars as Params), then the outputs (named
// like the declared outputs). schedule_recipe is "nn/<op>/<algorithm>". `schedule`: overrides
// of the algorithm's schedule params (NnArgs::schedule); one it does not apply throws
// std::invalid_argument naming it and the params it has.
KernelPipeline build_nn_pipeline(const ResolvedOp& op, const Halide::Target& target,
                                 const std::map<std::string, int64_t>& schedule = {});

}  // namespace opforge::dsl
