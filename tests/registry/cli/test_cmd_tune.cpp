// opforge tune writes this machine's tuning file (families, params, same-run evidence);
// opforge build applies it (explicitly, or found beside the registry), describe / inspect name
// it, --tuning none and a bad file behave; opforge bench --set times a preview beside the
// registered variant; a tuning with divide=1 gives a kernel that divides and still passes check.
// CI-sized: one family, one ISA, one size, one param.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "cli_util.h"

namespace opforge::testing {
namespace {

const std::map<std::string, std::string> kNoPrune = {{"OPFORGE_CACHE_MAXSIZE", "0"}};

// One thread count unless asked: the default times every point at 1 and at every CPU.
Result tune(const std::string& out, std::vector<std::string> extra = {},
            const std::string& sizes = "1e4", const std::string& threads = "2") {
  return opforge_reg(concat({"tune", "--ops", "apply_gradient_descent", "--isa", "avx2", "--sizes",
                             sizes, "--regime", "awake", "--params", "tasks", "--threads", threads,
                             "--out", out, "--cache-dir", test_cache_dir()},
                            extra),
                     kNoPrune);
}

Result build(const std::string& reg, const std::string& tuning) {
  std::vector<std::string> args = {"build",
                                   "--registry",
                                   reg,
                                   "--cache-dir",
                                   test_cache_dir(),
                                   "--only",
                                   "apply_gradient_descent",
                                   "--json"};
  if (!tuning.empty()) args.insert(args.end(), {"--tuning", tuning});
  return opforge(args, kNoPrune);
}

// `file` (this machine's, from tune) with fp32 Adam's avx2 family given `params` by hand, then
// apply_adam built with it into `reg`.
void build_adam_with(const std::string& file, const nlohmann::json& params,
                     const std::string& reg) {
  nlohmann::json j = nlohmann::json::parse(slurp(file));
  nlohmann::json family = j["families"]["s1_g1"]["avx2"];
  family["params"] = params;
  j["families"]["s3_g1"]["avx2"] = family;
  std::ofstream(file) << j.dump(2);
  const Result b = opforge({"build", "--registry", reg, "--cache-dir", test_cache_dir(), "--only",
                            "apply_adam", "--tuning", file, "--quiet"},
                           kNoPrune);
  REQUIRE_MESSAGE(b.rc == 0, b.all());
}

TEST_CASE("tune: this machine's file, applied by build, named by describe and inspect") {
  TempDir dir;
  const std::string file = dir / "tuning.json";
  const Result t = tune(file, {"--json"}, "1e4", "1,2");
  REQUIRE_MESSAGE(t.rc == 0, t.all());
  const nlohmann::json j = parse_json(t);
  CHECK(j["tuning_file"] == file);
  // Every family with an apply_gradient_descent variant (fp32, narrow gradients, ...).
  nlohmann::json f;
  for (const auto& e : j["families"]) {
    CHECK(e["isa"] == "avx2");
    if (e["family"] == "s1_g1") f = e;  // plain SGD moves one state and one gradient
  }
  REQUIRE(f.is_object());
  // At 1e4 SGD's update is serial (serial_below 16384), so no tasks value changes its loops:
  // nothing is timed. With found_inf's check (unscale), tasks split that reduction at 1e4.
  CHECK(f["candidates"] == 0);
  CHECK(f["candidates_not_timed"] == 4);
  CHECK(f["points_timed"] == 0);
  for (const auto& e : j["families"]) {
    if (e["family"] != "s1_g1_r_narrow") continue;
    CHECK(e["candidates"] == 4);
    CHECK(e["candidates_not_timed"] == 0);
    CHECK(e["points_timed"] == 8);  // 1e4 awake at 1 and 2 threads, each
  }
  for (const auto& [k, v] : f["params"].items()) {
    CHECK(k == "tasks");
    CHECK(v.get<int>() >= 1);
  }
  CHECK(f["defaults"]["tasks"] == 8);
  REQUIRE(f["measured_variants"].size() >= 1);
  std::set<std::string> timed;
  std::set<std::pair<std::string, int>> at_threads;
  for (const auto& b : f["buckets"]) {
    timed.insert(b["variant"].get<std::string>());
    at_threads.insert({b["variant"].get<std::string>(), b["threads"].get<int>()});
    CHECK(b["n"] == 10000);
    CHECK(b["regime"] == "awake");
    CHECK(b["default_us"].get<double>() > 0);
    CHECK(b["tuned_us"].get<double>() > 0);
    CHECK(b["bandwidth_us"].get<double>() > 0);
  }
  for (const auto& v : f["measured_variants"]) {
    CHECK(contains(v.get<std::string>(), "__avx2"));
    // --ops: timed on the named op's variants, not the family's other members.
    CHECK(v.get<std::string>().rfind("apply_gradient_descent__", 0) == 0);
    CHECK(timed.count(v.get<std::string>()));
    // --threads 1,2: every member timed at both counts.
    CHECK(at_threads.count({v.get<std::string>(), 1}));
    CHECK(at_threads.count({v.get<std::string>(), 2}));
  }
  CHECK(at_threads.size() == 2 * timed.size());
  const nlohmann::json written = nlohmann::json::parse(slurp(file));
  const std::string machine = written["fingerprint"];
  CHECK(j["machine"] == machine);
  CHECK(written["format"] == "opforge-tuning/1");
  CHECK(written["threads"] == 2);  // the largest count
  CHECK(written["families"]["s1_g1"]["avx2"]["buckets"][0].contains("threads"));
  CHECK(written["families"]["s1_g1"].contains("avx2"));

  // build --tuning FILE: the avx2 variants of the family carry it, the avx512 ones do not.
  const std::string reg = dir / "reg";
  const Result b = build(reg, file);
  REQUIRE_MESSAGE(b.rc == 0, b.all());
  const nlohmann::json bj = parse_json(b);
  CHECK(bj["tuning"] == file);
  CHECK(bj["tuned_variants"].get<int>() >= 1);
  const std::string named = "machine tuning " + machine + " (family s1_g1)";
  const Result d = opforge({"describe", "apply_gradient_descent", "--registry", reg});
  REQUIRE_MESSAGE(d.rc == 0, d.all());
  CHECK(contains(d.out, named));
  const Result i2 = opforge({"inspect", "apply_gradient_descent", "--registry", reg, "--isa",
                             "avx2", "--cache-dir", test_cache_dir()});
  REQUIRE_MESSAGE(i2.rc == 0, i2.all());
  CHECK(contains(i2.out, "tuning    " + named));
  const Result i5 = opforge({"inspect", "apply_gradient_descent", "--registry", reg, "--isa",
                             "avx512", "--cache-dir", test_cache_dir()});
  REQUIRE_MESSAGE(i5.rc == 0, i5.all());
  CHECK(contains(i5.out, "tuning    recipe defaults"));

  // --tuning none: the defaults again.
  const Result n = build(reg, "none");
  REQUIRE_MESSAGE(n.rc == 0, n.all());
  CHECK(parse_json(n)["tuned_variants"] == 0);
  CHECK_FALSE(contains(opforge({"describe", "apply_gradient_descent", "--registry", reg}).out,
                       "machine tuning"));

  // auto (the default): the file of this machine's fingerprint beside the registry.
  fs::create_directories(fs::path(reg) / "tuning");
  fs::copy_file(file, fs::path(reg) / "tuning" / (machine + ".json"));
  const Result a = build(reg, "");
  REQUIRE_MESSAGE(a.rc == 0, a.all());
  CHECK(parse_json(a)["tuning"] == (fs::path(reg) / "tuning" / (machine + ".json")).string());
  CHECK(contains(opforge({"describe", "apply_gradient_descent", "--registry", reg}).out, named));
}

TEST_CASE("tuning divide=1: Adam's kernel divides, and still matches its fp64 golden") {
  TempDir dir;
  const std::string file = dir / "tuning.json";
  const Result t = tune(file);
  REQUIRE_MESSAGE(t.rc == 0, t.all());
  // This machine's file, with fp32 Adam's family set to exact divides by hand.
  const std::string reg = dir / "reg";
  build_adam_with(file, {{"divide", 1}}, reg);
  auto asm_of = [&](const std::string& registry) {
    const Result r = opforge({"inspect", "apply_adam", "--registry", registry, "--isa", "avx2",
                              "--asm", "--cache-dir", test_cache_dir()});
    REQUIRE_MESSAGE(r.rc == 0, r.all());
    return r.out;
  };
  CHECK(contains(asm_of(reg), "vdivps"));
  CHECK(contains(asm_of(test_registry_dir()), "vrcpps"));  // the default: the refined estimate
  const Result c =
      opforge({"check", "apply_adam", "--registry", reg, "--isa", "avx2", "--n", "1001"});
  CHECK_MESSAGE(c.rc == 0, c.all());
  CHECK(contains(opforge({"describe", "apply_adam", "--registry", reg}).out, "exact divides"));

  // A later search of another param keeps what the registry was built with: the previews were
  // timed with divide=1, and the file says so (it once fell back to the defaults). `vector`:
  // one candidate per family, the fewest previews to compile.
  const std::string again = dir / "again.json";
  const Result t2 = opforge({"tune", "--registry", reg, "--ops", "apply_adam", "--isa", "avx2",
                             "--sizes", "1e4", "--regime", "awake", "--threads", "2", "--params",
                             "vector", "--out", again, "--cache-dir", test_cache_dir()},
                            kNoPrune);
  REQUIRE_MESSAGE(t2.rc == 0, t2.all());
  const nlohmann::json j2 = nlohmann::json::parse(slurp(again));
  CHECK(j2["families"]["s3_g1"]["avx2"]["params"]["divide"] == 1);
  CHECK_FALSE(j2["families"]["s3_g1_narrow"]["avx2"]["params"].contains("divide"));
}

TEST_CASE("divide_below: exact divides below N, the estimate above, each form its golden") {
  // A preview of fp32 Adam with the split at 4096: both forms are in the kernel...
  const std::vector<std::string> set = {"--set", "divide_below=4096", "--cache-dir",
                                        test_cache_dir()};
  const Result a = opforge_reg(concat({"inspect", "apply_adam", "--isa", "avx2", "--asm"}, set));
  REQUIRE_MESSAGE(a.rc == 0, a.all());
  CHECK(contains(a.out, "vdivps"));
  CHECK(contains(a.out, "vrcpps"));
  const Result d = opforge_reg(concat({"inspect", "apply_adam", "--isa", "avx2"}, set));
  CHECK(contains(d.out, "exact divides below N = 4096"));
  // LAMB's norms are a reduction pass: one form of 1/x, and the schedule says so.
  const Result lamb = opforge_reg(concat({"inspect", "apply_lamb", "--isa", "avx2"}, set));
  REQUIRE_MESSAGE(lamb.rc == 0, lamb.all());
  CHECK(contains(lamb.out, "divide_below 4096 not applied"));
  CHECK_FALSE(contains(lamb.out, "exact divides below"));
  // ... and each size takes its copy in place and matches the fp64 golden: below the split
  // (1, 5, 17, 1000: serial), above it (5001 serial, 65543 parallel chunks).
  for (const char* n : {"1", "5", "17", "1000", "5001", "65543"}) {
    CAPTURE(n);
    const Result c = opforge_reg(concat({"check", "apply_adam", "--isa", "avx2", "--n", n}, set));
    CHECK_MESSAGE(c.rc == 0, c.all());
  }
  // tune knows it: an unknown param's error lists the recipe's params from their declarations.
  const Result t = opforge_reg({"tune", "--params", "divide_under", "--dry-run"});
  CHECK(t.rc != 0);
  CHECK_MESSAGE(contains(t.err, "unknown schedule param 'divide_under'"), t.all());
  CHECK_MESSAGE(contains(t.err, "divide, divide_below, double_buffer"), t.all());
}

TEST_CASE("size buckets: searched per size, built from a file, each range matches the golden") {
  TempDir dir;
  const std::string file = dir / "tuning.json";
  // Two sizes: after the one-set search, tasks again at 1e5 alone (bucket from sqrt(1e4 * 1e5)).
  const Result t = tune(file, {}, "1e4,1e5");
  REQUIRE_MESSAGE(t.rc == 0, t.all());
  CHECK(contains(t.err, "tasks@31623="));
  CHECK(contains(t.err, "(N 100000)"));
  // The file, with fp32 Adam's family given buckets by hand (ranges: serial below 16384, 8
  // tasks, 3 tasks from 20000, 16-wide vectors unrolled twice from 50000).
  const std::string reg = dir / "reg";
  build_adam_with(file, {{"tasks@20000", 3}, {"vector@50000", 16}, {"unroll@50000", 2}}, reg);
  const Result d = opforge({"describe", "apply_adam", "--registry", reg});
  CHECK(contains(d.out, "N >= 20000: tasks 3"));
  CHECK(contains(d.out, "N >= 50000: unroll 2, vector 16"));
  // Odd sizes in each range, in place, against the fp64 golden.
  for (const char* n : {"1001", "17001", "20001", "49999", "65543"}) {
    CAPTURE(n);
    const Result c = opforge({"check", "apply_adam", "--registry", reg, "--isa", "avx2", "--n", n});
    CHECK_MESSAGE(c.rc == 0, c.all());
  }
  const Result i = opforge({"inspect", "apply_adam", "--registry", reg, "--isa", "avx2", "--n",
                            "65543", "--cache-dir", test_cache_dir()});
  REQUIRE_MESSAGE(i.rc == 0, i.all());
  CHECK(contains(i.out, ">= 50000)   <== taken"));
  CHECK(contains(i.out, "(16 lanes)"));
}

TEST_CASE("build --tuning: a corrupt or foreign file stops the build before anything is written") {
  TempDir dir;
  const std::string reg = dir / "reg";
  std::ofstream(dir / "bad.json") << "{";
  const Result bad = build(reg, dir / "bad.json");
  CHECK(bad.rc != 0);
  CHECK(contains(bad.err, dir / "bad.json"));
  CHECK(empty_or_absent(reg));
  const Result missing = build(reg, dir / "none.json");
  CHECK(missing.rc != 0);
  CHECK(contains(missing.err, dir / "none.json"));
  CHECK(empty_or_absent(reg));
}

TEST_CASE("tune: bad options are named before any timing, no file written") {
  TempDir dir;
  const std::string out = dir / "t.json";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--params", "tiles"}, "unknown schedule param 'tiles'"},
      {{"--ops", "matmul"}, "'matmul' is not a dense optimizer op"},
      {{"--regime", "sometimes"}, "--regime: awake, idle or both"},
      {{"--sizes", "0"}, "--sizes: expected positive counts"},
      {{"--threads", "0"}, "--threads: expected positive counts"},
      {{"--threads", "1,300"}, "--threads: at most 256, got 300"},
  };
  for (const auto& [extra, what] : cases) {
    CAPTURE(what);
    std::vector<std::string> args = {"tune", "--isa", "avx2", "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = opforge_reg(args);
    CHECK(r.rc != 0);
    CHECK(contains(r.err, what));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("bench --set: the preview and the registered variant side by side; bad params named") {
  const Result r = opforge_reg({"bench", "apply_gradient_descent", "--n", "1000", "--reps", "5",
                                "--set", "tasks=2", "--cache-dir", test_cache_dir(), "--json"},
                               kNoPrune);
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const nlohmann::json j = parse_json(r);
  CHECK(j["set"] == "tasks=2");
  REQUIRE(j["side_by_side"].size() == 2);
  CHECK(j["side_by_side"][0]["label"] == "preview");
  CHECK(j["side_by_side"][1]["label"] == "registered");
  CHECK(j["side_by_side"][0]["variant"] == j["side_by_side"][1]["variant"]);
  // The per-pair ratio, preview over registered, with its quartiles.
  const nlohmann::json& p = j["paired"];
  CHECK(p["of"] == "preview");
  CHECK(p["to"] == "registered");
  CHECK(p["pairs"].get<int>() == 5);
  CHECK(p["q1"].get<double>() > 0);
  CHECK(p["q1"].get<double>() <= p["median"].get<double>());
  CHECK(p["median"].get<double>() <= p["q3"].get<double>());
  // The notch: 1.58 IQR / sqrt(pairs).
  CHECK(p["notch"].get<double>() ==
        doctest::Approx(1.58 * (p["q3"].get<double>() - p["q1"].get<double>()) / std::sqrt(5.0)));
  const Result text = opforge_reg({"bench", "apply_gradient_descent", "--n", "1000", "--reps", "5",
                                   "--set", "tasks=2", "--cache-dir", test_cache_dir()},
                                  kNoPrune);
  REQUIRE_MESSAGE(text.rc == 0, text.all());
  CHECK(contains(text.out, "preview / registered per pair: "));
  CHECK(contains(text.out, "5 pairs)"));
  for (const auto& [set, what] : std::vector<std::pair<std::string, std::string>>{
           {"tasks=0", "'tasks' = 0 is outside"}, {"tiles=2", "unknown schedule param"}}) {
    const Result bad = opforge_reg({"bench", "apply_gradient_descent", "--n", "1000", "--set", set,
                                    "--cache-dir", test_cache_dir()});
    CHECK(bad.rc != 0);
    CHECK_MESSAGE(contains(bad.err, what), bad.err);
  }
  const Result model = opforge_reg(
      {"bench", "apply_gradient_descent", "--model", "transformer-small", "--set", "tasks=2"});
  CHECK(model.rc != 0);
  CHECK(contains(model.err, "--set times a preview against the registered variant"));
}

}  // namespace
}  // namespace opforge::testing
