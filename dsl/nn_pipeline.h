// Turns an NnOpDecl + one of its algorithms (+ attrs, target) into a scheduled Halide pipeline
// with the kernel's argument list and the descriptor's op-level parts (inputs with named dims,
// fresh outputs with dim expressions). Nothing here compiles: the builder does, and keys the
// cache on what this returns.
#pragma once

#include <Halide.h>

#include <string>

#include "dsl/nn_op_decl.h"
#include "dsl/optimizer_pipeline.h"

namespace opforge::dsl {

// Kernel arguments: the op's arguments in declaration order (tensors as ImageParams with one
// Halide dim per declared dim, innermost first; scalars as Params), then the outputs (named
// like the declared outputs). schedule_recipe is "nn/<op>/<algorithm>".
OptimizerPipeline build_nn_pipeline(const NnOpDecl& decl, const std::string& algorithm,
                                    const AttrValues& attrs, const Halide::Target& target);

}  // namespace opforge::dsl
