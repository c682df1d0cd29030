// Rule files through the same builder, cache and runtime as the C++ ops: the example rule
// against an fp64 reference, a rule version of TF's ApplyAdam against the C++ apply_adam, cache
// hits and misses on rule edits, and a bad rule leaving registry and cache untouched.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "builder_test_util.h"
#include "dsl/rules/diagnostics.h"
#include "dsl/rules/rule_parser.h"
#include "opforge/runtime.hpp"
#include "registry/builder/registry_builder.h"

namespace opforge::builder {
namespace {

namespace fs = std::filesystem;
using testing::build;
using testing::TempDir;

const fs::path kRules = fs::path(OPFORGE_SOURCE_DIR) / "generators" / "rules";

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

TEST_CASE("rules: the example rule matches its fp64 formula; the Adam rule matches apply_adam") {
  TempDir t;
  build(t.path / "reg", t.path / "cache", {"apply_adam", "adam_rule", "sign_sqrt_momentum"},
        {kRules.string()});
  auto reg = Registry::open((t.path / "reg").string());
  const int64_t n = 1001;
  std::mt19937 rng(5);

  // sign_sqrt_momentum, both values of its attr nesterov (each a variant).
  for (const bool nesterov : {false, true}) {
    CAPTURE(nesterov);
    std::vector<float> var = random_floats(rng, n, -1, 1), m = random_floats(rng, n, -1, 1);
    std::vector<float> grad = random_floats(rng, n, -1, 1);
    grad[7] = 0;
    const std::vector<float> var0 = var, m0 = m;
    Kernel& k =
        reg->select("sign_sqrt_momentum", {{"nesterov", nesterov ? "true" : "false"}}, "avx2");
    k.call({{"var", var.data(), registry::DType::f32, {n}},
            {"m", m.data(), registry::DType::f32, {n}},
            {"grad", grad.data(), registry::DType::f32, {n}}},
           {{"lr", 0.01f}, {"beta", 0.9f}});
    const double lr = 0.01f, beta = 0.9f;
    for (int64_t i = 0; i < n; ++i) {
      const double g0 = grad[i];
      const double g = (g0 > 0 ? 1 : g0 < 0 ? -1 : 0) * std::sqrt(std::fabs(g0));
      const double m_new = beta * m0[i] + (1 - beta) * g;
      // Simultaneous updates: var reads the old m.
      const double step = nesterov ? beta * m0[i] + g : m0[i];
      const double var_new = var0[i] - lr * step;
      CHECK(std::fabs(m[i] - m_new) <= 1e-7 + 1e-6 * std::fabs(m_new));
      CHECK(std::fabs(var[i] - var_new) <= 1e-7 + 1e-6 * std::fabs(var_new));
    }
  }

  // adam_rule vs the C++ apply_adam on the same inputs, nesterov off and on.
  for (const char* nesterov : {"false", "true"}) {
    CAPTURE(nesterov);
    std::vector<float> a_var = random_floats(rng, n, -1, 1), a_m = random_floats(rng, n, -.1f, .1f);
    std::vector<float> a_v = random_floats(rng, n, 0, .01f), a_g = random_floats(rng, n, -1, 1);
    std::vector<float> b_var = a_var, b_m = a_m, b_v = a_v;
    const std::map<std::string, double> s = {{"lr", 0.001},         {"beta1", 0.9},
                                             {"beta2", 0.999},      {"epsilon", 1e-7},
                                             {"beta1_power", 0.59}, {"beta2_power", 0.995}};
    auto tensors = [&](std::vector<float>& var_, std::vector<float>& m_, std::vector<float>& v_) {
      return std::vector<Tensor>{{"var", var_.data(), registry::DType::f32, {n}},
                                 {"m", m_.data(), registry::DType::f32, {n}},
                                 {"v", v_.data(), registry::DType::f32, {n}},
                                 {"grad", a_g.data(), registry::DType::f32, {n}}};
    };
    // Every value of a rule's bool attr ships (issue 17: only the default used to).
    const std::map<std::string, std::string> attrs = {{"use_nesterov", nesterov}};
    reg->select("adam_rule", attrs, "avx2").call(tensors(a_var, a_m, a_v), s);
    reg->select("apply_adam", attrs, "avx2").call(tensors(b_var, b_m, b_v), s);
    for (int64_t i = 0; i < n; ++i) {
      CHECK(std::fabs(a_var[i] - b_var[i]) <= 1e-7 + 4e-7 * std::fabs(b_var[i]));
      CHECK(std::fabs(a_m[i] - b_m[i]) <= 1e-7 + 4e-7 * std::fabs(b_m[i]));
      CHECK(std::fabs(a_v[i] - b_v[i]) <= 1e-7 + 4e-7 * std::fabs(b_v[i]));
    }
  }
}

// A choice attr: each choice is its own variant, each against the formula in fp64.
TEST_CASE("rules: every choice of a choice attr is a variant that matches its fp64 formula") {
  TempDir t;
  const fs::path rule =
      fs::path(OPFORGE_SOURCE_DIR) / "tests" / "dsl" / "rules" / "corpus" / "good_choice_attr.rule";
  build(t.path / "reg", t.path / "cache", {"choice_demo"}, {rule.string()});
  auto reg = Registry::open((t.path / "reg").string());
  const int64_t n = 1003;
  std::mt19937 rng(11);
  for (const std::string mode : {"plain", "scaled", "clipped"}) {
    CAPTURE(mode);
    std::vector<float> var = random_floats(rng, n, -1, 1), m = random_floats(rng, n, -2, 2);
    std::vector<float> grad = random_floats(rng, n, -1, 1);
    const std::vector<float> var0 = var, m0 = m;
    reg->select("choice_demo", {{"mode", mode}})
        .call({{"var", var.data(), registry::DType::f32, {n}},
               {"m", m.data(), registry::DType::f32, {n}},
               {"grad", grad.data(), registry::DType::f32, {n}}},
              {{"lr", 0.01f}});
    const double lr = 0.01f;
    for (int64_t i = 0; i < n; ++i) {
      // m = 0.9 m + g; var -= lr * shape(old m), updates simultaneous.
      const double m_new = 0.9 * m0[i] + grad[i];
      const double step = mode == "scaled"    ? 0.5 * m0[i]
                          : mode == "clipped" ? std::min(std::max(double(m0[i]), -1.0), 1.0)
                                              : m0[i];
      const double var_new = var0[i] - lr * step;
      CHECK(std::fabs(m[i] - m_new) <= 1e-7 + 1e-6 * std::fabs(m_new));
      CHECK(std::fabs(var[i] - var_new) <= 1e-7 + 1e-6 * std::fabs(var_new));
    }
  }
  CHECK_THROWS_WITH_AS(reg->select("choice_demo", {{"mode", "keras"}}), doctest::Contains("mode"),
                       Error);
}

// The forms a rule gets without asking: an elementwise rule is splittable (larger tensors in
// slices) and multi-tensor (call_model over a model's flat buffers); one with norm2/sum
// reduces over the whole tensor, so it is neither.
TEST_CASE("rules: elementwise rules are splittable and multi-tensor, reducing ones are not") {
  TempDir t;
  const fs::path corpus = fs::path(OPFORGE_SOURCE_DIR) / "tests" / "dsl" / "rules" / "corpus";
  build(t.path / "reg", t.path / "cache", {"sgd", "lamb_rule"},
        {(corpus / "good_sgd.rule").string(), (corpus / "good_lamb.rule").string()});
  auto reg = Registry::open((t.path / "reg").string());
  for (const auto& d : reg->variants("sgd")) {
    CAPTURE(d.variant);
    CHECK(d.shape.elementwise);
    CHECK(d.shape.splittable);
    CHECK(d.shape.multi_tensor);
  }
  for (const auto& d : reg->variants("lamb_rule")) {
    CAPTURE(d.variant);
    CHECK_FALSE(d.shape.splittable);
    CHECK_FALSE(d.shape.multi_tensor);
  }
}

// The parser's list of storages (it does not link the DSL) is exactly what the DSL reads.
TEST_CASE("rules: every storage a rule may list is a dsl::Storage tag") {
  for (const std::string& tag : dsl::rules::storage_tags()) {
    CAPTURE(tag);
    CHECK(dsl::Storage::from_tag(tag).tag() == tag);
  }
  CHECK(dsl::rules::storage_tags().size() == 11);
}

TEST_CASE("rules: an unchanged rule is a cache hit, an edit is a miss naming the algorithm") {
  TempDir t;
  const fs::path rule = t.path / "r.rule";
  auto write = [&](const char* beta) {
    std::ofstream(rule) << "optimizer tiny_rule\n  state var\n  input grad\n  hyper lr = 0.1\n"
                        << "  var = var - lr * grad * " << beta << "\n";
  };
  write("0.5");
  auto rule_variants = [](const BuildReport& r) {
    std::vector<VariantResult> out;
    for (const auto& v : r.variants) {
      if (v.op == "tiny_rule") out.push_back(v);
    }
    return out;
  };
  const auto a =
      rule_variants(build(t.path / "reg", t.path / "cache", {"tiny_rule"}, {rule.string()}));
  const auto b =
      rule_variants(build(t.path / "reg", t.path / "cache", {"tiny_rule"}, {rule.string()}));
  REQUIRE(b.size() == 2);
  for (const auto& v : b) CHECK(v.hit);
  write("0.50000006");  // the next float after 0.5
  const auto c =
      rule_variants(build(t.path / "reg", t.path / "cache", {"tiny_rule"}, {rule.string()}));
  REQUIRE(c.size() == 2);
  for (const auto& v : c) {
    CHECK_FALSE(v.hit);
    CHECK(v.why.find("algorithm changed") != std::string::npos);
  }
  CHECK(a[0].key != c[0].key);
}

TEST_CASE("rules: a bad rule is a file:line:col error and writes nothing") {
  TempDir t;
  const fs::path rule = t.path / "bad.rule";
  std::ofstream(rule) << "optimizer bad_rule\n  state var\n  input grad\n  hyper lr = 0.1\n"
                      << "  var = var - lrr * grad\n";
  try {
    build(t.path / "reg", t.path / "cache", {}, {rule.string()});
    FAIL("a bad rule built");
  } catch (const dsl::rules::RuleError& e) {
    CHECK(std::string(e.what()).find("bad.rule:5:15: error:") != std::string::npos);
    CHECK(std::string(e.what()).find("did you mean 'lr'?") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(t.path / "reg"));
  CHECK_FALSE(fs::exists(t.path / "cache"));
  // Every bad rule of the parser's corpus fails the same way, before anything is written.
  int bad = 0;
  for (const auto& f : fs::directory_iterator(fs::path(OPFORGE_SOURCE_DIR) / "tests" / "dsl" /
                                              "rules" / "corpus")) {
    if (f.path().filename().string().rfind("bad_", 0) != 0) continue;
    CAPTURE(f.path().string());
    CHECK_THROWS_AS(build(t.path / "reg", t.path / "cache", {}, {f.path().string()}),
                    dsl::rules::RuleError);
    ++bad;
  }
  CHECK(bad >= 20);
  CHECK_FALSE(fs::exists(t.path / "reg"));
  CHECK_FALSE(fs::exists(t.path / "cache"));
  // Each combination of attr values is a variant: past 16 per ISA the rule is refused.
  {
    std::ofstream many(rule);
    many << "optimizer many_attrs\n  state var\n  input grad\n";
    for (const char* a : {"a1", "a2", "a3", "a4", "a5"}) many << "  attr " << a << " = false\n";
    many << "  var = var - select(a1, grad, grad)\n";
  }
  CHECK_THROWS_WITH(build(t.path / "reg", t.path / "cache", {}, {rule.string()}),
                    doctest::Contains("op 'many_attrs': attrs a1, a2, a3, a4, a5 give 32 variants "
                                      "per ISA; a rule may have at most 16"));
  CHECK_FALSE(fs::exists(t.path / "cache"));
  // A rule may not take a built-in op's name.
  std::ofstream(rule) << "optimizer apply_adam\n  state var\n  input grad\n  var = var - grad\n";
  CHECK_THROWS_WITH(build(t.path / "reg", t.path / "cache", {}, {rule.string()}),
                    doctest::Contains("op 'apply_adam' is already defined"));
  CHECK_FALSE(fs::exists(t.path / "cache"));
}

}  // namespace
}  // namespace opforge::builder
