// Every op declaration the library ships, one file each (generators/<op>.cpp; families share a
// file). Sparse forms reuse their dense op's update.
#pragma once

#include "dsl/op_decl.h"

namespace opforge::generators {

// TensorFlow training ops (tensorflow/core/kernels/training_ops.cc semantics).
const dsl::OptimizerDecl& apply_gradient_descent();
const dsl::OptimizerDecl& apply_proximal_gradient_descent();
const dsl::OptimizerDecl& apply_adadelta();
const dsl::OptimizerDecl& apply_adagrad();
const dsl::OptimizerDecl& apply_adagrad_v2();
const dsl::OptimizerDecl& apply_proximal_adagrad();
const dsl::OptimizerDecl& apply_adagrad_da();
const dsl::OptimizerDecl& apply_ftrl();
const dsl::OptimizerDecl& apply_ftrl_v2();
const dsl::OptimizerDecl& apply_momentum();
const dsl::OptimizerDecl& apply_keras_momentum();
const dsl::OptimizerDecl& apply_adam();
const dsl::OptimizerDecl& apply_adam_with_amsgrad();
const dsl::OptimizerDecl& apply_ada_max();
const dsl::OptimizerDecl& apply_rms_prop();
const dsl::OptimizerDecl& apply_centered_rms_prop();
const dsl::OptimizerDecl& apply_add_sign();
const dsl::OptimizerDecl& apply_power_sign();

// Mixed-precision training.
const dsl::OptimizerDecl& amp_update_scale();
const dsl::OptimizerDecl& clip_by_global_norm();
const dsl::OptimizerDecl& global_norm();
const dsl::OptimizerDecl& accumulate_grad();
// Gradient compression for data-parallel training.
const dsl::OptimizerDecl& compress_ef();

// Beyond TensorFlow.
const dsl::OptimizerDecl& apply_adamw();
const dsl::OptimizerDecl& apply_lamb();
const dsl::OptimizerDecl& multi_tensor_apply_lamb();
const dsl::OptimizerDecl& multi_tensor_apply_lars();
const dsl::OptimizerDecl& apply_lars();
const dsl::OptimizerDecl& apply_lion();
const dsl::OptimizerDecl& apply_sign_sqrt();

// Sparse (indexed-row) forms.
const dsl::OptimizerDecl& sparse_apply_adagrad();
const dsl::OptimizerDecl& sparse_apply_ftrl();
const dsl::OptimizerDecl& sparse_apply_momentum();
const dsl::OptimizerDecl& sparse_apply_proximal_adagrad();
const dsl::OptimizerDecl& sparse_adam();

// Read-modify-write kernel with the traffic of an op with `states` states and `grads`
// gradients, after a read pass over `reduce_reads` tensors (ops with norms): the bandwidth
// ceiling benchmarks compare that op with.
const dsl::OptimizerDecl& bandwidth(int states, int grads, int reduce_reads = 0,
                                    int byte_states = 0);

}  // namespace opforge::generators
