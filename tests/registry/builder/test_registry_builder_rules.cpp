// Rule files through the same builder, cache and runtime as the C++ ops: the example rule
// against an fp64 reference, a rule version of TF's ApplyAdam against the C++ apply_adam, cache
// hits and misses on rule edits, and a bad rule leaving registry and cache untouched.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>

#include "builder_test_util.h"
#include "dsl/rules/diagnostics.h"
#include "dsl/rules/rule_decl.h"
#include "dsl/rules/rule_parser.h"
#include "generators/auto_schedules.h"
#include "generators/isa.h"
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

const fs::path kCorpus = fs::path(OPFORGE_SOURCE_DIR) / "tests" / "dsl" / "rules" / "corpus";

// A rule's loss_scaling line: grad_scaling()'s four variants, each against the formula
// written here in fp64: gradients times inv_scale (unscale), the step skipped bit for bit and
// found_inf set on a non-finite gradient or a found_inf already set (skip_if_nonfinite).
TEST_CASE("rules: a loss_scaling rule unscales, skips on inf and sets found_inf") {
  TempDir t;
  build(t.path / "reg", t.path / "cache", {"loss_scaled_momentum"},
        {(kCorpus / "good_loss_scaling.rule").string()});
  auto reg = Registry::open((t.path / "reg").string());
  CHECK(reg->variants("loss_scaled_momentum").size() == 8);  // 4 per ISA
  const int64_t n = 1001;
  const double lr = 0.1f, beta = 0.5f, inv_scale = 0.25f;
  std::mt19937 rng(17);
  struct Case {
    bool unscale, skip;
    float bad_grad;  // put at element 5 (0: none)
    float found_on_entry;
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (const Case& c : {Case{false, false, 0, 0}, Case{true, false, 0, 0}, Case{true, true, 0, 0},
                        Case{true, true, inf, 0}, Case{false, true, std::nanf(""), 0},
                        Case{false, true, 0, 1}, Case{true, false, -inf, 0}}) {
    CAPTURE(c.unscale);
    CAPTURE(c.skip);
    CAPTURE(c.bad_grad);
    CAPTURE(c.found_on_entry);
    std::vector<float> var = random_floats(rng, n, -1, 1), m = random_floats(rng, n, -1, 1);
    std::vector<float> grad = random_floats(rng, n, -4, 4);
    if (c.bad_grad != 0) grad[5] = c.bad_grad;
    const std::vector<float> var0 = var, m0 = m;
    std::vector<float> found = {c.found_on_entry};
    Kernel& k = reg->select("loss_scaled_momentum",
                            {{"unscale", c.unscale ? "true" : "false"},
                             {"skip_if_nonfinite", c.skip ? "true" : "false"}},
                            "avx2");
    std::vector<Tensor> tensors = {{"var", var.data(), registry::DType::f32, {n}},
                                   {"m", m.data(), registry::DType::f32, {n}},
                                   {"grad", grad.data(), registry::DType::f32, {n}}};
    std::map<std::string, double> scalars = {{"lr", lr}, {"beta", beta}};
    const bool has_flag = c.unscale || c.skip;
    bool has_inv = false, has_found = false;
    for (const auto& in : k.descriptor().inputs) {
      has_inv = has_inv || in.name == "inv_scale";
      has_found = has_found || (in.name == "found_inf" && in.role == registry::Input::Role::result);
    }
    CHECK(has_inv == c.unscale);
    CHECK(has_found == has_flag);
    if (c.unscale) scalars["inv_scale"] = inv_scale;
    if (has_flag) tensors.push_back({"found_inf", found.data(), registry::DType::f32, {1}});
    k.call(tensors, scalars);
    const bool nonfinite = c.bad_grad != 0 || c.found_on_entry != 0;
    if (has_flag) CHECK(found[0] == (nonfinite ? 1.f : 0.f));
    for (int64_t i = 0; i < n; ++i) {
      if (c.skip && nonfinite) {  // the step is skipped: every state bit for bit
        CHECK(std::memcmp(&var[i], &var0[i], 4) == 0);
        CHECK(std::memcmp(&m[i], &m0[i], 4) == 0);
        continue;
      }
      const double g = double(grad[i]) * (c.unscale ? inv_scale : 1.0);
      const double m_new = beta * m0[i] + g;
      const double var_new = var0[i] - lr * m0[i];  // simultaneous: the old m
      CHECK(std::fabs(var[i] - var_new) <= 1e-7 + 1e-6 * std::fabs(var_new));
      if (std::isfinite(g)) {
        CHECK(std::fabs(m[i] - m_new) <= 1e-7 + 1e-6 * std::fabs(m_new));
      } else {  // not skipped: the non-finite gradient goes through
        CHECK_FALSE(std::isfinite(m[i]));
      }
    }
  }
}

// A rule's sparse line: sparse_<name> updates the rows indices names, in order, so a
// duplicate index applies twice (the second reading the first's result); other rows keep
// their bits. Against a loop written here in fp64, for int32 and int64 indices.
TEST_CASE("rules: a sparse rule's sparse_ op applies duplicate indices in order") {
  TempDir t;
  build(t.path / "reg", t.path / "cache", {"sparse_demo", "sparse_sparse_demo"},
        {(kCorpus / "good_sparse.rule").string()});
  auto reg = Registry::open((t.path / "reg").string());
  CHECK(reg->variants("sparse_demo").size() == 2);         // the dense op, one per ISA
  CHECK(reg->variants("sparse_sparse_demo").size() == 4);  // Tindices int32, int64
  const int64_t rows = 9, cols = 3;
  const std::vector<int64_t> idx = {2, 5, 2, 0, 8, 2};
  const int64_t count = static_cast<int64_t>(idx.size());
  const double lr = 0.5f;
  std::mt19937 rng(23);
  for (const std::string tindices : {"int32", "int64"}) {
    CAPTURE(tindices);
    Kernel& k = reg->select("sparse_sparse_demo", {{"Tindices", tindices}}, "avx2");
    CHECK_FALSE(k.descriptor().shape.elementwise);
    std::vector<float> var = random_floats(rng, rows * cols, -1, 1);
    std::vector<float> acc = random_floats(rng, rows * cols, 0.1f, 1);
    std::vector<float> grad = random_floats(rng, count * cols, -1, 1);
    std::vector<int32_t> idx32(idx.begin(), idx.end());
    std::vector<int64_t> idx64 = idx;
    const bool wide = tindices == "int64";
    std::vector<double> want_var(var.begin(), var.end()), want_acc(acc.begin(), acc.end());
    for (int64_t k2 = 0; k2 < count; ++k2) {
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t e = idx[k2] * cols + c;
        const double g = grad[k2 * cols + c], a = want_acc[e];
        want_acc[e] = a + g * g;
        want_var[e] = want_var[e] - lr * g / std::sqrt(a + g * g);
      }
    }
    const std::vector<float> var0 = var;
    k.call({{"var", var.data(), registry::DType::f32, {rows, cols}},
            {"acc", acc.data(), registry::DType::f32, {rows, cols}},
            {"grad", grad.data(), registry::DType::f32, {count, cols}},
            {"indices",
             wide ? static_cast<void*>(idx64.data()) : idx32.data(),
             wide ? registry::DType::i64 : registry::DType::i32,
             {count}}},
           {{"lr", lr}});
    for (int64_t e = 0; e < rows * cols; ++e) {
      CAPTURE(e);
      const int64_t row = e / cols;
      if (std::find(idx.begin(), idx.end(), row) == idx.end()) {
        CHECK(std::memcmp(&var[e], &var0[e], 4) == 0);
        continue;
      }
      CHECK(std::fabs(acc[e] - want_acc[e]) <= 1e-7 + 1e-6 * std::fabs(want_acc[e]));
      CHECK(std::fabs(var[e] - want_var[e]) <= 1e-7 + 1e-6 * std::fabs(want_var[e]));
    }
  }
}

