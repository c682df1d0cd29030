// Every op declaration the library ships, one file each (generators/<op>.cpp).
#pragma once

#include "dsl/op_decl.h"

namespace opforge::generators {

const dsl::OptimizerDecl& apply_gradient_descent();
const dsl::OptimizerDecl& apply_momentum();
const dsl::OptimizerDecl& apply_adam();
// Read-modify-write kernel with the traffic of an op with `states` states and `grads`
// gradients: the bandwidth ceiling benchmarks compare that op with.
const dsl::OptimizerDecl& bandwidth(int states, int grads);

}  // namespace opforge::generators
