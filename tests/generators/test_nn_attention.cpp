// scaled_dot_product_attention beyond the reference run (its fp64 reference and problems:
// registry/builder/nn_golden/attention.cpp; test_nn_kernels.cpp runs every variant on them):
// the declaration's checks and cost, causal row 0, and bad shapes and scales, which must fail
// naming the argument.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "generators/nn_call_error.h"
#include "generators/nn_ops.h"
#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "registry/builder/nn_golden/nn_reference.h"
#include "registry/format/shape_expr.h"
#include "test_registry.h"

namespace opforge::testing {
namespace {

using namespace nn_golden;  // NnProblem, NnReference, the formulas

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

}  // namespace
}  // namespace opforge::testing