// The example rule's sparse form is fp32 only and has no loss scaling (the sparse form has no
// whole-tensor reduction to find a non-finite gradient with), whatever the dense op has.
TEST_CASE("rules: the example rule's derived forms: attrs, storages and twins") {
  std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
  std::map<std::string, std::set<std::string>> attrs;  // op -> attr names its rows set
  std::map<std::string, int> rows, twins;
  for (const auto& row : table_with_rules({(kRules / "sign_sqrt_momentum.rule").string()}, keep)) {
    const std::string& op = row.decl->name();
    if (op.find("sign_sqrt_momentum") == std::string::npos) continue;
    ++rows[op];
    for (const auto& [k, v] : row.attrs) attrs[op].insert(k);
    twins[op] += static_cast<int>(row.autoschedule.size());
    CHECK(row.autoschedule_at_build == !row.autoschedule.empty());
    CHECK(row.storage.is_f32());
  }
  CHECK(rows["sign_sqrt_momentum"] == 8);
  CHECK(attrs["sign_sqrt_momentum"] ==
        std::set<std::string>{"nesterov", "unscale", "skip_if_nonfinite"});
  CHECK(twins["sign_sqrt_momentum"] == 8);  // every variant, AVX-512 only
  CHECK(rows["sparse_sign_sqrt_momentum"] == 4);
  CHECK(attrs["sparse_sign_sqrt_momentum"] == std::set<std::string>{"nesterov", "Tindices"});
  CHECK(twins["sparse_sign_sqrt_momentum"] == 0);
}

