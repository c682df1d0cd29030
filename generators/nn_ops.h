// Every NN op declaration the library ships (dsl/nn_op_decl.h), one file per family:
// nn_norms.cpp (row-wise), nn_gelu.cpp, nn_matmul.cpp, nn_conv2d.cpp.
#pragma once

#include "dsl/nn_op_decl.h"

namespace opforge::generators {

// Row-wise over the last axis: x[R, C] (leading dims flattened into R by the caller).
const dsl::NnOpDecl& layer_norm();
const dsl::NnOpDecl& rms_norm();
const dsl::NnOpDecl& softmax();
// Elementwise; attr approximate = none (erf) | tanh, as torch.nn.functional.gelu.
const dsl::NnOpDecl& gelu();
// C[B?, M, N] = op(A) . op(B), attrs transpose_a / transpose_b.
const dsl::NnOpDecl& matmul();
// NCHW; algorithms direct, winograd, depthwise.
const dsl::NnOpDecl& conv2d();
const dsl::NnOpDecl& conv2d_bias_relu();

}  // namespace opforge::generators
