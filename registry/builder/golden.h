// The fp64 golden of an op: the same declaration (C++ op or rule) built at Float(64),
// unscheduled, and run with Halide's JIT. `opforge check` compares a registered kernel with it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dsl/resolved_op.h"

namespace opforge::builder {

struct GoldenData {
  std::map<std::string, std::vector<double>> tensors;   // every float tensor argument
  std::map<std::string, std::vector<int64_t>> indices;  // sparse ops: the index tensor
  std::map<std::string, double> scalars;
  int64_t n = 0;               // dense: elements per tensor
  int64_t rows = 0, cols = 0;  // sparse: states are [rows, cols]
  int64_t count = 0;           // sparse: len(indices); gradients are [count, cols]
  // Multi-tensor: the model tensor of each of the K chunks (n / K elements each) of the flat
  // tensors; the golden applies the single-tensor op to each model tensor's chunks.
  std::vector<int32_t> segments;
};

// Per output tensor and element: the sum over the fp32 evaluation's inputs (every state and
// gradient tensor, every fp32 scalar) of how far that output moves when the input alone is
// one ulp up. Where the update cancels (m*beta + g*(1 - beta) at beta = 3.4), an evaluation
// can land close to fp64 by luck of rounding while another order of the same operations (a
// kernel's fused multiply-add) lands several of the terms' ulps away: this measures those
// terms' ulps at each element, whatever one evaluation's rounding did.
using Sensitivity = std::map<std::string, std::vector<double>>;

// Updates the states in `d.tensors` in place with the (optimizer) op's update, computed in
// fp64 (a multi-tensor op: its single-tensor form per model tensor, d.segments). fp32: the same
// declaration computed in fp32, unscheduled, from the inputs rounded to
// fp32 (a plain fp32 evaluation: how far it lands from the fp64 one measures how much the
// update's conditioning amplifies fp32 rounding at each element); with `sensitivity`, also
// that (the same compiled pipeline rerun once per input; not for the multi-tensor form,
// whose entries stay empty).
void run_golden(const dsl::ResolvedOp& op, GoldenData& d, bool fp32 = false,
                Sensitivity* sensitivity = nullptr);

// The unit of Tolerance::conditioning per element: the fp32 evaluation's distance from fp64
// plus its sensitivity (empty: none). A non-finite fp32 value where fp64 is finite (an
// overflow) contributes nothing.
std::vector<double> fp32_spread(const std::vector<double>& golden, const std::vector<double>& fp32,
                                const std::vector<double>& sensitivity);

// How far a kernel's output is from the golden: the largest absolute, relative (where the
// golden is not 0) and ulp errors, and how many elements exceed |k - g| <= atol + rtol * |g|
// (NaN matches only NaN).
struct GoldenErrors {
  double max_abs = 0, max_rel = 0;
  int64_t max_ulp = 0, exceeding = 0, elements = 0;
};
GoldenErrors compare_with_golden(const std::vector<float>& kernel,
                                 const std::vector<double>& golden, double rtol, double atol);
// The same with a per-element allowance for the update's conditioning: element i may also be
// off by conditioning * spread[i] (fp32_spread; registry::Tolerance::conditioning).
GoldenErrors compare_with_golden(const std::vector<float>& kernel,
                                 const std::vector<double>& golden, double rtol, double atol,
                                 const std::vector<double>& spread, double conditioning);

}  // namespace opforge::builder
