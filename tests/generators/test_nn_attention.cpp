// scaled_dot_product_attention: an fp64 reference written from the definition (softmax(q k^T *
// scale + causal mask) v, the score matrix materialized in double, torch's top-left causal
// mask s <= l, kv head h / (H / Hkv)), registered for test_nn_kernels.cpp, which runs every
// variant (causal or not, each ISA the host runs) on these problems: L and S of 1, 17, 100 and
// 300 (several key blocks and query blocks, partial last ones), D of 128, 64, 40, 17 and 1,
// Hkv < H, batch 2, the default and a given scale, logits large enough for the online softmax to
// rescale; decode shapes (L of 2 to 16 against S up to 2048, L > S causal; L = 17 is just past
// the decode algorithm); the masked op with a float mask and with a bool one (a byte per
// element, true = attend; the harness draws 80% true, so a row of one key is sometimes all
// false: NaN, as torch). Then the declaration's rules and the runtime's errors.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "generators/nn_call_error.h"
#include "generators/nn_ops.h"
#include "generators/nn_reference.h"
#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "registry/format/shape_expr.h"
#include "test_registry.h"

namespace opforge::testing {
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
      {1, 2, 1, 3, 100, 128, 0}};
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

const RegisterNnReference reg("scaled_dot_product_attention", {problems(), reference, tolerance});
const RegisterNnReference reg_masked("scaled_dot_product_attention_masked",
                                     {masked_problems(), reference, tolerance});

}  // namespace
}  // namespace opforge::testing

using namespace opforge;
using opforge::testing::runnable_isas;
using opforge::testing::test_registry_dir;

TEST_CASE("scaled_dot_product_attention declaration: checks and cost (causal pairs)") {
  const auto& decl = generators::scaled_dot_product_attention();
  decl.validate();
  auto eval = [](const std::string& e, const std::map<std::string, int64_t>& env) {
    return *registry::ShapeExpr::parse(e).evaluate(env);
  };
  std::map<std::string, int64_t> env = {{"B", 2}, {"H", 8}, {"Hkv", 2},   {"L", 5},
                                        {"S", 5}, {"D", 3}, {"causal", 0}};
  for (const auto& c : decl.checks()) CHECK(eval(c.condition, env) == 1);
  CHECK(eval(decl.cost().flops, env) == 4 * 2 * 8 * 3 * 25);
  env["causal"] = 1;  // pairs s <= l: 1 + 2 + 3 + 4 + 5
  CHECK(eval(decl.cost().flops, env) == 4 * 2 * 8 * 3 * 15);
  env["L"] = 7;  // rows 5 and 6 see all 5 keys
  CHECK(eval(decl.cost().flops, env) == 4 * 2 * 8 * 3 * (15 + 10));
  env["L"] = 3, env["S"] = 6;  // 1 + 2 + 3
  CHECK(eval(decl.cost().flops, env) == 4 * 2 * 8 * 3 * 6);
  env["H"] = 6, env["Hkv"] = 4;
  int failed = 0;
  for (const auto& c : decl.checks()) {
    if (eval(c.condition, env) == 0) {
      ++failed;
      CHECK(c.message.find("Hkv") != std::string::npos);
    }
  }
  CHECK(failed == 1);
}

TEST_CASE("scaled_dot_product_attention: causal row 0 is v's first row exactly") {
  // Independent of the fp64 reference: with the top-left mask, query 0 sees key 0 only, so
  // its softmax weight is exactly 1 whatever the scores; the last query of a square problem
  // sees every key (checked against the non-causal variant on the same inputs).
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    CAPTURE(isa);
    const int64_t H = 4, Hkv = 2, L = 150, D = 24;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    std::vector<float> q(H * L * D), k(Hkv * L * D), v(Hkv * L * D), oc(H * L * D), of(H * L * D);
    for (auto* t : {&q, &k, &v})
      for (auto& e : *t) e = u(rng);
    auto tensors = [&](std::vector<float>& o) {
      return std::vector<Tensor>{{"q", q.data(), registry::DType::f32, {1, H, L, D}},
                                 {"k", k.data(), registry::DType::f32, {1, Hkv, L, D}},
                                 {"v", v.data(), registry::DType::f32, {1, Hkv, L, D}},
                                 {"o", o.data(), registry::DType::f32, {1, H, L, D}}};
    };
    reg->select("scaled_dot_product_attention", {{"causal", "true"}}, isa)
        .call(tensors(oc), {{"scale", 0.0}});
    reg->select("scaled_dot_product_attention", {{"causal", "false"}}, isa)
        .call(tensors(of), {{"scale", 0.0}});
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / Hkv);
      for (int64_t d = 0; d < D; ++d) {
        CHECK(oc[(h * L) * D + d] == v[(g * L) * D + d]);
        const size_t last = (h * L + L - 1) * D + d;
        CHECK(std::fabs(oc[last] - of[last]) <= 1e-6);
      }
    }
    // and the causal output differs from the full one where the mask matters
    CHECK(std::fabs(oc[D] - of[D]) > 1e-3);
  }
}