// A rule's autoschedule line: an Adams2019 twin per variant of the listed ISAs, scheduled in
// this process when compiled, safe in place (checked at odd sizes, aliased, against fp64),
// priority 0 (select keeps the hand schedule), keyed by the autoscheduler and cached.
TEST_CASE("rules: an autoschedule line gives each variant an in-process Adams2019 twin") {
  TempDir t;
  const fs::path rule = t.path / "twin.rule";
  std::ofstream(rule) << "optimizer twin_rule\n  state var, m\n  input grad\n"
                      << "  hyper lr = 0.1\n  storage f32, bf16m\n  autoschedule avx2\n"
                      << "  m = 0.5 * m + grad\n  var = var - lr * sqrt(abs(m))\n";
  const BuildReport first = build(t.path / "reg", t.path / "cache", {"twin_rule"}, {rule.string()});
  auto reg = Registry::open((t.path / "reg").string());
  // avx512 and avx2 for f32 and bf16m, and the two avx2 twins.
  CHECK(reg->variants("twin_rule").size() == 6);
  std::map<std::string, std::string> twin_of;  // storage -> twin id
  for (const char* storage : {"f32", "bf16m"}) {
    CAPTURE(storage);
    const std::string hand =
        reg->select("twin_rule", {{"storage", storage}}, "avx2").descriptor().variant;
    const std::string twin = hand + "__auto";
    twin_of[storage] = twin;
    const registry::Descriptor d = reg->load(twin).descriptor();
    CHECK(d.target.isa == "avx2");
    CHECK(d.target.priority == 0);
    CHECK(d.schedule.recipe == "adams2019");
    CHECK(d.schedule.summary.find("build time") != std::string::npos);
    std::string twin_key, hand_key;
    for (const auto& v : first.variants) {
      if (v.variant == twin) twin_key = v.key;
      if (v.variant == hand) hand_key = v.key;
    }
    CHECK_FALSE(twin_key.empty());
    CHECK(twin_key != hand_key);
  }
  std::mt19937 rng(29);
  for (const int64_t n : {1, 5, 17, 1000, 65543}) {
    CAPTURE(n);
    std::vector<float> var = random_floats(rng, n, -1, 1), m = random_floats(rng, n, -1, 1);
    std::vector<float> grad = random_floats(rng, n, -1, 1);
    const std::vector<float> var0 = var, m0 = m;
    reg->load(twin_of["f32"])
        .call({{"var", var.data(), registry::DType::f32, {n}},
               {"m", m.data(), registry::DType::f32, {n}},
               {"grad", grad.data(), registry::DType::f32, {n}}},
              {{"lr", 0.1f}});
    // bf16m: bf16 gradients and model copy, fp32 master and m.
    std::vector<float> var_b = var0, m_b = m0;
    std::vector<uint16_t> grad_b(n), model(n);
    for (int64_t i = 0; i < n; ++i) grad_b[i] = Halide::bfloat16_t(grad[i]).to_bits();
    reg->load(twin_of["bf16m"])
        .call({{"var", var_b.data(), registry::DType::f32, {n}},
               {"m", m_b.data(), registry::DType::f32, {n}},
               {"model", model.data(), registry::DType::bf16, {n}},
               {"grad", grad_b.data(), registry::DType::bf16, {n}}},
              {{"lr", 0.1f}});
    for (int64_t i = 0; i < n; ++i) {
      const double var_new = var0[i] - double(0.1f) * std::sqrt(std::fabs(double(m0[i])));
      const double m_new = 0.5 * m0[i] + grad[i];
      const double gb = float(Halide::bfloat16_t::make_from_bits(grad_b[i]));
      const double m_new_b = 0.5 * m0[i] + gb;
      CHECK(std::fabs(m[i] - m_new) <= 1e-7 + 1e-6 * std::fabs(m_new));
      CHECK(std::fabs(var[i] - var_new) <= 1e-7 + 1e-6 * std::fabs(var_new));
      CHECK(std::fabs(m_b[i] - m_new_b) <= 1e-7 + 1e-6 * std::fabs(m_new_b));
      CHECK(std::fabs(var_b[i] - var_new) <= 1e-7 + 1e-6 * std::fabs(var_new));
      CHECK(model[i] == Halide::bfloat16_t(var_b[i]).to_bits());  // the master, rounded
    }
  }
  // Rebuilt unchanged: every variant a hit, the twins too (no autoscheduler run).
  const BuildReport again = build(t.path / "reg", t.path / "cache", {"twin_rule"}, {rule.string()});
  for (const auto& v : again.variants) {
    CAPTURE(v.variant);
    CHECK(v.hit);
  }
}

