#include "generators/nn_conv2d.h"

namespace opforge::generators::conv {

using namespace Halide;

ConvInputs ConvInputs::from(const dsl::NnArgs& a, bool bias_relu) {
  ConvInputs in;
  in.x = a.tensors.at("x");
  in.weight = a.tensors.at("weight");
  if (bias_relu) in.bias = a.tensors.at("bias");
  in.stride_h = a.scalars.at("stride_h");
  in.stride_w = a.scalars.at("stride_w");
  in.pad_h = a.scalars.at("pad_h");
  in.pad_w = a.scalars.at("pad_w");
  in.dilation_h = a.scalars.at("dilation_h");
  in.dilation_w = a.scalars.at("dilation_w");
  in.groups = a.scalars.at("groups");
  in.bias_relu = bias_relu;
  in.target = a.target;
  return in;
}

Expr ConvInputs::OH() const {
  return (H() + 2 * pad_h - dilation_h * (KH() - 1) - 1) / stride_h + 1;
}
Expr ConvInputs::OW() const {
  return (W() + 2 * pad_w - dilation_w * (KW() - 1) - 1) / stride_w + 1;
}

Expr output_stage(const ConvInputs& in, Expr acc, Expr o) {
  if (!in.bias_relu) return acc;
  return max(acc + in.bias(o), 0.0f);
}

Func zero_padded(const ConvInputs& in) {
  return BoundaryConditions::constant_exterior(in.x, 0.0f, {{0, in.W()}, {0, in.H()}});
}

}  // namespace opforge::generators::conv
