// Rules on the fly: `opforge build --user` and run/check/bench --rules build a rule file's op
// into the user registry through the compile cache, and the runtime reads that registry beside
// the op library (Registry::open's user_dir).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>

#include "cli_util.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

// Keeps the shared test cache unpruned: builds here must not evict the registry's entries.
const std::map<std::string, std::string> kNoPrune = {{"OPFORGE_CACHE_MAXSIZE", "0"}};

// var -= lr * sign(g) * sqrt(|g|) * K: K makes the kernel this test's own (cache key).
std::string rule_text(const std::string& name, double k) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "optimizer %s\n"
                "  state var\n"
                "  input grad\n"
                "  hyper lr = 0.01 \"learning rate\"\n"
                "  var = var - lr * sign(grad) * sqrt(abs(grad)) * %.17g\n",
                name.c_str(), k);
  return buf;
}

// A constant in [1, 1.001) that differs from run to run: each run compiles its own kernels
// once (the cold path), then hits the cache.
double unique_k() {
  return 1.0 + 1e-9 * static_cast<double>(std::random_device{}() % 1000000);
}

std::map<std::string, std::string> user_env(const TempDir& user) {
  std::map<std::string, std::string> env = kNoPrune;
  env["OPFORGE_USER_REGISTRY"] = user / "reg";
  return env;
}

Result build_user(const TempDir& user, const std::string& rule_file) {
  return opforge_reg(
      {"build", "--user", "--rules", rule_file, "--cache-dir", test_cache_dir(), "--json"},
      user_env(user));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// One call of the user op on n elements vs the formula in fp64.
void check_call(Registry& reg, const std::string& op, double k, size_t n) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> var(n), grad(n);
  for (size_t i = 0; i < n; ++i) var[i] = u(rng), grad[i] = u(rng);
  const std::vector<float> var0 = var;
  const std::vector<int64_t> shape = {static_cast<int64_t>(n)};
  reg.select(op).call({{"var", var.data(), registry::DType::f32, shape},
                       {"grad", grad.data(), registry::DType::f32, shape}},
                      {{"lr", 0.25}});
  for (size_t i = 0; i < n; ++i) {
    const double g = grad[i];
    const double want = var0[i] - 0.25 * ((g > 0) - (g < 0)) * std::sqrt(std::fabs(g)) * k;
    REQUIRE_MESSAGE(std::fabs(var[i] - want) <= 1e-6 + 1e-6 * std::fabs(want), "element " << i);
  }
}

TEST_CASE("build --user: the op lands in the user registry, read beside the op library") {
  TempDir user;
  const std::string rule = user / "my_sign.rule";
  std::ofstream(rule) << rule_text("my_sign", unique_k());
  const Result r = build_user(user, rule);
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const auto j = parse_json(r);
  CHECK(j["rule_ops"] == nlohmann::json::array({"my_sign"}));
  CHECK(j["registry"] == user / "reg");
  CHECK(fs::exists(user / "reg/index.json"));

  auto reg = Registry::open(test_registry_dir(), user / "reg");
  CHECK(reg->user_dir() == user / "reg");
  const auto ops = reg->ops();
  CHECK(std::count(ops.begin(), ops.end(), "my_sign") == 1);
  CHECK(std::count(ops.begin(), ops.end(), "apply_adam") == 1);  // the library's still there
  CHECK(reg->user_ops() == std::vector<std::string>{"my_sign"});
  CHECK(reg->variants("my_sign").front().reference == "rule file " + rule);

  // Without the user registry the op is unknown, and the error names where it looked.
  auto bare = Registry::open(test_registry_dir(), std::string());
  CHECK(bare->user_dir().empty());
  CHECK(contains(error_of([&] { bare->select("my_sign"); }), "unknown op 'my_sign'"));

  // `list` says which ops come from the user registry.
  const Result list = opforge_reg({"list"}, user_env(user));
  REQUIRE(list.rc == 0);
  CHECK(contains(list.out, "from the user registry " + user / "reg" + ": my_sign"));
}

TEST_CASE("the user op computes its formula, at odd sizes, in place") {
  TempDir user;
  const double k = unique_k();
  const std::string rule = user / "odd_sign.rule";
  std::ofstream(rule) << rule_text("odd_sign", k);
  REQUIRE(build_user(user, rule).rc == 0);
  auto reg = Registry::open(test_registry_dir(), user / "reg");
  for (size_t n : {1, 5, 17, 1000, 65543}) {
    CAPTURE(n);
    check_call(*reg, "odd_sign", k, n);
  }
}

TEST_CASE("a rule built after the registry was opened is found without reopening") {
  TempDir user;
  auto reg = Registry::open(test_registry_dir(), user / "reg");  // no user registry yet
  CHECK(reg->user_ops().empty());
  const double k = unique_k();
  const std::string rule = user / "late_sign.rule";
  std::ofstream(rule) << rule_text("late_sign", k);
  REQUIRE(build_user(user, rule).rc == 0);
  check_call(*reg, "late_sign", k, 17);
  // A second rule into the same user registry keeps the first.
  std::ofstream(user / "later_sign.rule") << rule_text("later_sign", k);
  REQUIRE(build_user(user, user / "later_sign.rule").rc == 0);
  check_call(*reg, "later_sign", k, 5);
  check_call(*reg, "late_sign", k, 5);
  CHECK(reg->user_ops() == std::vector<std::string>{"late_sign", "later_sign"});
}

