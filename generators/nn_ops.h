// Every NN op declaration the library ships (dsl/nn_op_decl.h), one file per family:
// nn_norms.cpp (row-wise), nn_group_norm.cpp, nn_gelu.cpp, nn_silu.cpp, nn_matmul.cpp,
// nn_conv2d.cpp, nn_attention.cpp, nn_onebit.cpp.
#pragma once

#include "dsl/nn_op_decl.h"

namespace opforge::generators {

// exp(d) for d <= 0 in fp32, vectorized, about 1 ulp (Cephes' polynomial; nn_norms.cpp):
// d < -87 and -inf give 0, NaN stays NaN. Shared by softmax and attention.
Halide::Expr exp_nonpositive(const Halide::Expr& d);

// x in [-inf, bound) for a negative bound, false for NaN of either sign: the exps' underflow
// test (nn_norms.cpp), on the bits as signed int32 (a float compare is unreliable for NaN under
// fast math, and AVX2 has no unsigned compare).
Halide::Expr below_negative(const Halide::Expr& x, float bound);

// exp(d) in fp32, vectorized, about 1 ulp (2 at |d| near 88), on d clamped to [-87.01, 88.9]
// (nn_norms.cpp): below -87.01 it gives exp(-87.01) = 1.6e-38 instead of 0 or a subnormal, from
// 88.38 on +inf (the exact value overflows from 88.72); NaN in, NaN or a clamp bound out
// (Halide's min/max may drop NaN). Halide::exp's full-range selects cost about four more
// instructions per vector. For silu's x / (1 + exp(-x)), which none of that changes.
Halide::Expr exp_bounded(const Halide::Expr& d);

// Row-wise over the last axis: x[R, C] (leading dims flattened into R by the caller).
const dsl::NnOpDecl& layer_norm();
const dsl::NnOpDecl& rms_norm();
const dsl::NnOpDecl& softmax();
// x + residual and the norm of it, both out: (sum, y).
const dsl::NnOpDecl& add_layer_norm();
const dsl::NnOpDecl& add_rms_norm();
// NCHW x [N, C, H, W], int scalar groups (C % groups == 0), affine weight/bias [C], as
// torch.nn.GroupNorm.
const dsl::NnOpDecl& group_norm();
// Elementwise; attr approximate = none (erf) | tanh, as torch.nn.functional.gelu.
const dsl::NnOpDecl& gelu();
// Elementwise: y = x * sigmoid(x); silu_mul: y = silu(a) * b (SwiGLU).
const dsl::NnOpDecl& silu();
const dsl::NnOpDecl& silu_mul();
// C[B?, M, N] = op(A) . op(B), attrs transpose_a / transpose_b.
const dsl::NnOpDecl& matmul();
// torch Linear: matmul with transpose_b and a bias in the output stage (nn_matmul.cpp).
const dsl::NnOpDecl& linear();
// NCHW; algorithms direct, direct_oc, direct_oc_blocked, direct_oc_unpadded, direct_oc_small,
// winograd, depthwise.
const dsl::NnOpDecl& conv2d();
const dsl::NnOpDecl& conv2d_bias_relu();
// o[B, H, L, D] = softmax(q k^T * scale [+ causal mask]) v, fused (nn_attention.cpp), with
// grouped-query heads (k, v [B, Hkv, S, D]).
const dsl::NnOpDecl& scaled_dot_product_attention();
// The same with an additive float mask [L, S] (torch's float attn_mask), no causal attr.
const dsl::NnOpDecl& scaled_dot_product_attention_masked();
// 1-bit compression with error feedback over chunks (1-bit Adam): signs packed 32 per int32
// word, one fp32 scale per chunk; and its (averaging) inverse (nn_onebit.cpp).
const dsl::NnOpDecl& onebit_compress();
const dsl::NnOpDecl& onebit_decompress();

}  // namespace opforge::generators
