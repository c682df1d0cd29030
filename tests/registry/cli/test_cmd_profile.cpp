// opforge profile: a step of op calls from a JSON file, summarized per op or per call; the
// file's errors. No timing thresholds: only structure and consistency.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "cli_util.h"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

// scripts/profiles/NAME in the source tree.
std::string profile_path(const std::string& name) {
  return (fs::path(OPFORGE_SOURCE_DIR) / "scripts" / "profiles" / name).string();
}

const std::string kTiny = profile_path("tiny_mlp_sgd_momentum.json");

// A profile file in `dir` with the given text; returns its path.
std::string write_profile(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir / name;
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("profile --json: one row per op, counts from the repeats, shares add up to the step") {
  REQUIRE(fs::exists(kTiny));
  const json file = json::parse(slurp(kTiny));
  std::map<std::string, int64_t> expected;  // op -> calls per step
  int64_t all_calls = 0;
  for (const auto& c : file.at("calls")) {
    const int64_t repeat = c.value("repeat", int64_t{1});
    expected[c.at("op").get<std::string>()] += repeat;
    all_calls += repeat;
  }

  const Result r = opforge_reg({"profile", kTiny, "--steps", "2", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json j = parse_json(r);
  CHECK(j.at("name") == file.at("name"));
  CHECK(j.at("steps") == 2);
  CHECK(j.at("threads") == 2);
  CHECK(j.at("host").at("cpu_model").get<std::string>().size() > 0);  // the machine it ran on
  const json& ops = j.at("ops");
  REQUIRE(ops.is_array());
  CHECK(ops.size() == expected.size());
  double pct = 0, us = 0, prev = 1e300;
  std::set<std::string> seen;
  for (const auto& row : ops) {
    const std::string op = row.at("op");
    CAPTURE(op);
    CHECK(seen.insert(op).second);
    REQUIRE(expected.count(op) == 1);
    CHECK(row.at("calls") == expected[op]);
    CHECK(row.at("us").get<double>() > 0);
    CHECK(row.at("avg_us").get<double>() > 0);
    CHECK(row.at("gbps").get<double>() > 0);
    CHECK(row.at("bytes").get<double>() > 0);
    CHECK(row.at("pct_of_bandwidth").get<double>() > 0);  // both ops have a bandwidth kernel
    CHECK(row.at("us").get<double>() <= prev);            // sorted by time, descending
    prev = row.at("us").get<double>();
    pct += row.at("pct_of_step").get<double>();
    us += row.at("us").get<double>();
  }
  CHECK(pct == doctest::Approx(100.0).epsilon(1e-6));
  const json& total = j.at("total");
  CHECK(total.at("calls") == all_calls);
  CHECK(total.at("us").get<double>() == doctest::Approx(us).epsilon(1e-9));
  CHECK(total.at("gbps").get<double>() > 0);
  CHECK(total.at("pct_of_bandwidth").get<double>() > 0);
  // Per call too: every call of the file, once.
  REQUIRE(j.at("calls").size() == file.at("calls").size());
  double call_pct = 0;
  for (const auto& c : j.at("calls")) call_pct += c.at("pct_of_step").get<double>();
  CHECK(call_pct == doctest::Approx(100.0).epsilon(1e-6));
}

TEST_CASE("profile: the table, and --by-call lists every label") {
  const Result t = opforge_reg({"profile", kTiny, "--steps", "2"});
  REQUIRE_MESSAGE(t.rc == 0, t.all());
  CHECK(contains(t.out, "apply_momentum"));
  CHECK(contains(t.out, "apply_gradient_descent"));
  CHECK(contains(t.out, "% of bw"));
  CHECK_FALSE(contains(t.out, "fc1.weight"));  // per op, not per call

  const Result r = opforge_reg({"profile", kTiny, "--steps", "2", "--by-call", "--threads", "1"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json file = json::parse(slurp(kTiny));
  for (const auto& c : file.at("calls")) {
    CHECK_MESSAGE(contains(r.out, c.at("label").get<std::string>()), r.out);
  }
  CHECK(contains(r.out, "step"));
}

TEST_CASE("profile: sparse ops take rows, cols and indices") {
  TempDir dir;
  const std::string f = write_profile(
      dir, "sparse.json",
      R"({"calls": [{"op": "sparse_apply_momentum", "rows": 300, "cols": 16, "indices": 50,
                     "label": "emb"},
                    {"op": "apply_gradient_descent", "n": 1000, "repeat": 3}]})");
  const Result r = opforge_reg({"profile", f, "--steps", "2", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json j = parse_json(r);
  std::map<std::string, json> calls;
  for (const auto& c : j.at("calls")) calls[c.at("label").get<std::string>()] = c;
  REQUIRE(calls.count("emb") == 1);
  CHECK(calls["emb"].at("elements") == 50 * 16);
  CHECK(calls["emb"].at("us").get<double>() > 0);
  REQUIRE(calls.count("calls[1]") == 1);  // the default label
  CHECK(calls["calls[1]"].at("calls") == 3);
  CHECK(j.at("total").at("calls") == 4);
}

TEST_CASE("profile: errors name the file, the call and the field") {
  TempDir dir;
  SUBCASE("unknown op: the call index and a suggestion") {
    const std::string f = write_profile(
        dir, "unknown_op.json",
        R"({"calls": [{"op": "apply_gradient_descent", "n": 8}, {"op": "apply_adm", "n": 8}]})");
    const Result r = opforge_reg({"profile", f, "--steps", "1"});
    CHECK(r.rc != 0);
    CHECK_MESSAGE(contains(r.err, f), r.err);
    CHECK_MESSAGE(contains(r.err, "calls[1]"), r.err);
    CHECK_MESSAGE(contains(r.err, "apply_adm"), r.err);
    CHECK_MESSAGE(contains(r.err, "did you mean 'apply_adam'"), r.err);
    CHECK(r.out.empty());
  }
  SUBCASE("an NN op: profile replays optimizer calls") {
    const std::string f =
        write_profile(dir, "nn_op.json", R"({"calls": [{"op": "layer_norm", "n": 100}]})");
    const Result r = opforge_reg({"profile", f});
    CHECK(r.rc != 0);
    CHECK_MESSAGE(contains(r.err, "calls[0]"), r.err);
    CHECK_MESSAGE(contains(r.err, "layer_norm is an NN op: profile replays optimizer calls"),
                  r.err);
  }
  SUBCASE("missing n") {
    const std::string f = write_profile(
        dir, "missing_n.json",
        R"({"calls": [{"op": "apply_adam", "n": 8}, {"op": "apply_adam", "label": "w"}]})");
    const Result r = opforge_reg({"profile", f});
    CHECK(r.rc != 0);
    CHECK_MESSAGE(contains(r.err, f + ": calls[1] (w)"), r.err);
    CHECK_MESSAGE(contains(r.err, "missing 'n'"), r.err);
  }
  SUBCASE("n not positive") {
    const std::string f =
        write_profile(dir, "zero_n.json", R"({"calls": [{"op": "apply_adam", "n": 0}]})");
    const Result r = opforge_reg({"profile", f});
    CHECK(r.rc != 0);
    CHECK_MESSAGE(contains(r.err, "calls[0]"), r.err);
    CHECK_MESSAGE(contains(r.err, "'n' must be positive"), r.err);
  }
  SUBCASE("unknown key in a call") {
    const std::string f = write_profile(
        dir, "unknown_key.json", R"({"calls": [{"op": "apply_adam", "n": 8, "repaet": 2}]})");
    const Result r = opforge_reg({"profile", f});
    CHECK(r.rc != 0);
    CHECK_MESSAGE(contains(r.err, f + ": calls[0]"), r.err);
    CHECK_MESSAGE(contains(r.err, "unknown key 'repaet'"), r.err);
    CHECK_MESSAGE(contains(r.err, "'repeat'"), r.err);
  }
  SUBCASE("a dense op given rows") {
    const std::string f = write_profile(
        dir, "dense_rows.json", R"({"calls": [{"op": "apply_adam", "rows": 8, "cols": 2}]})");
    const Result r = opforge_reg({"profile", f});
    CHECK(r.rc != 0);
    CHECK_MESSAGE(contains(r.err, "give 'n'"), r.err);
  }
  SUBCASE("an unknown scalar") {
    const std::string f = write_profile(
        dir, "scalar.json", R"({"calls": [{"op": "apply_adam", "n": 8, "scalars": {"lrr": 1}}]})");
    const Result r = opforge_reg({"profile", f});
    CHECK(r.rc != 0);
    CHECK_MESSAGE(contains(r.err, "scalar 'lrr'"), r.err);
  }
  SUBCASE("malformed JSON: the file and the byte") {
    const std::string f =
        write_profile(dir, "bad.json", R"({"calls": [{"op": "apply_adam", "n": 8,]})");
    const Result r = opforge_reg({"profile", f});
    CHECK(r.rc != 0);
    CHECK_MESSAGE(contains(r.err, f), r.err);
    CHECK_MESSAGE(contains(r.err, "byte"), r.err);
    CHECK(r.out.empty());
  }
  SUBCASE("no such file") {
    const Result r = opforge_reg({"profile", dir / "absent.json"});
    CHECK(r.rc != 0);
    CHECK_MESSAGE(contains(r.err, "absent.json"), r.err);
  }
}

}  // namespace
}  // namespace opforge::testing
