// opforge check: a registered kernel against the fp64 golden of its declaration, for the
// built-in ops and for every rule file the test registry is built with.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_util.h"
#include "host_isa.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

TEST_CASE("check compares a kernel with its fp64 golden and fails past the tolerance") {
  const Result ok = opforge_reg({"check", "apply_adam", "--n", "20000", "--json"});
  REQUIRE_MESSAGE(ok.rc == 0, ok.all());
  const json j = json::parse(ok.out);
  CHECK(j["ok"] == true);
  for (const char* s : {"var", "m", "v"}) {
    CHECK(j["states"][s]["elements"] == 20000);
    CHECK(j["states"][s]["max_abs_error"].get<double>() < 1e-5);
    CHECK(j["states"][s]["exceeding"] == 0);
  }
  // Sparse and int64 scalar ops go through the same golden.
  CHECK(opforge_reg({"check", "sparse_apply_momentum", "--rows", "50", "--indices", "80"}).rc == 0);
  CHECK(opforge_reg({"check", "apply_adagrad_da"}).rc == 0);
  // Centered RMSProp on generic data with a tiny epsilon divides by ms - mg^2 + eps close to
  // 0: the bound widens by 8x a plain fp32 evaluation's spread there (its distance from fp64
  // and its one-ulp input sensitivity; the descriptor's tolerance.conditioning), so the kernel
  // passes; the next case shows that the bound still catches a wrong constant.
  const Result cond =
      opforge_reg({"check", "apply_centered_rms_prop", "--scalar", "epsilon=1e-10", "--json"});
  CHECK_MESSAGE(cond.rc == 0, cond.all());
  if (cond.rc == 0) CHECK(json::parse(cond.out)["conditioning"] == 8);
  // 8-bit states: the fp32 parameter gets the same allowance. With random codes some second
  // moments decode near zero, the step is several times var, and the fp32 bias correction
  // 1 - beta2^t at t = 10 left var 1.8e-5 off in 2 of these 65536 elements (failed before
  // the allowance; the states themselves are judged per block).
  const Result q8 = opforge_reg(
      {"check", "apply_adamw", "--variant",
       "apply_adamw__amsgrad_0__maximize_0__convention_torch__epsilon_mode_torch__unscale_1__"
       "skip_if_nonfinite_1__bf16mq8s__avx2",
       "--n", "65536", "--json"});
  CHECK_MESSAGE(q8.rc == 0, q8.all());
  if (q8.rc == 0) CHECK(json::parse(q8.out)["conditioning"] == 8);
  const Result unknown = opforge_reg({"check", "apply_adma"});
  CHECK(unknown.rc == 2);
  CHECK(contains(unknown.err, "did you mean 'apply_adam'"));
}

TEST_CASE("check --scalars random: cancelling updates pass, whatever one fp32 evaluation's luck") {
  // Seed 1 draws beta = 3.40487432 for AddSign and PowerSign (m*beta + g*(1 - beta) cancels),
  // rho = 2.59 for RMSProp and lr_power = -3.68 for FTRL: with the fp32 evaluation's distance
  // alone each failed at 1 to 19 of 100000 elements (a fused multiply-add lands some of the
  // terms' ulps away where the plain evaluation happened to land near fp64). Seed 4 draws
  // step 4.1 and beta2 0.85 for AdamW, whose fp32 master var then cancels to near 0 at 14
  // elements: the bf16-master variant had no allowance for it at all.
  const std::vector<std::vector<std::string>> failed_before = {
      {"apply_add_sign", "--seed", "1"},
      {"apply_power_sign", "--seed", "1"},
      {"apply_rms_prop", "--attr", "epsilon_mode=torch", "--seed", "1"},
      {"apply_ftrl", "--attr", "multiply_linear_by_lr=true", "--seed", "1"},
      {"apply_ftrl", "--attr", "multiply_linear_by_lr=false", "--seed", "1"},
      {"apply_adamw", "--attr", "convention=torch", "--attr", "epsilon_mode=torch", "--attr",
       "storage=bf16m", "--seed", "4"}};
  for (const auto& op : failed_before) {
    std::vector<std::string> args = {"check"};
    args.insert(args.end(), op.begin(), op.end());
    for (const char* a : {"--scalars", "random", "--json"}) args.push_back(a);
    const Result r = opforge_reg(args);
    CHECK_MESSAGE(r.rc == 0, op.front() << ": " << r.all());
    if (r.rc == 0 && op.front() == "apply_add_sign")  // the cancelling draw
      CHECK(json::parse(r.out)["scalars"]["beta"].get<double>() > 3);
  }
}

