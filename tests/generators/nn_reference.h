// fp64 references for the NN kernels, written from each op's published definition (torch's
// functional ops), never from the kernel. Each op's test file registers its reference and the
// problems (odd shapes, scalars, attrs) to check it on; test_nn_kernels.cpp runs every variant
// of every NN op in the registry (each algorithm, each ISA the CPU has) on every problem whose
// shapes the variant's algorithm applies to, so a new variant is tested by construction.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace opforge::testing {

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
  // a function of the problem returning {rtol, atol}; empty: the descriptor's.
  std::function<std::pair<double, double>(const NnProblem&)> tolerance = {};
};

std::map<std::string, NnReference>& nn_references();
const NnReference* find_nn_reference(const std::string& op);

struct RegisterNnReference {
  RegisterNnReference(const std::string& op, NnReference r) { nn_references()[op] = std::move(r); }
};

// Row-major index helpers for the references.
inline int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

}  // namespace opforge::testing
