// layer_norm, rms_norm, softmax, gelu, add_layer_norm, add_rms_norm beyond the reference run
// (their fp64 references and problems: registry/builder/nn_golden/norms.cpp;
// test_nn_kernels.cpp runs every variant on them): softmax's -inf (masked) and NaN rows,
// gelu's dense sweep and special values, and bad shapes, which must fail with an error naming
// the argument.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <set>

#include "generators/isa.h"
#include "generators/nn_call_error.h"
#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "registry/builder/nn_golden/nn_reference.h"
#include "test_registry.h"

namespace opforge::testing {
namespace {

using namespace nn_golden;  // NnProblem, NnReference, the formulas
using Rows = std::vector<double>;

std::vector<float> random(std::mt19937& rng, size_t n, float scale, float offset) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& e : v) e = d(rng) * scale + offset;
  return v;
}

void compare(const Kernel& k, const std::string& what, const std::vector<float>& got,
             const Rows& want) {
  const auto& tol = k.descriptor().tolerance;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (double(got[i]) == want[i]) continue;
    const double excess = std::fabs(got[i] - want[i]) / (tol.atol + tol.rtol * std::fabs(want[i]));
    if (!(excess <= worst)) worst = std::isnan(excess) ? INFINITY : excess, at = i;
  }
  CHECK_MESSAGE(worst <= 1, k.descriptor().variant << " " << what << ": y[" << at << "] = "
                                                   << got[at] << ", fp64 reference " << want[at]
                                                   << " (" << worst << "x the tolerance)");
}

TEST_CASE("softmax: masked (-inf) entries give exactly 0, a NaN poisons its row") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    const int64_t R = 3, C = 37;
    std::mt19937 rng(5);
    std::vector<float> x = random(rng, R * C, 1, 0), y(R * C);
    for (int64_t c = 20; c < C; ++c) x[c] = -INFINITY;  // row 0: a causal-style mask
    x[C + 3] = NAN;                                     // row 1
    std::vector<Tensor> t = {{"x", x.data(), registry::DType::f32, {R, C}},
                             {"y", y.data(), registry::DType::f32, {R, C}}};
    Kernel& k = reg->select("softmax", {}, isa);
    k.call(t, {});
    const Rows want = ref_softmax(x, R, C);
    for (int64_t c = 20; c < C; ++c) CHECK(y[c] == 0.f);
    std::vector<float> row0(y.begin(), y.begin() + 20), row2(y.begin() + 2 * C, y.end());
    compare(k, "masked row", row0, Rows(want.begin(), want.begin() + 20));
    for (int64_t c = 0; c < C; ++c) CHECK(std::isnan(y[C + c]));
    compare(k, "clean row", row2, Rows(want.begin() + 2 * C, want.end()));
  }
}

TEST_CASE("gelu: both forms over [-15, 15] in steps of 1e-4, and torch's special values") {
  // torch 1.13: gelu(+inf) = +inf, gelu(-inf) = NaN (-inf * 0 in its formula, either form),
  // NaN stays NaN, and a huge negative x gives a zero.
  auto reg = Registry::open(test_registry_dir());
  std::vector<float> x;
  for (int64_t j = -150000; j <= 150000; ++j) x.push_back(float(j) * 1e-4f);
  // (x, torch's gelu(x)), NaN where torch gives NaN; zeros compare equal whatever their sign.
  const std::vector<std::pair<float, float>> special = {
      {INFINITY, INFINITY}, {-INFINITY, NAN},   {NAN, NAN},           {1e30f, 1e30f}, {-1e30f, 0.f},
      {-100.f, 0.f},        {1e-30f, 0.5e-30f}, {-1e-30f, -0.5e-30f}, {0.f, 0.f},     {-0.f, 0.f}};
  for (const auto& p : special) x.push_back(p.first);
  const size_t n = x.size(), s0 = n - special.size();
  for (const std::string& isa : runnable_isas()) {
    for (const bool tanh_form : {false, true}) {
      std::vector<float> y(n);
      std::vector<Tensor> t = {{"x", x.data(), registry::DType::f32, {int64_t(n)}},
                               {"y", y.data(), registry::DType::f32, {int64_t(n)}}};
      Kernel& k = reg->select("gelu", {{"approximate", tanh_form ? "tanh" : "none"}}, isa);
      k.call(t, {});
      const Rows want = ref_gelu(x, tanh_form);
      compare(k, "sweep", std::vector<float>(y.begin(), y.begin() + s0),
              Rows(want.begin(), want.begin() + s0));
      for (size_t j = 0; j < special.size(); ++j) {
        const auto [v, torch] = special[j];
        CHECK_MESSAGE(
            (std::isnan(torch) ? std::isnan(y[s0 + j]) : y[s0 + j] == torch),
            k.descriptor().variant << ": gelu(" << v << ") = " << y[s0 + j] << ", torch " << torch);
      }
    }
  }
}

