// scaled_dot_product_attention: an fp64 reference written from the definition (softmax(q k^T *
// scale + causal mask) v, the score matrix materialized in double, torch's top-left causal
// mask s <= l, kv head h / (H / Hkv)); the check (registry/cli/check/nn_problem.h) runs every
// variant (causal or not, each ISA the host runs) on these problems: L and S of 1, 17, 100 and
// 300 (several key blocks and query blocks, partial last ones), D of 128, 64, 40, 17 and 1,
// Hkv < H, batch 2, the default and a given scale, logits large enough for the online softmax to
// rescale; decode shapes (L of 2 to 16 against S up to 2048, L > S causal; L = 17 is just past
// decode; decode_queries' L of 11 to 32 with S below, at and past its key block); the masked
// op with a float mask and with a bool one (a byte per element, true = attend; the harness
// draws 80% true, so a row of one key is sometimes all false: NaN, as torch).
#include <cmath>
#include <random>

#include "registry/builder/nn_golden/add_references.h"

namespace opforge::nn_golden {
namespace {

struct Case {
  int64_t B, H, Hkv, L, S, D;
  double scale;      // 0: the default 1/sqrt(D)
  double range = 1;  // inputs uniform in [-range, range)
};

std::vector<NnProblem> problems() {
  const std::vector<Case> cases = {
      {1, 1, 1, 1, 1, 64, 0},
      {1, 2, 1, 17, 17, 40, 0},
      {2, 4, 2, 100, 100, 64, 0},
      {1, 3, 3, 17, 100, 40, 0},
      {1, 2, 2, 100, 17, 64, 0},
      {1, 4, 1, 300, 300, 64, 0},
      {1, 2, 1, 33, 300, 17, 0.3},
      {1, 1, 1, 1, 17, 1, 0},
      {1, 2, 1, 100, 300, 64, 0.5, 3},
      {1, 1, 1, 300, 1, 40, 0},
      // decode-shaped (L <= 16: the decode algorithm too; L = 17 above is just past it)
      {1, 4, 2, 2, 1000, 64, 0},
      {2, 3, 1, 5, 333, 40, 0},
      {1, 2, 2, 8, 2048, 64, 0.2},
      {1, 4, 4, 3, 77, 17, 0},
      {1, 2, 1, 7, 50, 1, 0},
      {1, 8, 2, 4, 129, 64, 0.5, 3},
      {1, 2, 1, 8, 5, 40, 0},
      {1, 2, 1, 16, 300, 64, 0},
      {1, 3, 1, 12, 40, 17, 0},
      {1, 2, 1, 3, 100, 128, 0},
      // decode_queries (11 <= L <= 32, D a multiple of 32): fewer keys than its 16-key block
      // (AVX2: 6; S = 5, 7), a shifted last block (S = 1000), D = 128 and 96, batch 2, grouped
      // heads, two blocks of 16 queries (L = 17, 24, 32)
      {2, 4, 2, 14, 5, 32, 0},
      {1, 4, 1, 13, 1000, 128, 0.3, 3},
      {1, 2, 2, 16, 7, 64, 0},
      {1, 3, 1, 11, 203, 96, 0},
      {1, 2, 1, 17, 300, 64, 0},
      {2, 2, 1, 24, 20, 32, 0},
      {1, 4, 2, 32, 1000, 128, 0.5, 3}};
  std::vector<NnProblem> out;
  for (bool causal : {false, true}) {
    for (const Case& c : cases) {
      NnProblem p;
      p.shapes = {{"q", {c.B, c.H, c.L, c.D}},
                  {"k", {c.B, c.Hkv, c.S, c.D}},
                  {"v", {c.B, c.Hkv, c.S, c.D}}};
      p.scalars = {{"scale", c.scale}};
      p.attrs = {{"causal", causal ? "true" : "false"}};
      p.lo = -c.range, p.hi = c.range;
      out.push_back(p);
    }
  }
  return out;
}

// The masked op's problems: the same cases, an additive mask [L, S] drawn like the inputs,
// and the same with a bool mask.
std::vector<NnProblem> masked_problems() {
  std::vector<NnProblem> out;
  for (const char* dtype : {"float32", "bool"}) {
    for (NnProblem p : problems()) {
      if (p.attrs.at("causal") == "true") continue;
      p.attrs = {{"mask_dtype", dtype}};
      p.shapes["mask"] = {p.shapes.at("q")[2], p.shapes.at("k")[2]};
      out.push_back(p);
    }
  }
  return out;
}

NnTensors reference(const NnShapes& s, const NnTensors& in, const NnScalars& sc,
                    const NnAttrs& at) {
  const bool causal = at.count("causal") && at.at("causal") == "true";
  const bool bool_mask = at.count("mask_dtype") && at.at("mask_dtype") == "bool";
  const std::vector<double>* mask = in.count("mask") ? &in.at("mask") : nullptr;
  const auto& qs = s.at("q");
  const auto& ks = s.at("k");
  const int64_t B = qs[0], H = qs[1], L = qs[2], D = qs[3], Hkv = ks[1], S = ks[2];
  const double scale = sc.at("scale") > 0 ? sc.at("scale") : 1.0 / std::sqrt(double(D));
  const auto &q = in.at("q"), &k = in.at("k"), &v = in.at("v");
  std::vector<double> o(B * H * L * D), w(S);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / Hkv);
      const double* kk = k.data() + (b * Hkv + g) * S * D;
      const double* vv = v.data() + (b * Hkv + g) * S * D;
      for (int64_t l = 0; l < L; ++l) {
        const double* qq = q.data() + ((b * H + h) * L + l) * D;
        double mx = -INFINITY;
        for (int64_t j = 0; j < S; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qq[d] * kk[j * D + d];
          const double m = !mask                     ? 0.0
                           : !bool_mask              ? (*mask)[l * S + j]
                           : (*mask)[l * S + j] != 0 ? 0.0
                                                     : -INFINITY;
          w[j] = causal && j > l ? -INFINITY : dot * scale + m;
          mx = std::max(mx, w[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < S; ++j) sum += (w[j] = std::exp(w[j] - mx));
        double* oo = o.data() + ((b * H + h) * L + l) * D;
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j) acc += w[j] * vv[j * D + d];
          oo[d] = acc / sum;
        }
      }
    }
  }
  return {{"o", o}};
}

// Inputs in [-3, 3) with scale 0.5 give logits up to ~50: each fp32 score then carries an
// absolute rounding error of ~|logit| * 2^-24 * sqrt(D) ~ 2e-5, which exp turns into a relative
// error of the weights, so |o| errors ~1e-5 whatever the kernel (numpy fp32 q@k.T, softmax,
// @v on such problems: 1.7e-5 worst against fp64; this kernel 1.4e-5). Those problems get
// atol 5e-5; the others keep the descriptor's tolerance.
std::pair<double, double> tolerance(const NnProblem& p) {
  return p.hi > 1 ? std::make_pair(1e-5, 5e-5) : std::make_pair(1e-5, 2e-6);
}

}  // namespace

void add_attention(NnReferences& r) {
  r["scaled_dot_product_attention"] = NnReference{problems(), reference, tolerance};
  r["scaled_dot_product_attention_masked"] = NnReference{masked_problems(), reference, tolerance};
}

}  // namespace opforge::nn_golden