TEST_CASE("a rule rebuilt under the same name: its new kernels once ops() has re-read it") {
  TempDir user;
  auto reg = Registry::open(test_registry_dir(), user / "reg");
  const std::string rule = user / "edited_sign.rule";
  const double k1 = unique_k(), k2 = 2 * unique_k();
  std::ofstream(rule) << rule_text("edited_sign", k1);
  REQUIRE(build_user(user, rule).rc == 0);
  check_call(*reg, "edited_sign", k1, 17);
  std::ofstream(rule, std::ios::trunc) << rule_text("edited_sign", k2);
  REQUIRE(build_user(user, rule).rc == 0);
  reg->ops();  // re-reads the user registry (opforge.rule does this after every build)
  check_call(*reg, "edited_sign", k2, 17);
}

TEST_CASE("a rule named like an op of the library is refused, and nothing is written") {
  TempDir user;
  // sign_sqrt_momentum: a rule op of the test registry (its generators/rules file).
  for (const std::string& name : {std::string("sign_sqrt_momentum"), std::string("apply_adam")}) {
    CAPTURE(name);
    const std::string rule = user / (name + ".rule");
    std::ofstream(rule) << rule_text(name, 1.0);
    const Result r = build_user(user, rule);
    CHECK(r.rc != 0);
    CHECK(contains(r.err, rule + ": op '" + name + "' is already"));
    CHECK(empty_or_absent(user / "reg"));
  }
}

TEST_CASE("a bad user registry never hides the op library, and errors say why it is unread") {
  TempDir user;
  const std::string rule = user / "bad_reg_sign.rule";
  std::ofstream(rule) << rule_text("bad_reg_sign", 1.0);
  REQUIRE(build_user(user, rule).rc == 0);
  // Damaged: its self-digest no longer matches.
  std::string index = slurp(user / "reg/index.json");
  index.replace(index.find("bad_reg_sign"), 12, "bad_reg_sigh");
  std::ofstream(user / "reg/index.json", std::ios::trunc) << index;
  auto reg = Registry::open(test_registry_dir(), user / "reg");
  CHECK(reg->select("apply_gradient_descent").descriptor().op == "apply_gradient_descent");
  const std::string err = error_of([&] { reg->select("bad_reg_sign"); });
  CHECK(contains(err, "unknown op 'bad_reg_sign'"));
  CHECK(contains(err, "the user registry is not read"));
  CHECK(contains(err, "sha256"));
}

TEST_CASE("run/check/bench --rules build the missing op through the cache, then use it") {
  TempDir user;
  const double k = unique_k();
  const std::string rule = user / "fly_sign.rule";
  std::ofstream(rule) << rule_text("fly_sign", k);
  const auto env = user_env(user);
  // check: cold, so it compiles and says so on stderr; the JSON report stays on stdout.
  const Result first = opforge_reg({"check", "fly_sign", "--rules", rule, "--n", "65543",
                                    "--cache-dir", test_cache_dir(), "--json"},
                                   env);
  REQUIRE_MESSAGE(first.rc == 0, first.all());
  CHECK(contains(first.err, "compiled"));
  CHECK(parse_json(first)["ok"] == true);
  // Again: every kernel from the cache, nothing compiled, nothing said.
  const Result again = opforge_reg({"check", "fly_sign", "--rules", rule, "--n", "17",
                                    "--cache-dir", test_cache_dir(), "--json"},
                                   env);
  REQUIRE_MESSAGE(again.rc == 0, again.all());
  CHECK_FALSE(contains(again.err, "compiled"));
  // Without --rules, check finds the declaration through the descriptor's rule file.
  const Result bare = opforge_reg({"check", "fly_sign", "--n", "5", "--json"}, env);
  REQUIRE_MESSAGE(bare.rc == 0, bare.all());
  // run writes the updated state.
  const std::vector<float> var = {0.5f, -1.f, 2.f}, grad = {4.f, -0.25f, 0.f};
  npy::write_atomic(user / "var.npy", npy::from_f32(var, {3}));
  npy::write_atomic(user / "grad.npy", npy::from_f32(grad, {3}));
  const Result run =
      opforge_reg({"run", "fly_sign", "--rules", rule, "--in", "var=" + user / "var.npy", "--in",
                   "grad=" + user / "grad.npy", "--scalar", "lr=0.5", "--out", user / "out",
                   "--cache-dir", test_cache_dir()},
                  env);
  REQUIRE_MESSAGE(run.rc == 0, run.all());
  const std::vector<float> got = npy::to_f32(npy::read(user / "out/var.npy"), "var");
  REQUIRE(got.size() == 3);
  CHECK(got[0] == doctest::Approx(0.5 - 0.5 * 2.0 * k).epsilon(1e-6));
  CHECK(got[1] == doctest::Approx(-1.0 + 0.5 * 0.5 * k).epsilon(1e-6));
  CHECK(got[2] == 2.f);
  const Result bench = opforge_reg({"bench", "fly_sign", "--rules", rule, "--n", "1000", "--reps",
                                    "3", "--cache-dir", test_cache_dir()},
                                   env);
  REQUIRE_MESSAGE(bench.rc == 0, bench.all());
  CHECK(contains(bench.out, "fly_sign__f32__"));
}

TEST_CASE("build --user: usage errors") {
  const Result no_rules = opforge_reg({"build", "--user"});
  CHECK(no_rules.rc == 2);
  CHECK(contains(no_rules.err, "--rules"));
  const Result only = opforge_reg({"build", "--user", "--rules", "x.rule", "--only", "x"});
  CHECK(only.rc == 2);
  CHECK(contains(only.err, "drop --only"));
}

}  // namespace
}  // namespace opforge::testing