// Adams2019 missing: the rule's autoschedule line is the error, with its caret.
TEST_CASE("rules: autoschedule without the Adams2019 plugin is an error at the line") {
  TempDir t;
  const fs::path rule = t.path / "twin.rule";
  std::ofstream(rule) << "optimizer twin_rule\n  state var\n  input grad\n"
                      << "  autoschedule\n  var = var - grad\n";
  const dsl::rules::RuleOp op = dsl::rules::load_rule_file(rule.string());
  CHECK(op.autoschedule_isas == dsl::rules::isa_names());  // bare: every ISA
  CHECK_NOTHROW(check_autoscheduler(op, generators::autoschedule_settings().plugin));
  try {
    check_autoscheduler(op, "/nonexistent/libautoschedule_adams2019.so");
    FAIL("no error");
  } catch (const dsl::rules::RuleError& e) {
    const std::string what = e.what();
    CHECK(e.line == 4);
    CHECK(e.col == 3);
    CHECK(what.rfind((rule.string() + ":4:3: error: 'autoschedule' runs Halide's Adams2019"), 0) ==
          0);
    CHECK(what.find("/nonexistent/libautoschedule_adams2019.so is not readable") !=
          std::string::npos);
    CHECK(what.find("\n  autoschedule\n  ^") != std::string::npos);
  }
}

// The ISAs an autoschedule line may name (the parser's list) are the builder's ISAs, and a
// rule is built for exactly them.
TEST_CASE("rules: the parser's ISA names are the ISAs rules are built for") {
  std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
  for (const auto& name : dsl::rules::isa_names()) CHECK_NOTHROW(generators::isa(name));
  for (const auto& row : table_with_rules({(kCorpus / "good_sgd.rule").string()}, keep)) {
    if (row.decl->name() == "sgd") CHECK(row.isas == dsl::rules::isa_names());
  }
}

// The parser's list of storages (it does not link the DSL) is exactly what the DSL reads.
TEST_CASE("rules: every storage a rule may list is a dsl::Storage tag") {
  for (const std::string& tag : dsl::rules::storage_tags()) {
    CAPTURE(tag);
    CHECK(dsl::Storage::from_tag(tag).tag() == tag);
  }
  CHECK(dsl::rules::storage_tags().size() == 17);
}

