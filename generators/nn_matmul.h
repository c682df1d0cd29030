// matmul internals shared by its algorithms' files (nn_matmul.cpp declares the op).
#pragma once

#include <Halide.h>

#include "dsl/nn_op_decl.h"

namespace opforge::generators {

// small_m's parallel task along n: also its condition's least N (nn_matmul_small_m.cpp).
constexpr int kMatmulSmallMTask = 128;

// A few rows of op(a) against a large op(b): b read in place, once (nn_matmul_small_m.cpp).
dsl::NnKernel build_matmul_small_m(const dsl::NnArgs& args);

}  // namespace opforge::generators