TEST_CASE("check fails a kernel whose declaration differs by one constant perturbed by 1e-4") {
  // The golden from adam_rule with beta1 * m scaled by 1.0001, the kernel from the shipped rule.
  TempDir dir;
  std::string text = slurp(fs::path(OPFORGE_SOURCE_DIR) / "generators/rules/adam_rule.rule");
  const std::string from = "let m_t   = beta1 * m", to = "let m_t   = 1.0001 * beta1 * m";
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), to);
  std::ofstream(dir / "adam_rule.rule") << text;
  const Result r = opforge_reg({"check", "adam_rule", "--rules", dir / "adam_rule.rule", "--json"});
  CHECK(r.rc == 1);
  const json j = json::parse(r.out);
  CHECK(j["ok"] == false);
  CHECK(j["states"]["m"]["exceeding"].get<int64_t>() > 90000);  // of 1e5
  // The shipped rule itself passes.
  CHECK(opforge_reg({"check", "adam_rule"}).rc == 0);
}

TEST_CASE("check --all: every variant this CPU runs, one line each, a summary, green") {
  const Result r = opforge_reg({"check", "--all", "--n", "1001", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json j = json::parse(r.out);
  CHECK(j["failed"] == 0);
  CHECK(j["passed"].get<int>() > 150);
  std::set<std::string> reasons, ops;
  for (const auto& v : j["variants"]) {
    if (v["status"] == "skipped") reasons.insert(v["detail"].get<std::string>().substr(0, 8));
    if (v["status"] == "ok") ops.insert(v["variant"].get<std::string>().substr(0, 10));
  }
  CHECK(reasons.count("bandwidt"));
  CHECK(ops.count("apply_ftrl"));  // FTRL with its typical scalars
  CHECK(ops.count("adam_rule_"));  // a library rule op without --rules
  CHECK(ops.count("multi_tens"));  // LAMB and LARS over a random model's chunk table
  CHECK(ops.count("layer_norm"));  // NN ops against their fp64 references
  CHECK(ops.count("scaled_dot"));
  const Result text = opforge_reg({"check", "--all", "--isa", "avx2", "--n", "17"});
  CHECK_MESSAGE(text.rc == 0, text.all());
  CHECK(contains(text.out, " passed, 0 failed, "));
  const Result both = opforge_reg({"check", "apply_adam", "--all"});
  CHECK(both.rc == 2);
  CHECK(contains(both.err, "--all checks every op: name no OP"));
}

TEST_CASE("check for an NN op: its reference problems, --example, per output errors") {
  const Result r = opforge_reg({"check", "layer_norm", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json j = json::parse(r.out);
  CHECK(j["ok"] == true);
  CHECK(j["ran"].get<int>() >= 10);  // the row problems: 1x1 up to 8x8192
  int random = 0;
  for (const auto& p : j["problems"]) random += p["kind"] == "random";
  CHECK(random == 4);  // --random-shapes' default: redrawn dims the checks accept
  CHECK(j["states"]["y"]["exceeding"] == 0);
  CHECK(j["states"]["y"]["elements"].get<int64_t>() > 100000);
  const Result ex = opforge_reg({"check", "gelu", "--example"});
  CHECK_MESSAGE(ex.rc == 0, ex.all());
  CHECK(contains(ex.out, "example "));
  CHECK(contains(ex.out, "ok: within tolerance"));
}

// Every variant of these ops that runs here, with the double_buffer knob on: the optimizer
// ops in place at odd sizes (small grains, so every size has several slots and a tail), the NN
// ops on all their reference problems and random redraws.
TEST_CASE("check --set double_buffer=1: previews against fp64, in place, odd sizes, every ISA") {
  auto reg = Registry::open(test_registry_dir());
  // `op`'s variants that run here (with `storage`: one per ISA, its first attrs).
  auto variants_here = [&](const std::string& op, const std::string& storage) {
    std::vector<std::string> out;
    std::set<std::string> isas;
    for (const auto& d : reg->variants(op)) {
      if (d.target.priority == 0 || !runs_here(d)) continue;  // autoscheduled twins: no recipe
      if (storage.empty()) {
        out.push_back(d.variant);
      } else if (d.variant.find("__" + storage + "__") != std::string::npos &&
                 isas.insert(d.target.isa).second) {
        out.push_back(d.variant);
      }
    }
    return out;
  };
  // The compile cache the previews go to, and the rule files adam_rule's preview is built from.
  const std::vector<std::string> cache = {
      "--cache-dir", test_cache_dir(), "--rules",
      (fs::path(OPFORGE_SOURCE_DIR) / "generators" / "rules" / "adam_rule.rule").string()};
  int optimizer_checks = 0;
  // Adam (plain, fast path), LAMB (a whole-tensor reduction, new values computed first),
  // momentum, SGD in fp32 and with bf16 master weights, and a rule file's op.
  const std::vector<std::pair<std::string, std::string>> optimizer = {
      {"apply_adam", "f32"},
      {"apply_lamb", "f32"},
      {"apply_lamb", "bf16m"},
      {"apply_momentum", "f32"},
      {"apply_gradient_descent", "bf16m"},
      {"adam_rule", "f32"}};
  for (const auto& [op, storage] : optimizer) {
    const auto ids = variants_here(op, storage);
    REQUIRE_MESSAGE(!ids.empty(), op << " " << storage);
    for (const auto& id : ids) {
      for (const std::string n : {"1", "5", "17", "1000", "65543"}) {
        CAPTURE(id);
        CAPTURE(n);
        const Result r = opforge_reg(concat({"check", op, "--variant", id, "--n", n, "--set",
                                             "double_buffer=1", "--set", "db_grain=256", "--json"},
                                            cache));
        REQUIRE_MESSAGE(r.rc == 0, r.all());
        const json j = json::parse(r.out);
        CHECK(j["ok"] == true);
        CHECK(j["set"] == "db_grain=256 double_buffer=1");
        for (const auto& [state, e] : j["states"].items()) CHECK(e["exceeding"] == 0);
        ++optimizer_checks;
      }
    }
  }
  CHECK(optimizer_checks >= 5 * 6);
  // The parallel path at every size (serial_below 0), grains of a few vectors.
  for (const auto& id : variants_here("apply_adam", "f32")) {
    for (const char* n : {"1", "17", "65543"}) {
      const Result r = opforge_reg(
          concat({"check", "apply_adam", "--variant", id, "--n", n, "--set", "double_buffer=1",
                  "--set", "db_grain=256", "--set", "serial_below=0", "--set", "tasks=3"},
                 cache));
      CHECK_MESSAGE(r.rc == 0, r.all());
    }
  }
  // The NN ops that take the knob: the row recipe's (slots of 3 rows: R off the slot size)
  // and the elementwise recipe's.
  int nn_checks = 0;
  for (const std::string op : {"layer_norm", "rms_norm", "softmax", "add_layer_norm",
                               "add_rms_norm", "gelu", "silu", "silu_mul", "matmul"}) {
    const bool rows = op.find("norm") != std::string::npos || op == "softmax";
    // Every variant of the row and elementwise ops (fp32 and bf16 activations); matmul's
    // first per ISA (its packs do not depend on the transposes).
    for (const auto& id : variants_here(op, op == "matmul" ? "f32" : "")) {
      CAPTURE(id);
      std::vector<std::string> args = {"check",           op,      "--variant", id, "--set",
                                       "double_buffer=1", "--json"};
      if (rows) args.insert(args.end(), {"--set", "db_rows=3"});
      if (op == "gelu" || op == "silu" || op == "silu_mul")
        args.insert(args.end(), {"--set", "db_grain=256"});
      const Result r = opforge_reg(concat(args, cache));
      REQUIRE_MESSAGE(r.rc == 0, r.all());
      const json j = json::parse(r.out);
      CHECK(j["ok"] == true);
      CHECK(j["ran"].get<int>() >= 5);
      ++nn_checks;
    }
  }
  CHECK(nn_checks >= 9 * 2);
  // An op whose schedule has no such param says which it has; a bad value names itself.
  const Result conv = opforge_reg(concat({"check", "conv2d", "--set", "double_buffer=1"}, cache));
  CHECK(conv.rc != 0);
  CHECK(contains(conv.err, "has no schedule param 'double_buffer' (its params:"));
  const Result bad = opforge_reg(concat({"check", "softmax", "--set", "db_rows=0"}, cache));
  CHECK(bad.rc != 0);
  CHECK(contains(bad.err, "'db_rows' = 0 is outside [1, 4096]"));
}

TEST_CASE("check draws scalars from their typical values, or at random inside their domains") {
  // With each scalar's typical value (lr_power -0.5 among them), the FTRL family passes; the
  // report lists the values. (With 0.1 for every scalar, a positive lr_power outside TF's
  // domain, apply_ftrl failed by 6,413 elements.)
  for (const char* op : {"apply_ftrl", "apply_ftrl_v2", "sparse_apply_ftrl"}) {
    CAPTURE(op);
    const Result r = opforge_reg({"check", op, "--json"});
    CHECK_MESSAGE(r.rc == 0, r.all());
    if (r.rc == 0) CHECK(json::parse(r.out)["scalars"]["lr_power"] == -0.5);
  }
  const Result text = opforge_reg({"check", "apply_adam", "--n", "1001"});
  CHECK(contains(text.out, "scalars: beta1=0.899999976 beta1_power="));
  // --scalars random: seeded draws inside each domain, reproducible, listed.
  auto drawn = [](const std::string& seed) {
    const Result r = opforge_reg(
        {"check", "apply_adamw", "--n", "1001", "--scalars", "random", "--seed", seed, "--json"});
    REQUIRE_MESSAGE((r.rc == 0 || r.rc == 1), r.all());
    return json::parse(r.out)["scalars"];
  };
  const json a = drawn("3"), b = drawn("3"), c = drawn("4");
  CHECK(a == b);
  CHECK(a != c);
  for (const json& s : {a, c}) {
    for (const char* beta : {"beta1", "beta2"}) {
      CHECK(s[beta].get<double>() >= 0);
      CHECK(s[beta].get<double>() < 1);
    }
    CHECK(s["epsilon"].get<double>() >= 0);
    CHECK(s["lr"].get<double>() != 0.001f);  // not the typical value
  }
  const Result bad = opforge_reg({"check", "apply_adam", "--scalars", "wild"});
  CHECK(bad.rc == 2);
  CHECK(contains(bad.err, "--scalars wild: expected typical or random"));
}

TEST_CASE("check: 8-bit states and FP8 gradients against the golden of the unquantized op") {
  for (const char* storage : {"q8s", "q8ls", "e4m3gq8s"}) {
    CAPTURE(storage);
    const Result r = opforge_reg({"check", "apply_adamw", "--attr",
                                  std::string("storage=") + storage, "--n", "5000", "--json"});
    REQUIRE_MESSAGE(r.rc == 0, r.all());
    const json j = json::parse(r.out);
    CHECK(j["ok"] == true);
    CHECK(j["states"]["var"]["elements"] == 5000);
    for (const char* s : {"m", "v"}) {
      CAPTURE(s);
      // The decoded codes: within half the map's gap of the golden (the dynamic map's widest
      // is 0.9/64 of the absmax; the linear signed one's 1/127), so errors of that order.
      const double rel = j["states"][s]["max_rel_error"].get<double>();
      CHECK(rel > 1e-4);
      CHECK(rel < 0.0071);
      CHECK(j["states"][std::string(s) + "_absmax"]["elements"] == 20);  // ceil(5000 / 256)
      CHECK(j["states"][std::string(s) + "_absmax"]["max_rel_error"].get<double>() < 1e-6);
    }
  }
  for (const char* storage : {"e4m3g", "e5m2g"}) {
    CAPTURE(storage);
    const Result r = opforge_reg(
        {"check", "accumulate_grad", "--attr", std::string("storage=") + storage, "--json"});
    REQUIRE_MESSAGE(r.rc == 0, r.all());
    CHECK(json::parse(r.out)["states"]["acc"]["max_rel_error"].get<double>() < 1e-6);
  }
}

// Every rule file in generators/rules is in the test registry (build_test_registry adds them),
// and each variant this host runs of each op the file derives (the op, its loss-scaling,
// storage and autoschedule variants, its sparse_ op) matches the rule's fp64 golden at the odd
// sizes every in-place kernel is held to: a new rule file is checked like every op, without a
// test of its own. The check calls the kernel in place, states aliased as input and output; a
// sparse op's sizes are its rows (3 columns, twice as many indices as rows: duplicates).
TEST_CASE("every rule file's op matches its fp64 golden at odd sizes, aliased, on every ISA") {
  const fs::path dir = fs::path(OPFORGE_SOURCE_DIR) / "generators" / "rules";
  auto reg = Registry::open(test_registry_dir());
  std::map<std::string, std::vector<std::string>> ops_of_file;  // rule file name -> its ops
  for (const auto& op : reg->ops()) {
    const std::string ref = reg->variants(op).front().reference;
    if (ref.rfind("rule file ", 0) == 0)
      ops_of_file[fs::path(ref).filename().string()].push_back(op);
  }
  int files = 0, checked = 0;
  std::set<std::string> forms;  // what was checked: "sparse", "auto", "found_inf", "inv_scale"
  bool auto_registered = false;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".rule") continue;
    ++files;
    const std::string name = f.path().filename().string();
    CAPTURE(name);
    REQUIRE_MESSAGE(ops_of_file.count(name), "not in the test registry");
    for (const std::string& op : ops_of_file.at(name)) {
      for (const auto& d : reg->variants(op)) {
        if (d.target.priority == 0) auto_registered = true;
        if (!runs_here(d)) continue;
        const bool sparse = !d.shape.elementwise;
        std::set<std::string> results;  // one-element outputs (found_inf)
        for (const auto& in : d.inputs) {
          if (in.role == registry::Input::Role::result) results.insert(in.name);
          if (in.name == "inv_scale") forms.insert("inv_scale");
        }
        if (!results.empty()) forms.insert("found_inf");
        if (sparse) forms.insert("sparse");
        if (d.target.priority == 0) forms.insert("auto");
        for (const char* n : {"1", "5", "17", "1000", "65543"}) {
          CAPTURE(d.variant);
          CAPTURE(n);
          std::vector<std::string> args = {"check",   op,           "--variant", d.variant,
                                           "--rules", dir.string(), "--json"};
          const int64_t size = std::stoll(n);
          if (sparse) {
            for (const std::string& a :
                 {std::string("--rows"), std::string(n), std::string("--cols"), std::string("3"),
                  std::string("--indices"), std::to_string(2 * size)})
              args.push_back(a);
          } else {
            args.push_back("--n");
            args.push_back(n);
          }
          const Result r = opforge_reg(args);
          REQUIRE_MESSAGE(r.rc == 0, r.all());
          const json j = json::parse(r.out);
          CHECK(j["ok"] == true);
          CHECK(j["variant"] == d.variant);
          CHECK_FALSE(j["states"].empty());
          for (const auto& [state, e] : j["states"].items()) {
            CAPTURE(state);
            const int64_t want = results.count(state) ? 1 : sparse ? size * 3 : size;
            CHECK(e["elements"] == want);
            CHECK(e["exceeding"] == 0);
          }
          ++checked;
        }
      }
    }
  }
  CHECK(files >= 2);
  CHECK(checked >= files * 5);  // at least the AVX2 variant of each, which every host runs
  // The shipped rules declare every derived form, so each is checked here.
  CHECK(forms.count("sparse"));
  CHECK(forms.count("found_inf"));
  CHECK(forms.count("inv_scale"));
  CHECK(auto_registered);  // AVX-512 twins: checked where they run
}

}  // namespace
}  // namespace opforge::testing
