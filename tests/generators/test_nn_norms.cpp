// layer_norm, rms_norm, softmax, gelu (both forms), add_layer_norm and add_rms_norm: fp64
// references written from the formulas (torch semantics), registered with their problems for
// test_nn_kernels.cpp, which runs every variant in the registry (each ISA the CPU runs) on them: 1
// x 1, C below / not a multiple of the vector width and of the 32 accumulator lanes, one row and
// many, the serial path (R*C < 32768) and the parallel one with a ragged last block, rows with
// |mean| >> std. This file adds softmax's -inf (masked) and NaN rows, and bad shapes, which must
// fail with an error naming the argument.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <set>

#include "generators/isa.h"
#include "generators/nn_call_error.h"
#include "generators/nn_reference.h"
#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

using Rows = std::vector<double>;

Rows ref_layer_norm(const std::vector<float>& x, const std::vector<float>& g,
                    const std::vector<float>& b, double eps, int64_t R, int64_t C) {
  Rows y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    const float* xr = &x[r * C];
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mean += xr[c];
    mean /= C;
    for (int64_t c = 0; c < C; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= C;  // biased, as torch
    for (int64_t c = 0; c < C; ++c)
      y[r * C + c] = (xr[c] - mean) / std::sqrt(var + eps) * g[c] + b[c];
  }
  return y;
}

Rows ref_rms_norm(const std::vector<float>& x, const std::vector<float>& g, double eps, int64_t R,
                  int64_t C) {
  Rows y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += double(x[r * C + c]) * x[r * C + c];
    const double s = 1 / std::sqrt(ms / C + eps);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = x[r * C + c] * s * g[c];
  }
  return y;
}

Rows ref_softmax(const std::vector<float>& x, int64_t R, int64_t C) {
  Rows y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    double m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, double(x[r * C + c]));
    for (int64_t c = 0; c < C; ++c) sum += std::exp(x[r * C + c] - m);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = std::exp(x[r * C + c] - m) / sum;
  }
  return y;
}

Rows ref_gelu(const std::vector<float>& x, bool tanh_form) {
  Rows y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    y[i] = tanh_form ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                     : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  }
  return y;
}

