// opforge bench: the JSON it reports, --split, bench all, and usage errors naming the problem.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "cli_util.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

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

// Gradient descent reads var and grad, 8 bytes per element; the L3 is what sysconf reports.
TEST_CASE("bench: whether one call's buffers fit in the L3, and the N that measures memory") {
  const long l3 = std::max(sysconf(_SC_LEVEL3_CACHE_SIZE), 0L);
  // One size that fits any L3, and where the L3 is known (and not huge), one just past it.
  std::vector<int64_t> sizes = {10000};
  if (l3 > 0 && l3 / 8 < (int64_t(1) << 28)) sizes.push_back(l3 / 8 + 1);
  for (int64_t n : sizes) {
    CAPTURE(n);
    const std::string ns = std::to_string(n);
    const Result r =
        opforge_reg({"bench", "apply_gradient_descent", "--n", ns, "--reps", "3", "--json"});
    REQUIRE_MESSAGE(r.rc == 0, r.all());
    const json v = parse_json(r);
    CHECK(v.at("l3_bytes") == l3);
    CHECK(v.at("footprint_bytes").get<double>() == 8.0 * n);
    const bool fits = l3 > 0 && 8 * n <= l3;
    CHECK(v.at("fits_in_l3") == fits);
    if (l3 > 0) {
      int64_t want = 1;
      while (want * 8 < 2 * int64_t(l3)) want *= 10;
      CHECK(v.at("dram_n") == want);
    }
    const Result text = opforge_reg({"bench", "apply_gradient_descent", "--n", ns, "--reps", "3"});
    REQUIRE_MESSAGE(text.rc == 0, text.all());
    CHECK(contains(text.out, "back-to-back calls run partly from cache") == fits);
  }
}

TEST_CASE("bench --set on an NN op: the preview beside the registered variant, same run") {
  const Result r =
      opforge_reg({"bench", "layer_norm", "--isa", "avx2", "--shape", "x=37,1000", "--shape",
                   "gamma=1000", "--shape", "beta=1000", "--reps", "5", "--set", "double_buffer=1",
                   "--set", "db_rows=4", "--cache-dir", test_cache_dir(), "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json j = parse_json(r);
  CHECK(j.at("set") == "db_rows=4 double_buffer=1");
  CHECK(j.at("isa") == "avx2");
  const json& runs = j.at("runs");
  REQUIRE(runs.size() >= 3);  // preview, registered, bandwidth kernel (and oneDNN where built)
  CHECK(runs[0].at("label") == "opforge (db_rows=4 double_buffer=1)");
  CHECK(runs[1].at("label") == "opforge (registered)");
  CHECK(runs[1].at("variant") == runs[0].at("variant"));
  CHECK(runs[2].at("label").get<std::string>().rfind("bandwidth", 0) == 0);
  for (const auto& run : runs) CHECK(run.at("ms").get<double>() > 0);
  const Result bad = opforge_reg({"bench", "layer_norm", "--set", "db_rows=0", "--reps", "1",
                                  "--cache-dir", test_cache_dir()});
  CHECK(bad.rc != 0);
  CHECK(contains(bad.err, "'db_rows' = 0 is outside [1, 4096]"));
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

TEST_CASE("bench --regime: idle sleeps before every timed call; the regime is reported") {
  const std::vector<std::string> base = {
      "bench", "apply_gradient_descent", "--n", "1000", "--reps", "21", "--json"};
  const Result awake = opforge_reg(base);
  REQUIRE_MESSAGE(awake.rc == 0, awake.all());
  CHECK(parse_json(awake).at("regime") == "awake");
  // 21 reps of the op and of the bandwidth kernel at 2 threads and at 1, in 5 rounds of 5
  // (25 each), plus warm-ups: at least 75 sleeps of 20 ms, whatever the host's speed.
  const auto t0 = std::chrono::steady_clock::now();
  const Result idle = opforge_reg(concat(base, {"--regime", "idle", "--idle-gap", "20000"}));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_MESSAGE(idle.rc == 0, idle.all());
  const json v = parse_json(idle);
  CHECK(v.at("regime") == "idle");
  CHECK(v.at("idle_gap_us") == 20000);
  CHECK(s >= 75 * 0.020);
  const Result text = opforge_reg({"bench", "apply_gradient_descent", "--n", "1000", "--reps", "3",
                                   "--regime", "idle", "--idle-gap", "100"});
  REQUIRE_MESSAGE(text.rc == 0, text.all());
  CHECK(contains(text.out, "regime: idle (100 us between calls)"));
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--regime", "asleep"},
        std::vector<std::string>{"--idle-gap", "500"},
        std::vector<std::string>{"--regime", "idle", "--idle-gap", "0"}}) {
    const Result r = opforge_reg(concat(base, bad));
    CAPTURE(bad[0]);
    CHECK(r.rc == 2);
    CHECK(contains(r.err, bad.size() == 2 && bad[0] == "--regime" ? "--regime" : "--idle-gap"));
  }
}

TEST_CASE("bench: bad --n is a usage error") {
  const Result r = opforge_reg({"bench", "apply_gradient_descent", "--n", "ten"});
  CHECK(r.rc == 2);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, "--n"));
}

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
