// list, describe, bench and help: what the CLI prints about the registry.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

TEST_CASE("list: every op, as a table and as JSON") {
  const Result r = opforge_reg({"list"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  for (const char* op : {"apply_adam", "apply_gradient_descent", "apply_momentum"}) {
    CHECK(contains(r.out, op));
  }
  CHECK(contains(r.out, test_registry_dir()));

  const Result j = opforge_reg({"list", "--json"});
  REQUIRE_MESSAGE(j.rc == 0, j.all());
  const json v = parse_json(j);
  REQUIRE(v.is_array());
  int adam = 0;
  for (const auto& e : v) {
    if (e.at("op") == "apply_adam") {
      ++adam;
      CHECK(e.at("variant").get<std::string>().rfind("apply_adam__", 0) == 0);
      CHECK(e.at("attrs").contains("use_nesterov"));
    }
  }
  // use_nesterov false/true x epsilon_mode tf/torch x avx512/avx2, the autoscheduled
  // avx512 twin of the default attrs, bf16m/f16m of use_nesterov false/true x avx512/avx2,
  // bf16s/bf16ms (bf16 states) of the default attrs x avx512/avx2, and loss scaling
  // (unscale+skip in f32, bf16m, f16m, bf16ms; unscale, skip alone in bf16m) x avx512/avx2.
  CHECK(adam == 33);
}

TEST_CASE("describe apply_adam: formula and every argument in TF order") {
  const Result r = opforge_reg({"describe", "apply_adam"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, "lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)"));
  CHECK(contains(r.out, "var -= lr_t * m / (sqrt(v) + epsilon)"));
  // The "arguments (in order):" section, one argument per line.
  const size_t start = r.out.find("arguments (in order):\n");
  REQUIRE(start != std::string::npos);
  std::istringstream lines(r.out.substr(start));
  std::string line;
  std::getline(lines, line);
  std::vector<std::string> names;
  // (Lines "  with ATTRS: ..." list the arguments of variants with more of them.)
  while (std::getline(lines, line) && line.rfind("  ", 0) == 0 && line.rfind("  with ", 0) != 0) {
    std::istringstream w(line);
    std::string name;
    w >> name;
    names.push_back(name);
  }
  const std::vector<std::string> tf = {"var", "m",     "v",     "beta1_power", "beta2_power",
                                       "lr",  "beta1", "beta2", "epsilon",     "grad"};
  CHECK(names == tf);
  // The suggested command line lists them in the same order.
  size_t pos = r.out.find("run it: opforge run apply_adam");
  REQUIRE(pos != std::string::npos);
  for (const auto& n : tf) {
    const size_t at = r.out.find(" " + n + "=", pos);
    CHECK_MESSAGE(at != std::string::npos, n << " out of order in the run line");
    if (at != std::string::npos) pos = at;
  }
}

TEST_CASE("describe --json: every variant's descriptor") {
  const Result r = opforge_reg({"describe", "apply_adam", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json v = parse_json(r);
  REQUIRE(v.is_array());
  // 8 hand-scheduled fp32, 1 autoscheduled (recipe adams2019), 12 mixed precision (bf16m,
  // f16m, bf16s, bf16ms), 12 with loss scaling (10 of them bf16m, f16m or bf16ms)
  CHECK(v.size() == 33);
  int autoscheduled = 0, mixed = 0;
  for (const auto& d : v) autoscheduled += d.at("schedule").at("recipe") == "adams2019";
  CHECK(autoscheduled == 1);
  for (const auto& d : v) {
    CHECK(d.at("op") == "apply_adam");
    const std::string id = d.at("variant");
    const bool mp = id.find("__f32__") == std::string::npos;
    bool copy = false;  // master weights: fp32 var + model copy
    for (const char* tag : {"__bf16m__", "__f16m__", "__bf16ms__"})
      copy = copy || id.find(tag) != std::string::npos;
    mixed += mp;
    // + the write-only model copy, + inv_scale (unscale), + found_inf (unscale or skip)
    const bool unscale = id.find("__unscale_1") != std::string::npos;
    const bool skip = id.find("__skip_if_nonfinite_1") != std::string::npos;
    CHECK(d.at("inputs").size() == 10u + copy + unscale + (unscale || skip));
  }
  CHECK(mixed == 22);
}

TEST_CASE("describe: an unknown op exits 1 naming it") {
  const Result r = opforge_reg({"describe", "apply_adma"});
  CHECK(r.rc == 1);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, "did you mean 'apply_adam'"));
}

TEST_CASE("bench apply_gradient_descent --json") {
  const Result r =
      opforge_reg({"bench", "apply_gradient_descent", "--n", "10000", "--reps", "21", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json v = parse_json(r);
  REQUIRE(v.is_object());
  for (const char* k : {"op_us", "bw_us", "pct_of_bw"}) {
    CAPTURE(k);
    REQUIRE(v.contains(k));
    CHECK(v.at(k).is_number());
    CHECK(v.at(k).get<double>() > 0);
  }
  CHECK(v.at("op") == "apply_gradient_descent");
  CHECK(v.at("n") == 10000);
  CHECK(v.at("bandwidth_kernel").get<std::string>().rfind("bandwidth_s1_g1__", 0) == 0);
}

TEST_CASE("bench --split: whole-tensor call against chunked updates, same run") {
  const Result r = opforge_reg({"bench", "apply_gradient_descent", "--n", "100003", "--split",
                                "2^10,4099", "--reps", "5", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json v = parse_json(r);
  CHECK(v.at("op") == "apply_gradient_descent");
  CHECK(v.at("n") == 100003);
  CHECK(v.at("reps") == 5);
  CHECK(v.at("whole").at("calls") == 1);
  CHECK(v.at("whole").at("us").get<double>() > 0);
  REQUIRE(v.at("chunked").size() == 2);
  CHECK(v.at("chunked")[0].at("chunk") == 1024);
  CHECK(v.at("chunked")[0].at("calls") == 98);  // ceil(100003 / 1024)
  CHECK(v.at("chunked")[1].at("chunk") == 4099);
  CHECK(v.at("chunked")[1].at("calls") == 25);
  for (const auto& c : v.at("chunked")) {
    for (const char* k : {"us", "gbps", "time_ratio"}) {
      CAPTURE(k);
      CHECK(c.at(k).get<double>() > 0);
    }
    CHECK(c.contains("speedup_pct"));
  }
  const Result text = opforge_reg(
      {"bench", "apply_gradient_descent", "--n", "5000", "--split", "1000", "--reps", "3"});
  REQUIRE_MESSAGE(text.rc == 0, text.all());
  CHECK(contains(text.out, "whole tensor"));
  CHECK(contains(text.out, "chunk 1000"));
  CHECK(contains(text.out, "the whole call's time"));
}

TEST_CASE("bench --split: usage errors name the problem") {
  const Result lamb = opforge_reg({"bench", "apply_lamb", "--n", "1000", "--split", "100"});
  CHECK(lamb.rc == 2);
  CHECK(contains(lamb.err, "apply_lamb is not splittable"));
  const Result sparse = opforge_reg({"bench", "sparse_adam", "--n", "1000", "--split", "100"});
  CHECK(sparse.rc == 2);
  CHECK(contains(sparse.err, "not splittable"));
  for (const char* bad : {"0", "x", "2^", "1.5", "10,,20", "-4"}) {
    CAPTURE(bad);
    const Result r =
        opforge_reg({"bench", "apply_gradient_descent", "--n", "1000", "--split", bad});
    CHECK(r.rc == 2);
    CHECK(contains(r.err, "--split"));
  }
  const Result all = opforge_reg({"bench", "all", "--n", "1000", "--split", "100"});
  CHECK(all.rc == 2);
  CHECK(contains(all.err, "--split takes one op"));
}

TEST_CASE("bench: bad --n is a usage error") {
  const Result r = opforge_reg({"bench", "apply_gradient_descent", "--n", "ten"});
  CHECK(r.rc == 2);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, "--n"));
}

// bench checks --scalar like run does: "alpha=abc" must not benchmark with alpha = 0, and a
// misspelled name must not fall back to the default.
TEST_CASE("bench: a malformed or unknown --scalar is a usage error") {
  const std::vector<std::string> base = {
      "bench", "apply_gradient_descent", "--n", "1000", "--reps", "1", "--json"};
  const Result abc = opforge_reg(concat(base, {"--scalar", "alpha=abc"}));
  CHECK(abc.rc == 2);
  CHECK(contains(abc.err, "alpha=abc"));
  const Result unknown = opforge_reg(concat(base, {"--scalar", "alpah=0.1"}));
  CHECK(unknown.rc != 0);
  CHECK(contains(unknown.err, "'alpah'"));
}

TEST_CASE("help and unknown commands") {
  const Result top = opforge({"--help"});
  CHECK(top.rc == 0);
  for (const char* c : {"build", "list", "describe", "inspect", "run", "bench", "cache"}) {
    CHECK(contains(top.out, c));
  }
  const Result none = opforge({});
  CHECK(none.rc == 2);

  const Result run = opforge({"run", "--help"});
  CHECK(run.rc == 0);
  CHECK(contains(run.out, "usage: opforge run"));
  for (const char* o : {"--in", "--scalar", "--attr", "--isa", "--out", "--registry"}) {
    CHECK(contains(run.out, o));
  }

  const Result bad = opforge({"frobnicate"});
  CHECK(bad.rc == 2);
  CHECK(one_line(bad.err));
  CHECK(contains(bad.err, "'frobnicate'"));
  const Result near = opforge({"lsit"});
  CHECK(near.rc == 2);
  CHECK(contains(near.err, "did you mean 'list'"));
}

TEST_CASE("run OP --help lists the op's own arguments in order, from its descriptor") {
  const Result r = opforge_reg({"run", "apply_adam", "--help"});
  CHECK(r.rc == 0);
  size_t at = 0;
  for (const char* arg :
       {"--in var=", "--in m=", "--in v=", "--scalar beta1_power=", "--scalar beta2_power=",
        "--scalar lr=", "--scalar beta1=", "--scalar beta2=", "--scalar epsilon=", "--in grad="}) {
    const size_t next = r.out.find(arg, at);
    CHECK_MESSAGE(next != std::string::npos, arg << " missing or out of order");
    if (next != std::string::npos) at = next;
  }
  CHECK(contains(r.out, "--attr use_nesterov=bool"));
  CHECK(contains(r.out, "Nesterov"));
}

TEST_CASE("bench all covers every optimizer op of the registry") {
  const Result list = opforge_reg({"list", "--json"});
  REQUIRE(list.rc == 0);
  std::set<std::string> ops, nn_ops;
  const auto reg = Registry::open(test_registry_dir());
  for (const auto& v : json::parse(list.out)) {
    const std::string op = v["op"];
    const std::string kind = reg->variants(op).front().kind;
    if (kind == "optimizer") ops.insert(op);
    if (kind == "nn") nn_ops.insert(op);
  }
  const Result r = opforge_reg(
      {"bench", "all", "--n", "1000", "--rows", "50", "--cols", "3", "--reps", "3", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  std::set<std::string> benched;
  for (const auto& j : json::parse(r.out)) {
    benched.insert(j["op"].get<std::string>());
    CHECK(j["op_us"].get<double>() > 0);
  }
  CHECK(benched == ops);
  // `bench nn`: every NN op on its declared example call, with one timed rep.
  const Result nn = opforge_reg({"bench", "nn", "--reps", "1", "--json"});
  REQUIRE_MESSAGE(nn.rc == 0, nn.all());
  std::set<std::string> nn_benched;
  for (const auto& j : json::parse(nn.out)) {
    nn_benched.insert(j["op"].get<std::string>());
    CHECK(j["runs"][0]["ms"].get<double>() > 0);
  }
  CHECK(nn_benched == nn_ops);
  CHECK(nn_ops.size() >= 7);
}

}  // namespace
}  // namespace opforge::testing

namespace opforge::testing {
namespace {

TEST_CASE("new writes a starter rule that builds, describes and runs") {
  TempDir dir;
  const Result made = opforge({"new", "my_rule", "--dir", dir.path().string()});
  REQUIRE_MESSAGE(made.rc == 0, made.all());
  CHECK(fs::exists(dir / "my_rule.rule"));
  CHECK(opforge({"new", "my_rule", "--dir", dir.path().string()}).rc == 1);  // no overwrite
  CHECK(opforge({"new", "../escape", "--dir", dir.path().string()}).rc == 2);
  const Result built = opforge({"build", "--registry", dir / "reg", "--cache-dir", test_cache_dir(),
                                "--rules", dir / "my_rule.rule", "--only", "my_rule"});
  REQUIRE_MESSAGE(built.rc == 0, built.all());
  const Result d = opforge({"describe", "my_rule", "--registry", dir / "reg"});
  CHECK(contains(d.out, "sign(grad)"));
  CHECK(contains(d.out, "nesterov"));
  // The fp64 golden of the rule, with the rule's hyper defaults.
  const Result c = opforge({"check", "my_rule", "--registry", dir / "reg", "--rules",
                            dir / "my_rule.rule", "--n", "5000"});
  CHECK_MESSAGE(c.rc == 0, c.all());
  CHECK(contains(c.out, "ok: within tolerance"));
}

}  // namespace
}  // namespace opforge::testing

namespace opforge::testing {
namespace {

TEST_CASE("new writes a starter rule that builds, describes and runs") {
  TempDir dir;
  const Result made = opforge({"new", "my_rule", "--dir", dir.path().string()});
  REQUIRE_MESSAGE(made.rc == 0, made.all());
  CHECK(fs::exists(dir / "my_rule.rule"));
  CHECK(opforge({"new", "my_rule", "--dir", dir.path().string()}).rc == 1);  // no overwrite
  CHECK(opforge({"new", "../escape", "--dir", dir.path().string()}).rc == 2);
  const Result built = opforge({"build", "--registry", dir / "reg", "--cache-dir", test_cache_dir(),
                                "--rules", dir / "my_rule.rule", "--only", "my_rule"});
  REQUIRE_MESSAGE(built.rc == 0, built.all());
  const Result d = opforge({"describe", "my_rule", "--registry", dir / "reg"});
  CHECK(contains(d.out, "sign(grad)"));
  CHECK(contains(d.out, "nesterov"));
  // The fp64 golden of the rule, with the rule's hyper defaults.
  const Result c = opforge({"check", "my_rule", "--registry", dir / "reg", "--rules",
                            dir / "my_rule.rule", "--n", "5000"});
  CHECK_MESSAGE(c.rc == 0, c.all());
  CHECK(contains(c.out, "ok: within tolerance"));
}

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
  // Centered RMSProp on generic data divides by ms - mg^2 + eps close to 0: fp32 cannot meet
  // the tolerance there, and check says so with exit code 1.
  const Result bad = opforge_reg({"check", "apply_centered_rms_prop"});
  CHECK(bad.rc == 1);
  CHECK(contains(bad.out, "FAILED"));
  const Result unknown = opforge_reg({"check", "apply_adma"});
  CHECK(unknown.rc == 2);
  CHECK(contains(unknown.err, "did you mean 'apply_adam'"));
}

}  // namespace
}  // namespace opforge::testing
