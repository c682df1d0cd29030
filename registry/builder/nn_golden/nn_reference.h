// fp64 references for the NN ops, written from each op's published definition (torch's
// functional ops), never from the kernel, with the problems (odd shapes, scalars, attrs) to
// check them on. `opforge check` (NN ops) and tests/generators/test_nn_kernels.cpp run every
// variant on every problem whose shapes its algorithm applies to
// (registry/cli/check/nn_problem.h), so a new variant is checked by construction. One file per
// op family here (norms.cpp, attention.cpp, ...), each adding its ops in add_<family>()
// (add_references.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace opforge::nn_golden {

using NnShapes = std::map<std::string, std::vector<int64_t>>;  // tensor -> shape, outermost first
using NnTensors = std::map<std::string, std::vector<double>>;  // tensor -> row-major values
using NnScalars = std::map<std::string, double>;
using NnAttrs = std::map<std::string, std::string>;

struct NnProblem {
  NnShapes shapes;  // every input tensor (outputs come from the descriptor's rule)
  NnScalars scalars;
  NnAttrs attrs = {};  // declared attrs; the variants with other values are not run on it
  // Each element of each input uniform in [lo, hi) (fixed seed per problem).
  double lo = -1, hi = 1;
};

struct NnReference {
  std::vector<NnProblem> problems;
  // Every output, in double precision, from the inputs (the fp32 values the kernel sees).
  std::function<NnTensors(const NnShapes&, const NnTensors& inputs, const NnScalars&,
                          const NnAttrs&)>
      outputs;
  // The accepted error |kernel - ref| <= atol + rtol * |ref| when tighter or looser than the
  // descriptor's tolerance must be justified per problem (e.g. Winograd over K = 640*9 terms):
  // a function of the problem returning {rtol, atol}; empty: the descriptor's. A replayed call
  // (opforge check --replay) passes its shapes, scalars, attrs and, as [lo, hi], the range of
  // its float inputs.
  std::function<std::pair<double, double>(const NnProblem&)> tolerance = {};
};

using NnReferences = std::map<std::string, NnReference>;

// Every NN op's reference, by op name; null for an op without one.
const NnReferences& nn_references();
const NnReference* find_nn_reference(const std::string& op);

// Row-major index helpers for the references.
inline int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

// Formulas tests use on their own inputs too.
std::vector<double> ref_softmax(const std::vector<float>& x, int64_t rows, int64_t cols);
// gelu, erf (tanh_form false) or tanh form, elementwise.
std::vector<double> ref_gelu(const std::vector<float>& x, bool tanh_form);

}  // namespace opforge::nn_golden
