// group_norm: an fp64 reference written from torch.nn.functional.group_norm's definition
// (per sample and group of C / groups consecutive channels: mean and biased variance over the
// group's channels x H x W, then (x - mean) / sqrt(var + eps) * weight[c] + bias[c]);
// the check (registry/cli/check/nn_problem.h) runs every variant (each ISA the CPU runs) on it:
// C = 1, 5, 17, 1000 with one channel per group and many, W = 1, 5, 9, 17, 33 (tails of the 8-
// and 16-wide vectors) and 64, the serial path (N*C*H*W < 32768) and the parallel one, batch
// 1 and 3, and groups whose mean dwarfs their spread (x in [2.99, 3.01)): group_norm works in
// the frame shifted by the group's first element.
#include <cmath>

#include "registry/builder/nn_golden/add_references.h"

namespace opforge::nn_golden {
namespace {

std::vector<double> ref_group_norm(const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& b, const std::vector<int64_t>& s,
                                   int64_t groups, double eps) {
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3], CG = C / groups, M = CG * HW;
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t base = (n * C + g * CG) * HW;  // the group: M consecutive elements
      double mean = 0, var = 0;
      for (int64_t i = 0; i < M; ++i) mean += x[base + i];
      mean /= M;
      for (int64_t i = 0; i < M; ++i) var += (x[base + i] - mean) * (x[base + i] - mean);
      var /= M;  // biased, as torch
      for (int64_t i = 0; i < M; ++i) {
        const int64_t c = g * CG + i / HW;
        y[base + i] = (x[base + i] - mean) / std::sqrt(var + eps) * w[c] + b[c];
      }
    }
  }
  return y;
}

std::vector<NnProblem> group_norm_problems() {
  struct Case {
    int64_t n, c, h, w, groups;
    double lo = -1, hi = 1;
  };
  std::vector<NnProblem> out;
  for (const Case& v : std::vector<Case>{{1, 1, 1, 1, 1},
                                         {2, 5, 3, 7, 5},
                                         {2, 5, 3, 7, 1},
                                         {1, 17, 5, 5, 17},
                                         {3, 17, 4, 9, 1},
                                         {1, 1000, 2, 3, 40},
                                         {2, 1000, 1, 17, 8},
                                         {2, 64, 9, 33, 16},
                                         {1, 32, 16, 1, 4},
                                         {2, 320, 16, 16, 32},
                                         {1, 320, 64, 64, 32, 2.99, 3.01},
                                         {1, 64, 32, 32, 32, -5, 5}}) {
    NnProblem p;
    p.shapes = {{"x", {v.n, v.c, v.h, v.w}}, {"weight", {v.c}}, {"bias", {v.c}}};
    p.scalars = {{"groups", double(v.groups)}, {"eps", 1e-5}};
    p.lo = v.lo, p.hi = v.hi;
    out.push_back(p);
  }
  return out;
}

}  // namespace

void add_group_norm(NnReferences& r) {
  r["group_norm"] =
      NnReference{group_norm_problems(),
                  [](const NnShapes& s, const NnTensors& in, const NnScalars& sc, const NnAttrs&) {
                    return NnTensors{
                        {"y", ref_group_norm(in.at("x"), in.at("weight"), in.at("bias"), s.at("x"),
                                             static_cast<int64_t>(sc.at("groups")), sc.at("eps"))}};
                  }};
}

}  // namespace opforge::nn_golden
