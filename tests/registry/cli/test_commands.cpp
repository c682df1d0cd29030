// The command table: --help, unknown commands, and an op's own help from its descriptor.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

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

TEST_CASE("option values: an empty value and an out-of-range number are usage errors") {
  TempDir dir;
  // `--registry ""` built into / before; now nothing is written anywhere.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"build", "--registry", "", "--only", "apply_gradient_descent"},
        {"build", "--registry=", "--only", "apply_gradient_descent"},
        {"list", "--registry", ""},
        {"run", "apply_adam", "--out", ""}}) {
    const Result r = opforge(args);
    CAPTURE(r.all());
    CHECK(r.rc == 2);
    CHECK(contains(r.err, "needs a non-empty"));
  }
  CHECK_FALSE(fs::exists("/index.json"));
  const std::vector<std::pair<std::vector<std::string>, std::string>> ranges = {
      {{"bench", "apply_adam", "--threads", "-5"}, "--threads: -5 is outside [1, 1024]"},
      {{"bench", "apply_adam", "--threads", "0"}, "--threads: 0 is outside [1, 1024]"},
      {{"build", "--jobs", "100000"}, "--jobs: 100000 is outside"},
      {{"bench", "apply_adam", "--reps", "0"}, "--reps: 0 is outside"},
      {{"report", "--html", dir / "r", "--budget-ms", "-1"}, "--budget-ms: -1 is outside"},
      {{"cache", "prune", "--max-age", "-3", "--cache-dir", dir / "cache"},
       "--max-age: -3 is outside"}};
  for (const auto& [args, message] : ranges) {
    const bool reads_registry = args[0] != "cache" && args[0] != "build";
    const Result r = reads_registry ? opforge_reg(args) : opforge(args);
    CAPTURE(r.all());
    CHECK(r.rc == 2);
    CHECK(contains(r.err, message));
  }
  CHECK_FALSE(fs::exists(dir / "r"));
  CHECK_FALSE(fs::exists(dir / "cache"));
}

// From a QA pass: options that did nothing were accepted silently, and some messages misled.
TEST_CASE("options that do not apply are errors; numbers beyond int64 are named so") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"bench", "apply_adam", "--warm"}, "--warm does not apply here"},
      {{"bench", "apply_adam", "--rows", "5"}, "--rows does not apply here"},
      {{"bench", "layer_norm", "--n", "5"}, "--n does not apply here: NN ops take"},
      {{"bench", "nn", "--n", "5"}, "--n does not apply here"},
      {{"bench", "sparse_apply_adagrad", "--n", "5"}, "--n does not apply here: sparse ops"},
      {{"bench", "apply_adam", "--model", "transformer-small", "--warm"},
       "--warm does not apply here"},
      {{"bench", "apply_adam", "--split", "1000000", "--shape", "x=4"},
       "--shape does not apply here"},
      // It called layer_norm "a sparse op".
      {{"bench", "layer_norm", "--model", "transformer-small"}, "--model does not apply here"},
      {{"list", "--json", "--markdown"}, "--json and --markdown each ask for a different output"},
      {{"inspect", "apply_adam", "--stmt", "--asm", "--llvm"},
       "--stmt, --asm and --llvm each ask for a different output"},
      {{"inspect", "apply_adam", "--asm", "--n", "1000"}, "--n marks the cases"},
      {{"bench", "apply_adam", "--n", "1e99"}, "--n: 1e99 is too large"},
      {{"bench", "apply_adam", "--n", "inf"}, "--n: inf is too large"},
      {{"bench", "apply_adam", "--n", "2.5"}, "--n: expected an integer, got '2.5'"},
      {{"bench", "apply_adam", "--n", "1e-400"}, "--n: expected an integer, got '1e-400'"},
      // 0 is the natural width, so the range says so.
      {{"bench", "apply_adam", "--set", "vector=65"}, "'vector' = 65 is outside [0, 64]"}};
  for (const auto& [args, message] : cases) {
    const Result r = opforge_reg(args);
    CAPTURE(r.all());
    CHECK(r.rc != 0);
    CHECK(contains(r.err, message));
    CHECK(r.out.empty());
  }
  // libgomp warned about OMP_NUM_THREADS=0 before the range error.
  const Result zero = opforge_reg({"bench", "apply_adam", "--threads", "0"});
  CHECK(contains(zero.err, "--threads: 0 is outside"));
  CHECK_FALSE(contains(zero.err, "libgomp"));
}