// A rule's `quantizable` line and an 8-bit storage: the q8s variant keeps m as codes plus an
// absmax per 256 elements, and from the same starting values (the fp32 variant's states set to
// the dequantized ones) gives the fp32 variant's var, and new states within half a code step
// of the fp32 variant's (the map's gaps are at most 1/127 of the absmax apart... plus rounding).
TEST_CASE("rules: a quantizable line gives 8-bit states that follow the fp32 variant") {
  TempDir t;
  const fs::path rule = t.path / "q8.rule";
  std::ofstream(rule) << "optimizer q8_rule\n  state var, m\n  input grad\n"
                      << "  hyper lr = 0.01\n  storage f32, q8s\n  quantizable m signed\n"
                      << "  m = 0.9 * m + sign(grad) * sqrt(abs(grad))\n"
                      << "  var = var - lr * m\n";
  build(t.path / "reg", t.path / "cache", {"q8_rule"}, {rule.string()});
  auto reg = Registry::open((t.path / "reg").string());
  Kernel& q8 = reg->select("q8_rule", {{"storage", "q8s"}}, "avx2");
  Kernel& f32 = reg->select("q8_rule", {}, "avx2");
  const registry::Descriptor& d = q8.descriptor();
  CHECK(d.shape.block == 256);
  CHECK(d.find_input("m")->dtype == registry::DType::u8);
  CHECK(d.find_input("m")->quant_map == "dynamic_signed");
  CHECK(d.find_input("m_absmax")->role == registry::Input::Role::block_scale);
  const int64_t n = 1000, blocks = 4;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> var(n), grad(n), absmax(blocks, 0.5f);
  std::vector<uint8_t> codes(n);
  for (int64_t i = 0; i < n; ++i) var[i] = u(rng), grad[i] = u(rng), codes[i] = rng() % 256;
  // The fp32 variant starts from the decoded states: the map's values, as written in SCHEMA.md.
  std::vector<double> map;
  for (int i = 0; i < 7; ++i) {
    for (int j = 0; j < (1 << i); ++j) {
      const double x = std::pow(10.0, i - 6) * (0.1 + 0.9 * (j + 0.5) / (1 << i));
      map.push_back(static_cast<float>(x));
      map.push_back(static_cast<float>(-x));
    }
  }
  map.push_back(0);
  map.push_back(1);
  std::sort(map.begin(), map.end());
  std::vector<float> var32 = var, m32(n);
  for (int64_t i = 0; i < n; ++i) m32[i] = static_cast<float>(map[codes[i]] * absmax[i / 256]);
  const std::map<std::string, double> s = {{"lr", 0.01}};
  q8.call({{"var", var.data(), registry::DType::f32, {n}},
           {"m", codes.data(), registry::DType::u8, {n}},
           {"m_absmax", absmax.data(), registry::DType::f32, {blocks}},
           {"grad", grad.data(), registry::DType::f32, {n}}},
          s);
  f32.call({{"var", var32.data(), registry::DType::f32, {n}},
            {"m", m32.data(), registry::DType::f32, {n}},
            {"grad", grad.data(), registry::DType::f32, {n}}},
           s);
  for (int64_t i = 0; i < n; ++i) {
    CAPTURE(i);
    REQUIRE(std::fabs(var[i] - var32[i]) <= 1e-6f * std::fabs(var32[i]) + 1e-7f);
    // Block b's absmax is max |new m| over the block.
    const double a = absmax[i / 256];
    REQUIRE(a >= std::fabs(m32[i]) * (1 - 1e-6));
    // Dynamic map: neighbours near y are at most 0.9 / 64 of the absmax apart (the top decade).
    REQUIRE(std::fabs(map[codes[i]] * a - m32[i]) <= (0.9 / 128 + 1e-6) * a);
  }
}

