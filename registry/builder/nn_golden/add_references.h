// Internal to nn_golden: each op family's file adds its references (nn_reference.cpp calls
// every one).
#pragma once

#include "registry/builder/nn_golden/nn_reference.h"

namespace opforge::nn_golden {

void add_attention(NnReferences& r);
void add_bandwidth(NnReferences& r);
void add_conv2d(NnReferences& r);
void add_group_norm(NnReferences& r);
void add_matmul(NnReferences& r);
void add_norms(NnReferences& r);
void add_onebit(NnReferences& r);
void add_silu(NnReferences& r);

}  // namespace opforge::nn_golden
