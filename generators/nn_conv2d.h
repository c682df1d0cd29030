// conv2d / conv2d_bias_relu internals: the algorithms' builders share these inputs and
// the output stage. Layout NCHW (torch's default; oneDNN takes it via format tags): Halide
// sees x[N, C, H, W] as x(w, h, c, n) and weight[O, CG, KH, KW] as weight(kw, kh, cg, o).
#pragma once

#include <Halide.h>

#include "dsl/nn_op_decl.h"

namespace opforge::generators::conv {

struct ConvInputs {
  Halide::ImageParam x, weight, bias;  // bias only when bias_relu
  Halide::Expr stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups;
  bool bias_relu = false;
  Halide::Target target;

  static ConvInputs from(const dsl::NnArgs& a, bool bias_relu);
  // Extents by the declaration's dim names.
  Halide::Expr N() const { return x.dim(3).extent(); }
  Halide::Expr C() const { return x.dim(2).extent(); }
  Halide::Expr H() const { return x.dim(1).extent(); }
  Halide::Expr W() const { return x.dim(0).extent(); }
  Halide::Expr O() const { return weight.dim(3).extent(); }
  Halide::Expr CG() const { return weight.dim(2).extent(); }
  Halide::Expr KH() const { return weight.dim(1).extent(); }
  Halide::Expr KW() const { return weight.dim(0).extent(); }
  Halide::Expr OH() const;
  Halide::Expr OW() const;
};

// The conv sum `acc` of output channel `o` as stored: + bias, then max(., 0), when fused.
Halide::Expr output_stage(const ConvInputs& in, Halide::Expr acc, Halide::Expr o);

// x with zeros outside [0, W) x [0, H) (n and c are never out of range).
Halide::Func zero_padded(const ConvInputs& in);

dsl::NnKernel build_direct(const ConvInputs& in);
dsl::NnKernel build_direct_oc(const ConvInputs& in);
dsl::NnKernel build_direct_oc_unpadded(const ConvInputs& in);
dsl::NnKernel build_direct_oc_small(const ConvInputs& in);
dsl::NnKernel build_direct_oc_small_8(const ConvInputs& in);
dsl::NnKernel build_direct_oc_blocked(const ConvInputs& in);
dsl::NnKernel build_gemm_1x1(const ConvInputs& in);
dsl::NnKernel build_gemm_1x1_s2(const ConvInputs& in);
dsl::NnKernel build_gemm_1x1_images(const ConvInputs& in);
dsl::NnKernel build_gemm_1x1_s2_images(const ConvInputs& in);
dsl::NnKernel build_gemm_3x3(const ConvInputs& in);
dsl::NnKernel build_winograd(const ConvInputs& in);
dsl::NnKernel build_depthwise(const ConvInputs& in);

}  // namespace opforge::generators::conv
