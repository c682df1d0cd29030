// fp64 references for the kernels, written from each op's published formula (TensorFlow's
// training_ops.cc), never from the kernel. Each op's test file registers its reference and
// the input domain to draw from; test_kernels.cpp runs every variant of the op table
// against them.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "opforge/descriptor.h"

namespace opforge::testing {

using Tensors = std::map<std::string, std::vector<double>>;
using Scalars = std::map<std::string, double>;
using Attrs = std::map<std::string, std::string>;

struct Reference {
  // Fills every tensor argument of the variant with these attrs (n elements each) and every
  // scalar with values from the op's domain.
  std::function<void(std::mt19937&, size_t n, const Attrs&, Tensors&, Scalars&)> inputs;
  // Updates the states in `t` in place, in double precision.
  std::function<void(const Attrs&, const Scalars&, Tensors& t)> update;
};

std::map<std::string, Reference>& references();

// The op table's ISAs (generators::isas()) that every op ships for and this host runs, baseline
// first; the others are noted once as "skipped: ..." (host_isa.h). The avx512_bf16 tier's few
// variants are checked where the registry is iterated (test_nn_kernels.cpp, test_nn_bf16_tier.cpp).
std::vector<std::string> runnable_isas();
// Bandwidth kernels (bandwidth_s<S>_g<G>) share one generic reference.
const Reference* find_reference(const std::string& op);

struct RegisterReference {
  RegisterReference(const std::string& op, Reference r) { references()[op] = std::move(r); }
};

// Loss scaling (OptimizerDecl::grad_scaling), from torch.cuda.amp.GradScaler's semantics:
// `r` applied to every gradient times inv_scale; found_inf = 1 when any of those is inf/NaN
// (else left as it was); with skip_if_nonfinite, nothing else changes when found_inf ends up
// set. Inputs: r's, the gradients multiplied by 1024 with inv_scale = 1/1024 (exact in every
// dtype, so the op sees its usual domain), found_inf = 0 (one element).
bool has_grad_scaling(const registry::Descriptor& d);
Reference with_grad_scaling(const Reference& r, const registry::Descriptor& d);

// max(a, b) that keeps a NaN, as torch.maximum does (std::max(a, NaN) returns a): the AMSGrad
// running maximum of a NaN second moment (a NaN gradient) is NaN.
inline double nan_max(double a, double b) {
  return std::isnan(a) ? a : std::isnan(b) ? b : std::max(a, b);
}

// Uniform values in [lo, hi).
std::vector<double> uniform(std::mt19937& rng, size_t n, double lo, double hi);

// grad and m in [-1, 1] with exact zeros (grad, m, both). sign(new m) jumps at 0: where grad and
// m have opposite signs and the new m would be within 1e-4 of 0 (fp32 rounding of
// m * beta + grad * (1 - beta) could flip its sign there), m is drawn again. Exact zeros of the
// new m with grad != 0, where sign(0) = 0 decides the step: for beta = 1 - 2^-k (0.875, 0.9375,
// a third of the seeds each), every 10th element has m = q, grad = -(2^k - 1) * q with q a
// multiple of 2^-14 (few bits), so both products and their sum are exact in fp32.
// (AddSign and PowerSign share this domain.)
void sign_inputs(std::mt19937& rng, size_t n, Tensors& t, double& beta);

// `pattern` repeated to n elements: n = 37 covers the vector body and the tail.
std::vector<double> tile(const std::vector<double>& pattern, size_t n = 37);

// Runs `op` with `attrs` in place on fp32 copies of `in`, on every ISA this CPU runs, and checks
// every tensor against `update` applied to `in` in fp64 with the op's tolerance (doctest
// CHECKs). Returns what each ISA's kernel left in the tensors. For focused edge-case tests.
std::vector<std::map<std::string, std::vector<float>>> check_kernel(
    const std::string& op, const Attrs& attrs, const Tensors& in, const Scalars& s,
    void (*update)(const Attrs&, const Scalars&, Tensors&));

}  // namespace opforge::testing
