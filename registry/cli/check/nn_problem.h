// One NN variant on one problem of its op's fp64 reference (nn_reference.h): seeded inputs
// (uniform in the problem's [lo, hi); bf16 inputs are those draws rounded to nearest even and
// the reference sees exactly those values; bool inputs true for 80% of the draws; int32 inputs
// any bit pattern), outputs pre-filled with NaN (every element must be written), the kernel
// called, and each output judged: right when NaN where the reference is NaN, else within
// |kernel - ref| <= atol + rtol * |ref| (the reference's per-problem tolerance, else the
// descriptor's); int32 outputs must be equal. `opforge check` and test_nn_kernels.cpp use it.
#pragma once

#include <map>
#include <string>

#include "opforge/runtime.hpp"
#include "registry/builder/golden.h"
#include "registry/builder/nn_golden/nn_reference.h"

namespace opforge::nn_golden {

struct NnProblemCheck {
  bool applied = false;  // false: the variant's algorithm does not apply to these shapes
  double rtol = 0, atol = 0;
  // The worst |kernel - ref| / (atol + rtol * |ref|) over every output (inf: an int32
  // mismatch or NaN where the reference is not), and where it was.
  double worst = 0;
  std::string worst_at;
  std::map<std::string, builder::GoldenErrors> outputs;  // by output name
};

// Whether problem attrs `want` select variant `d` (activation dtypes: every one unless named).
bool attrs_match(const registry::Descriptor& d, const NnAttrs& want);
// "x=[3,17] gamma=[17] eps=1e-05 ", for reports.
std::string shapes_text(const NnShapes& s, const NnScalars& sc);

// Judges a call's outputs (`got`, by output name; bf16 widened, int32 as doubles) against the
// reference evaluated on its inputs `in64` (what the kernel read, as doubles): r.outputs,
// r.worst. Throws std::runtime_error when an output is missing or its size differs.
void judge_outputs(const registry::Descriptor& d, const NnReference& ref, const NnProblem& p,
                   const NnTensors& in64, const NnTensors& got, NnProblemCheck& r);

// Throws std::runtime_error when the problem does not fit the variant (a missing shape, a
// dtype it cannot draw) or the reference gives no such output; a kernel Error other than
// "applies only when" propagates.
NnProblemCheck check_problem(Kernel& k, const NnReference& ref, const NnProblem& p, unsigned seed);

}  // namespace opforge::nn_golden