// A rule with FP8 gradients: the e4m3g variant reads the gradient as E4M3 bits times
// grad_scale_inv and gives the fp32 variant's result on those values (halves up to 4 are
// exact in E4M3: 0x38 is 1.0, and S.EEEE.MMM = (-1)^S 2^(E-7) (1 + M/8)).
TEST_CASE("rules: storage e4m3g reads FP8 gradients scaled by grad_scale_inv") {
  TempDir t;
  const fs::path rule = t.path / "f8.rule";
  std::ofstream(rule) << "optimizer f8_rule\n  state var, m\n  input grad\n"
                      << "  hyper lr = 0.01\n  storage f32, e4m3g\n"
                      << "  m = 0.9 * m + sign(grad) * sqrt(abs(grad))\n"
                      << "  var = var - lr * m\n";
  build(t.path / "reg", t.path / "cache", {"f8_rule"}, {rule.string()});
  auto reg = Registry::open((t.path / "reg").string());
  Kernel& f8 = reg->select("f8_rule", {{"storage", "e4m3g"}}, "avx2");
  Kernel& f32 = reg->select("f8_rule", {}, "avx2");
  CHECK(f8.descriptor().find_input("grad")->dtype == registry::DType::f8e4m3);
  CHECK(f8.descriptor().find_input("grad_scale_inv")->role == registry::Input::Role::scalar);
  const int64_t n = 1000;
  std::mt19937 rng(4);
  std::vector<float> var(n), m(n), grad32(n);
  std::vector<uint8_t> bits(n);
  for (int64_t i = 0; i < n; ++i) {
    const int k = static_cast<int>(rng() % 17) - 8;  // k/2 in [-4, 4]
    var[i] = static_cast<float>(rng() % 1000) / 1000.f;
    m[i] = static_cast<float>(rng() % 1000) / 2000.f;
    // E4M3 bits of k/2, written from the format: exponent e, mantissa M with
    // |k/2| = 2^(e-7) (1 + M/8).
    const int a = std::abs(k);
    uint8_t b = 0;
    if (a) {
      int e = 0;
      while ((a >> (e + 1)) > 0) ++e;  // |k|/2 = 2^(e-1) * (a / 2^e)
      const int mant = (a * 8 >> e) - 8;
      b = static_cast<uint8_t>(((e - 1 + 7) << 3) | mant);
    }
    bits[i] = static_cast<uint8_t>((k < 0 ? 0x80 : 0) | b);
    grad32[i] = 0.25f * 0.5f * static_cast<float>(k);  // times grad_scale_inv
  }
  std::vector<float> var32 = var, m32 = m;
  f8.call({{"var", var.data(), registry::DType::f32, {n}},
           {"m", m.data(), registry::DType::f32, {n}},
           {"grad", bits.data(), registry::DType::f8e4m3, {n}}},
          {{"lr", 0.01}, {"grad_scale_inv", 0.25}});
  f32.call({{"var", var32.data(), registry::DType::f32, {n}},
            {"m", m32.data(), registry::DType::f32, {n}},
            {"grad", grad32.data(), registry::DType::f32, {n}}},
           {{"lr", 0.01}});
  CHECK(var == var32);  // the same fp32 values, the same arithmetic
  CHECK(m == m32);
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
  // Loss scaling's attrs and autoschedule twins count toward the limit, named as such.
  {
    std::ofstream many(rule);
    many << "optimizer many_attrs\n  state var\n  input grad\n  loss_scaling\n";
    for (const char* a : {"a1", "a2", "a3"}) many << "  attr " << a << " = false\n";
    many << "  var = var - select(a1, grad, grad)\n";
  }
  CHECK_THROWS_WITH(build(t.path / "reg", t.path / "cache", {}, {rule.string()}),
                    doctest::Contains("op 'many_attrs': attrs a1, a2, a3, unscale "
                                      "(loss_scaling), skip_if_nonfinite (loss_scaling) give 32 "
                                      "variants per ISA; a rule may have at most 16"));
  {
    std::ofstream many(rule);
    many << "optimizer many_attrs\n  state var\n  input grad\n  storage f32, bf16m\n"
         << "  autoschedule avx2\n";
    for (const char* a : {"a1", "a2", "a3"}) many << "  attr " << a << " = false\n";
    many << "  var = var - select(a1, grad, grad)\n";
  }
  CHECK_THROWS_WITH(build(t.path / "reg", t.path / "cache", {}, {rule.string()}),
                    doctest::Contains("op 'many_attrs': attrs a1, a2, a3 and 2 storages and an "
                                      "autoschedule twin of each give 32 variants per ISA"));
  CHECK_FALSE(fs::exists(t.path / "cache"));
  // sparse_<name> may not take a built-in op's name (sparse_adam) or another rule's, and says
  // so at the sparse line.
  std::ofstream(rule) << "optimizer adam\n  state var\n  input grad\n  sparse\n"
                      << "  var = var - grad\n";
  try {
    build(t.path / "reg", t.path / "cache", {}, {rule.string()});
    FAIL("sparse_adam built twice");
  } catch (const dsl::rules::RuleError& e) {
    CHECK(e.line == 4);
    CHECK(e.col == 3);
    CHECK(e.message ==
          "op 'sparse_adam', the sparse form this line derives, is already defined "
          "(built-in or another rule)");
  }
  const fs::path other = t.path / "a.rule";  // sorts first: its op is defined first
  std::ofstream(other) << "optimizer sparse_mine\n  state var\n  input grad\n  var = var\n";
  std::ofstream(rule) << "optimizer mine\n  state var\n  input grad\n  sparse\n  var = var\n";
  CHECK_THROWS_WITH_AS(build(t.path / "reg", t.path / "cache", {}, {t.path.string()}),
                       doctest::Contains("op 'sparse_mine', the sparse form this line derives"),
                       dsl::rules::RuleError);
  fs::remove(other);
  CHECK_FALSE(fs::exists(t.path / "cache"));
  // A rule may not take a built-in op's name.
  std::ofstream(rule) << "optimizer apply_adam\n  state var\n  input grad\n  var = var - grad\n";
  CHECK_THROWS_WITH(build(t.path / "reg", t.path / "cache", {}, {rule.string()}),
                    doctest::Contains("op 'apply_adam' is already defined"));
  CHECK_FALSE(fs::exists(t.path / "cache"));
}

}  // namespace
}  // namespace opforge::builder