TEST_CASE("bench: --reps is the number of timed calls; one thread has one bandwidth row") {
  const Result r = opforge_reg(
      {"bench", "apply_adam", "--n", "1000", "--reps", "2", "--threads", "1", "--json"});
  CAPTURE(r.all());
  REQUIRE(r.rc == 0);
  const json j = json::parse(r.out);
  CHECK(j["reps"] == 2);  // was 5: one per round of five
  CHECK(j["host"]["cpu_model"].get<std::string>().size() > 0);
  CHECK(j["host"]["cpu_features"].is_array());
  const Result text =
      opforge_reg({"bench", "apply_adam", "--n", "1000", "--reps", "5", "--threads", "1"});
  CAPTURE(text.all());
  CHECK(contains(text.out, "bandwidth (1 thr)"));
  CHECK(text.out.find("bandwidth (1 thr)") == text.out.rfind("bandwidth (1 thr)"));
  CHECK(contains(text.out, " kB and this CPU's L3"));  // 1000 elements: kB, not "0 MB"
  CHECK_FALSE(contains(text.out, "reads 0 MB"));
}

// A file where a directory belongs was read as an empty registry or cache ("index.json
// missing", "entries 0"), and `report` measured for minutes before refusing its --html.
TEST_CASE("option values: a file given as a directory is named at once") {
  TempDir dir;
  const std::string file = dir / "afile";
  std::ofstream(file) << "x";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"list", "--registry", file}, "op registry " + file + ": not a directory"},
      {{"build", "--registry", file, "--only", "apply_gradient_descent"},
       "op registry " + file + ": not a directory"},
      {{"cache", "stats", "--cache-dir", file}, "compile cache " + file + ": not a directory"},
      {{"build", "--registry", dir / "reg", "--cache-dir", file},
       "compile cache " + file + ": not a directory"},
      {{"autoschedule", "--check", "--out", file}, "--out " + file + ": not a directory"}};
  for (const auto& [args, message] : cases) {
    const Result r = opforge(args);
    CAPTURE(r.all());
    CHECK(r.rc == 2);
    CHECK(contains(r.err, message));
  }
  const Result run = opforge_reg({"run", "apply_gradient_descent", "--out", file});
  CAPTURE(run.all());
  CHECK(run.rc == 2);
  CHECK(contains(run.err, "--out " + file + ": not a directory"));
  const Result rep = opforge_reg({"report", "--html", file});
  CAPTURE(rep.all());
  CHECK(rep.rc != 0);
  CHECK(contains(rep.err, file + " exists and is not an opforge report (not a directory)"));
  CHECK_FALSE(contains(rep.out + rep.err, "measured"));  // refused before measuring
  CHECK_FALSE(fs::exists(dir / "reg"));
}

// Found by a QA pass as a new user: each is refused with the offending thing named, before any
// work, and nothing is written.
TEST_CASE("option values: what would be ignored or found out late is refused at once") {
  TempDir dir;
  const Result scalar = opforge_reg({"check", "apply_adam", "--n", "5", "--scalar", "nope=1"});
  CAPTURE(scalar.all());
  CHECK(scalar.rc == 2);
  CHECK(contains(scalar.err, "--scalar 'nope': apply_adam has no such scalar argument"));

  const Result cache = opforge({"cache", "clear", "--cache-dir", dir / "nope"});
  CAPTURE(cache.all());
  CHECK(cache.rc == 2);
  CHECK(contains(cache.err, "no compile cache at " + (dir / "nope")));
  CHECK_FALSE(fs::exists(dir / "nope"));

  const Result domain = opforge_reg({"report", "--html", dir / "rep", "--only", "apply_adam",
                                     "--scalar", "beta1=5", "--sizes", "1e3"});
  CAPTURE(domain.all());
  CHECK(domain.rc == 2);
  CHECK(contains(domain.err, "--scalar beta1=5: outside apply_adam's domain"));
  CHECK_FALSE(fs::exists(dir / "rep"));

  // --out under a regular file: refused before any family is timed.
  const std::string file = dir / "afile";
  std::ofstream(file) << "x";
  const Result out = opforge_reg({"tune", "--ops", "apply_gradient_descent", "--params", "tasks",
                                  "--sizes", "1e3", "--threads", "1", "--out", file + "/t.json"});
  CAPTURE(out.all());
  CHECK(out.rc == 2);
  CHECK(contains(out.err, "--out " + file + "/t.json: cannot make"));
  CHECK_FALSE(contains(out.out + out.err, "candidates"));

  const Result dry = opforge_reg({"tune", "--dry-run", "--json"});
  CAPTURE(dry.all());
  REQUIRE(dry.rc == 0);
  const json j = json::parse(dry.out);
  CHECK(j.at("families").size() > 0);
  CHECK(j.at("tuning_file").get<std::string>().size() > 0);
}

}  // namespace
}  // namespace opforge::testing
