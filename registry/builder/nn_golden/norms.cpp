// layer_norm, rms_norm, softmax, gelu (both forms), add_layer_norm and add_rms_norm: fp64
// references written from the formulas (torch semantics), with the problems `opforge check`
// and test_nn_kernels.cpp run every variant (each ISA the CPU runs) on: 1 x 1, C below / not a
// multiple of the vector width and of the 32 accumulator lanes, one row and many, the serial path
// (R*C < 32768) and the parallel one with a ragged last block, rows with |mean| >> std.
#include <cmath>
#include <random>
#include <set>

#include "registry/builder/nn_golden/add_references.h"

namespace opforge::nn_golden {
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
}  // namespace

std::vector<double> ref_gelu(const std::vector<float>& x, bool tanh_form) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    y[i] = tanh_form ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                     : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  }
  return y;
}

std::vector<double> ref_softmax(const std::vector<float>& x, int64_t R, int64_t C) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    double m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, double(x[r * C + c]));
    for (int64_t c = 0; c < C; ++c) sum += std::exp(x[r * C + c] - m);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = std::exp(x[r * C + c] - m) / sum;
  }
  return y;
}

void add_norms(NnReferences& r) {
  r["layer_norm"] = NnReference{
      row_problems(true, true, true),
      [](const NnShapes& s, const NnTensors& in, const NnScalars& sc, const NnAttrs&) {
        const int64_t R = s.at("x")[0], C = s.at("x")[1];
        return NnTensors{{"y", ref_layer_norm(as_float(in.at("x")), as_float(in.at("gamma")),
                                              as_float(in.at("beta")), sc.at("eps"), R, C)}};
      }};
  r["rms_norm"] = NnReference{
      row_problems(true, false, true),
      [](const NnShapes& s, const NnTensors& in, const NnScalars& sc, const NnAttrs&) {
        const int64_t R = s.at("x")[0], C = s.at("x")[1];
        return NnTensors{{"y", ref_rms_norm(as_float(in.at("x")), as_float(in.at("gamma")),
                                            sc.at("eps"), R, C)}};
      }};
  r["softmax"] = NnReference{
      row_problems(false, false, false),
      [](const NnShapes& s, const NnTensors& in, const NnScalars&, const NnAttrs&) {
        return NnTensors{{"y", ref_softmax(as_float(in.at("x")), s.at("x")[0], s.at("x")[1])}};
      }};
  r["add_layer_norm"] = NnReference{
      add_row_problems(true),
      [](const NnShapes& s, const NnTensors& in, const NnScalars& sc, const NnAttrs&) {
        const int64_t R = s.at("x")[0], C = s.at("x")[1];
        const std::vector<float> h = fp32_sum(in.at("x"), in.at("residual"));
        return NnTensors{{"sum", Rows(h.begin(), h.end())},
                         {"y", ref_layer_norm(h, as_float(in.at("gamma")), as_float(in.at("beta")),
                                              sc.at("eps"), R, C)}};
      }};
  r["add_rms_norm"] = NnReference{
      add_row_problems(false),
      [](const NnShapes& s, const NnTensors& in, const NnScalars& sc, const NnAttrs&) {
        const int64_t R = s.at("x")[0], C = s.at("x")[1];
        const std::vector<float> h = fp32_sum(in.at("x"), in.at("residual"));
        return NnTensors{{"sum", Rows(h.begin(), h.end())},
                         {"y", ref_rms_norm(h, as_float(in.at("gamma")), sc.at("eps"), R, C)}};
      }};
  r["gelu"] = NnReference{
      gelu_problems(),
      [](const NnShapes&, const NnTensors& in, const NnScalars&, const NnAttrs& at) {
        return NnTensors{{"y", ref_gelu(as_float(in.at("x")), at.at("approximate") == "tanh")}};
      }};
}

}  // namespace opforge::nn_golden