TEST_CASE("scaled_dot_product_attention rejects bad shapes and scales, naming them") {
  auto reg = Registry::open(test_registry_dir());
  std::vector<float> buf(4 * 8 * 16 * 64);
  auto t = [&](const std::string& n, std::vector<int64_t> s) {
    return Tensor{n, buf.data(), registry::DType::f32, s};
  };
  auto fails = [&](std::vector<Tensor> ts, double scale, const std::string& want) {
    testing::check_call_fails(*reg, "scaled_dot_product_attention", ts, {{"scale", scale}}, want);
  };
  // 3 query heads over 2 kv heads
  fails(
      {t("q", {1, 3, 8, 16}), t("k", {1, 2, 8, 16}), t("v", {1, 2, 8, 16}), t("o", {1, 3, 8, 16})},
      0, "Hkv");
  // k's head dim differs from q's
  fails({t("q", {1, 2, 8, 16}), t("k", {1, 2, 8, 8}), t("v", {1, 2, 8, 16}), t("o", {1, 2, 8, 16})},
        0, "D");
  // v has another number of keys than k
  fails(
      {t("q", {1, 2, 8, 16}), t("k", {1, 2, 8, 16}), t("v", {1, 2, 7, 16}), t("o", {1, 2, 8, 16})},
      0, "S");
  // no batch dim
  fails({t("q", {2, 8, 16}), t("k", {2, 8, 16}), t("v", {2, 8, 16}), t("o", {2, 8, 16})}, 0, "q");
  // a negative scale (0 is the default; there is no negative one)
  fails(
      {t("q", {1, 2, 8, 16}), t("k", {1, 2, 8, 16}), t("v", {1, 2, 8, 16}), t("o", {1, 2, 8, 16})},
      -1, "scale");
}

TEST_CASE(
    "scaled_dot_product_attention_masked: a -inf causal mask is the causal op; an all -inf row is "
    "NaN") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    CAPTURE(isa);
    const int64_t H = 2, L = 70, S = 200, D = 40;
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    std::vector<float> q(H * L * D), k(H * S * D), v(H * S * D), mask(L * S, 0.f), om(H * L * D),
        oc(H * L * D);
    for (auto* t : {&q, &k, &v})
      for (auto& e : *t) e = u(rng);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t j = l + 1; j < S; ++j) mask[l * S + j] = -INFINITY;
    for (int64_t j = 0; j < S; ++j) mask[5 * S + j] = -INFINITY;  // row 5: nothing to attend
    std::vector<Tensor> t = {{"q", q.data(), registry::DType::f32, {1, H, L, D}},
                             {"k", k.data(), registry::DType::f32, {1, H, S, D}},
                             {"v", v.data(), registry::DType::f32, {1, H, S, D}},
                             {"mask", mask.data(), registry::DType::f32, {L, S}},
                             {"o", om.data(), registry::DType::f32, {1, H, L, D}}};
    reg->select("scaled_dot_product_attention_masked", {}, isa).call(t, {{"scale", 0.0}});
    t.erase(t.begin() + 3);
    t.back().data = oc.data();
    reg->select("scaled_dot_product_attention", {{"causal", "true"}}, isa)
        .call(t, {{"scale", 0.0}});
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t l = 0; l < L; ++l) {
        for (int64_t d = 0; d < D; ++d) {
          const size_t i = (h * L + l) * D + d;
          if (l == 5) {
            CHECK(std::isnan(om[i]));
          } else {
            CHECK_MESSAGE(std::fabs(om[i] - oc[i]) <= 1e-6, "h " << h << " l " << l << " d " << d);
          }
        }
      }
    }
  }
}