// For test_nn_kernels.cpp: the formulas on double inputs, over odd shapes.
std::vector<float> as_float(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

// 1 x 1; C < 16, = 16, odd, not a multiple of 32, large; serial (R*C < 32768) and parallel
// (run-time row blocks, ragged at R = 37 and 300; one row, and fewer rows than blocks, with C
// odd: softmax reads row min(r + 1, R - 1) ahead); and rows whose mean dwarfs their spread
// (x in [2.99, 3.01) and [9, 11)): layer_norm works in the frame shifted by x[0].
std::vector<NnProblem> row_problems(bool gamma, bool beta, bool eps) {
  struct RowCase {
    int64_t R, C;
    double lo = -1, hi = 1;
  };
  std::vector<NnProblem> out;
  for (const RowCase& r : std::vector<RowCase>{{1, 1},
                                               {1, 7},
                                               {3, 5},
                                               {3, 17},
                                               {5, 16},
                                               {33, 31},
                                               {2, 1000},
                                               {37, 1024},
                                               {300, 33},
                                               {1, 32771},
                                               {3, 16411},
                                               {64, 1024, -5, 5},
                                               {2, 8192},
                                               {8, 8192, 9, 11},
                                               {8, 8192, 2.99, 3.01}}) {
    NnProblem p;
    p.shapes["x"] = {r.R, r.C};
    if (gamma) p.shapes["gamma"] = {r.C};
    if (beta) p.shapes["beta"] = {r.C};
    if (eps) p.scalars["eps"] = 1e-5;
    p.lo = r.lo, p.hi = r.hi;
    out.push_back(p);
  }
  return out;
}

const RegisterNnReference reg_layer_norm(
    "layer_norm",
    {row_problems(true, true, true),
     [](const NnShapes& s, const NnTensors& in, const NnScalars& sc, const NnAttrs&) {
       const int64_t R = s.at("x")[0], C = s.at("x")[1];
       return NnTensors{{"y", ref_layer_norm(as_float(in.at("x")), as_float(in.at("gamma")),
                                             as_float(in.at("beta")), sc.at("eps"), R, C)}};
     }});
const RegisterNnReference reg_rms_norm(
    "rms_norm",
    {row_problems(true, false, true),
     [](const NnShapes& s, const NnTensors& in, const NnScalars& sc, const NnAttrs&) {
       const int64_t R = s.at("x")[0], C = s.at("x")[1];
       return NnTensors{
           {"y", ref_rms_norm(as_float(in.at("x")), as_float(in.at("gamma")), sc.at("eps"), R, C)}};
     }});
const RegisterNnReference reg_softmax(
    "softmax",
    {row_problems(false, false, false),
     [](const NnShapes& s, const NnTensors& in, const NnScalars&, const NnAttrs&) {
       return NnTensors{{"y", ref_softmax(as_float(in.at("x")), s.at("x")[0], s.at("x")[1])}};
     }});

// add_layer_norm / add_rms_norm: sum = x + residual as torch forms it, an fp32 tensor (the
// fp32 add of two fp32 values, rounded once), then the norm of that tensor in fp64 from the
// formulas above. Normalizing the unrounded sum instead would count the sum's own rounding
// (up to ulp(6) / std = 6e-5 for the rows with mean 6, std 0.01) as the kernel's error.
std::vector<NnProblem> add_row_problems(bool beta) {
  std::vector<NnProblem> out = row_problems(true, beta, true);
  for (auto& p : out) p.shapes["residual"] = p.shapes.at("x");
  return out;
}
std::vector<float> fp32_sum(const std::vector<double>& x, const std::vector<double>& r) {
  std::vector<float> s(x.size());
  for (size_t i = 0; i < x.size(); ++i) s[i] = static_cast<float>(x[i]) + static_cast<float>(r[i]);
  return s;
}
const RegisterNnReference reg_add_layer_norm(
    "add_layer_norm",
    {add_row_problems(true),
     [](const NnShapes& s, const NnTensors& in, const NnScalars& sc, const NnAttrs&) {
       const int64_t R = s.at("x")[0], C = s.at("x")[1];
       const std::vector<float> h = fp32_sum(in.at("x"), in.at("residual"));
       return NnTensors{{"sum", Rows(h.begin(), h.end())},
                        {"y", ref_layer_norm(h, as_float(in.at("gamma")), as_float(in.at("beta")),
                                             sc.at("eps"), R, C)}};
     }});
const RegisterNnReference reg_add_rms_norm(
    "add_rms_norm",
    {add_row_problems(false),
     [](const NnShapes& s, const NnTensors& in, const NnScalars& sc, const NnAttrs&) {
       const int64_t R = s.at("x")[0], C = s.at("x")[1];
       const std::vector<float> h = fp32_sum(in.at("x"), in.at("residual"));
       return NnTensors{{"sum", Rows(h.begin(), h.end())},
                        {"y", ref_rms_norm(h, as_float(in.at("gamma")), sc.at("eps"), R, C)}};
     }});

std::vector<NnProblem> gelu_problems() {
  std::vector<NnProblem> out;
  for (const char* form : {"none", "tanh"}) {
    // Tails of 16-wide vectors, the serial path (< 16384) and ragged parallel chunks; both
    // saturated ends of the curve.
    for (int64_t n : {1, 15, 17, 1000, 65543}) {
      for (double range : {6.0, 15.0}) {
        NnProblem p;
        p.shapes["x"] = {n};
        p.attrs = {{"approximate", form}};
        p.lo = -range, p.hi = range;
        out.push_back(p);
      }
    }
  }
  return out;
}
const RegisterNnReference reg_gelu(
    "gelu",
    {gelu_problems(),
     [](const NnShapes&, const NnTensors& in, const NnScalars&, const NnAttrs& at) {
       return NnTensors{{"y", ref_gelu(as_float(in.at("x")), at.at("approximate") == "tanh")}};
     }});

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
