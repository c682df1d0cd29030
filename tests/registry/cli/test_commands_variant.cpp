// --variant ID on run / check / bench: an autoscheduled twin ("__auto") runs only when named;
// without it the hand-scheduled variant is selected.
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "host_isa.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

const std::string kHand = "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx512";
const std::string kAuto = kHand + "__auto";

// Whether the twins (avx512 only) run here; says once what is skipped when not.
bool has_avx512() {
  static const bool runs = [] {
    return runs_here("autoscheduled twins (avx512)",
                     Registry::open(test_registry_dir())->descriptor(kAuto).target.cpu_features);
  }();
  return runs;
}

TEST_CASE("run: hand by default, the autoscheduled twin with --variant, same results") {
  if (!has_avx512()) return;
  TempDir dir;
  const AdamInputs in({4099}, 99);
  const std::vector<std::string> inputs = concat(in.write(dir), scalar_args(adam_scalars()));
  const Result hand =
      opforge_reg(concat({"run", "apply_adam", "--isa", "avx512", "--out", dir / "hand"}, inputs));
  REQUIRE_MESSAGE(hand.rc == 0, hand.all());
  CHECK(contains(hand.out, "(" + kHand + ")"));
  const Result twin =
      opforge_reg(concat({"run", "apply_adam", "--variant", kAuto, "--out", dir / "auto"}, inputs));
  REQUIRE_MESSAGE(twin.rc == 0, twin.all());
  CHECK(contains(twin.out, "(" + kAuto + ")"));
  for (const char* name : {"var", "m", "v"}) {
    const std::string fa = dir / ("hand/" + std::string(name) + ".npy");
    const std::string fb = dir / ("auto/" + std::string(name) + ".npy");
    const std::vector<float> x = npy::to_f32(npy::read(fa), fa), y = npy::to_f32(npy::read(fb), fb);
    REQUIRE(x.size() == y.size());
    for (size_t i = 0; i < x.size(); ++i) {
      REQUIRE(std::fabs(x[i] - y[i]) <= 1e-6f * std::fabs(x[i]) + 1e-7f);
    }
  }
}

TEST_CASE("check --variant compares the named variant with the fp64 golden") {
  if (!has_avx512()) return;
  const Result r = opforge_reg({"check", "apply_adam", "--variant", kAuto, "--n", "65543"});
  CHECK_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, kAuto + " vs fp64 golden"));
  const Result lamb = opforge_reg(
      {"check", "apply_lamb", "--variant", "apply_lamb__f32__avx512__auto", "--n", "300007"});
  CHECK_MESSAGE(lamb.rc == 0, lamb.all());
}

TEST_CASE("bench: hand and autoscheduled side by side; --variant benches the one named") {
  if (!has_avx512()) return;
  const Result r = opforge_reg({"bench", "apply_adam", "--n", "10000", "--reps", "21", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("variant") == kHand);
  REQUIRE(j.contains("side_by_side"));
  REQUIRE(j.at("side_by_side").size() == 2);
  CHECK(j.at("side_by_side")[0].at("variant") == kHand);
  CHECK(j.at("side_by_side")[0].at("recipe") == "elementwise");
  CHECK(j.at("side_by_side")[1].at("variant") == kAuto);
  CHECK(j.at("side_by_side")[1].at("recipe") == "adams2019");
  for (const auto& v : j.at("side_by_side")) CHECK(v.at("pct_of_bw").get<double>() > 0);
  const Result text = opforge_reg({"bench", "apply_adam", "--n", "10000", "--reps", "21"});
  REQUIRE_MESSAGE(text.rc == 0, text.all());
  CHECK(contains(text.out, "side by side"));
  CHECK(contains(text.out, kAuto));

  const Result one = opforge_reg(
      {"bench", "apply_adam", "--variant", kAuto, "--n", "10000", "--reps", "21", "--json"});
  REQUIRE_MESSAGE(one.rc == 0, one.all());
  const auto k = nlohmann::json::parse(one.out);
  CHECK(k.at("variant") == kAuto);
  CHECK_FALSE(k.contains("side_by_side"));
  // No twin on AVX2: a single row.
  const Result avx2 = opforge_reg(
      {"bench", "apply_adam", "--isa", "avx2", "--n", "10000", "--reps", "21", "--json"});
  REQUIRE_MESSAGE(avx2.rc == 0, avx2.all());
  CHECK_FALSE(nlohmann::json::parse(avx2.out).contains("side_by_side"));
}

TEST_CASE("--variant errors: another op's variant, with --isa, unknown id") {
  // The op is checked before loading: the same usage error where the avx512 twin cannot load
  // (hidden here by a mask, whatever the CPU).
  for (const std::string mask : {"", "avx2"}) {
    CAPTURE(mask);
    const Result other = opforge_reg({"check", "apply_momentum", "--variant", kAuto},
                                     {{"OPFORGE_CPU_FEATURES", mask}});
    CHECK(other.rc == 2);
    CHECK(contains(other.err, "is a variant of apply_adam, not of apply_momentum"));
  }
  const Result both = opforge_reg({"check", "apply_adam", "--variant", kAuto, "--isa", "avx2"});
  CHECK(both.rc == 2);
  CHECK(contains(both.err, "drop --attr/--isa"));
  const Result unknown = opforge_reg({"check", "apply_adam", "--variant", "apply_adam__nope"});
  CHECK(unknown.rc == 1);
  CHECK(contains(unknown.err, "no variant 'apply_adam__nope'"));
}

}  // namespace
}  // namespace opforge::testing
