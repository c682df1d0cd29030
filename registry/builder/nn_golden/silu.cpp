// silu and silu_mul: fp64 references written from the formula (torch.nn.functional.silu:
// x * sigmoid(x) = x / (1 + e^-x)); the check (registry/cli/check/nn_problem.h) runs every
// variant (each ISA the CPU runs) on them: N = 1, tails of the 8- and 16-wide vectors (5, 17,
// 1000), the serial path (N < 16384) and ragged parallel chunks (65543); inputs up to +-100,
// where exp(-x) overflows (y -> -0) and vanishes (y = x).
#include <cmath>
#include <limits>

#include "registry/builder/nn_golden/add_references.h"

namespace opforge::nn_golden {
namespace {

double silu(double v) {
  return v / (1 + std::exp(-v));
}

std::vector<NnProblem> elementwise_problems(const std::vector<std::string>& tensors) {
  std::vector<NnProblem> out;
  for (int64_t n : {1, 5, 17, 1000, 65543}) {
    for (double range : {6.0, 20.0, 100.0}) {
      NnProblem p;
      for (const auto& t : tensors) p.shapes[t] = {n};
      p.lo = -range, p.hi = range;
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace

void add_silu(NnReferences& r) {
  r["silu"] = NnReference{elementwise_problems({"x"}), [](const NnShapes&, const NnTensors& in,
                                                          const NnScalars&, const NnAttrs&) {
                            const auto& x = in.at("x");
                            std::vector<double> y(x.size());
                            for (size_t i = 0; i < x.size(); ++i) y[i] = silu(x[i]);
                            return NnTensors{{"y", y}};
                          }};
  r["silu_mul"] =
      NnReference{elementwise_problems({"a", "b"}),
                  [](const NnShapes&, const NnTensors& in, const NnScalars&, const NnAttrs&) {
                    const auto &a = in.at("a"), &b = in.at("b");
                    std::vector<double> y(a.size());
                    for (size_t i = 0; i < a.size(); ++i) y[i] = silu(a[i]) * b[i];
                    return NnTensors{{"y", y}};
                  }};
  r["bandwidth_add"] =
      NnReference{elementwise_problems({"a", "b"}),
                  [](const NnShapes&, const NnTensors& in, const NnScalars&, const NnAttrs&) {
                    const auto &a = in.at("a"), &b = in.at("b");
                    std::vector<double> y(a.size());
                    // fp32 operands: the fp32 sum is their exact sum rounded once.
                    for (size_t i = 0; i < a.size(); ++i)
                      y[i] = static_cast<float>(static_cast<float>(a[i]) + b[i]);
                    return NnTensors{{"y", y}};
                  }};
}

}  // namespace opforge::nn_golden