TEST_CASE("row-wise ops reject bad shapes, naming the argument") {
  auto reg = Registry::open(test_registry_dir());
  std::vector<float> x(4 * 8), g(9), b(8), y(4 * 8);
  auto fails = [&](const std::string& op, std::vector<Tensor> t, const std::string& arg) {
    std::map<std::string, double> sc;
    if (op != "softmax" && op != "gelu") sc["eps"] = 1e-5;
    check_call_fails(*reg, op, t, sc, arg);
  };
  // gamma of 9 elements against rows of 8
  fails("layer_norm",
        {{"x", x.data(), registry::DType::f32, {4, 8}},
         {"gamma", g.data(), registry::DType::f32, {9}},
         {"beta", b.data(), registry::DType::f32, {8}},
         {"y", y.data(), registry::DType::f32, {4, 8}}},
        "gamma");
  fails("rms_norm",
        {{"x", x.data(), registry::DType::f32, {4, 8}},
         {"gamma", g.data(), registry::DType::f32, {9}},
         {"y", y.data(), registry::DType::f32, {4, 8}}},
        "gamma");
  // rank 3 where [R, C] is declared
  fails("softmax",
        {{"x", x.data(), registry::DType::f32, {2, 2, 8}},
         {"y", y.data(), registry::DType::f32, {2, 2, 8}}},
        "x");
  // residual of another shape than x
  fails("add_layer_norm",
        {{"x", x.data(), registry::DType::f32, {4, 8}},
         {"residual", y.data(), registry::DType::f32, {8, 4}},
         {"gamma", b.data(), registry::DType::f32, {8}},
         {"beta", b.data(), registry::DType::f32, {8}},
         {"sum", y.data(), registry::DType::f32, {4, 8}},
         {"y", y.data(), registry::DType::f32, {4, 8}}},
        "residual");
  // the sum output of another shape
  fails("add_rms_norm",
        {{"x", x.data(), registry::DType::f32, {4, 8}},
         {"residual", y.data(), registry::DType::f32, {4, 8}},
         {"gamma", b.data(), registry::DType::f32, {8}},
         {"sum", y.data(), registry::DType::f32, {4, 7}},
         {"y", y.data(), registry::DType::f32, {4, 8}}},
        "sum");
  // gamma of 9 elements against rows of 8
  fails("add_rms_norm",
        {{"x", x.data(), registry::DType::f32, {4, 8}},
         {"residual", y.data(), registry::DType::f32, {4, 8}},
         {"gamma", g.data(), registry::DType::f32, {9}},
         {"sum", y.data(), registry::DType::f32, {4, 8}},
         {"y", y.data(), registry::DType::f32, {4, 8}}},
        "gamma");
  // gelu is declared over a flat x[N]
  fails("gelu",
        {{"x", x.data(), registry::DType::f32, {4, 8}},
         {"y", y.data(), registry::DType::f32, {4, 8}}},
        "x");
}

}  // namespace
}  // namespace opforge::testing
