// opforge check --replay DIR: the calls a precision dump holds (opforge run --dump,
// $OPFORGE_DUMP_DIR) re-run through their fp64 goldens. Every call `check --all` makes on one
// ISA (dense, sparse with duplicate indices, bf16 and 8-bit states, FP8 gradients, rule ops)
// replays green; an output moved past its bound fails at its call, which the summary names
// first; unfinished and damaged entries are reported, not trusted.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "cli_util.h"
#include "host_isa.h"
#include "opforge/npy.hpp"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("check --replay: every call of check --all on one ISA replays green") {
  const HostIsas host = host_isas(*Registry::open(test_registry_dir()), "apply_adam");
  REQUIRE(!host.runnable.empty());
  const std::string isa = host.runnable.front();
  TempDir dir;
  const std::string dump = dir / "dump";
  const Result all = opforge_reg({"check", "--all", "--isa", isa, "--n", "1001", "--json"},
                                 {{"OPFORGE_DUMP_DIR", dump}});
  REQUIRE_MESSAGE(all.rc == 0, all.all());
  // One entry per kernel call; NN variants call once per reference problem that applies, and
  // leave nothing for the shapes their algorithm refuses.
  const int calls = static_cast<int>(entries(dump).size());
  CHECK(calls > json::parse(all.out)["passed"].get<int>());

  const Result r = opforge({"check", "--replay", dump, "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json j = json::parse(r.out);
  CHECK(j["ok"] == calls);
  CHECK(j["failed"] == 0);
  CHECK(j["first_failed"] == "");
  std::set<std::string> kinds;
  for (const auto& c : j["calls"]) {
    const std::string v = c["variant"];
    for (const char* k : {"sparse_apply_ftrl", "__bf16s__", "__q8s__", "__e4m3g__", "adam_rule",
                          "multi_tensor_apply_lamb", "layer_norm", "conv2d"})
      if (contains(v, k)) kinds.insert(k);
    CHECK(c["states"].size() >= 1);
  }
  CHECK(kinds.size() == 8);
}

TEST_CASE("check --replay: an NN call against its reference; one output element moved fails") {
  TempDir dir;
  const std::string dump = dir / "dump";
  const Result c = opforge_reg({"check", "softmax"}, {{"OPFORGE_DUMP_DIR", dump}});
  REQUIRE_MESSAGE(c.rc == 0, c.all());
  const auto e = entries(dump);
  REQUIRE(e.size() >= 10);
  CHECK(opforge({"check", "--replay", dump}).rc == 0);
  npy::Array y = npy::read(e[3] / "out.y.npy");
  float x;
  std::memcpy(&x, y.data.data(), 4);
  x = x * 1.001f + 1e-4f;
  std::memcpy(y.data.data(), &x, 4);
  npy::write_atomic(e[3] / "out.y.npy", y);
  const Result bad = opforge({"check", "--replay", dump});
  CHECK(bad.rc == 1);
  CHECK(contains(bad.out, "first call past its bound: " + e[3].filename().string()));
}

TEST_CASE("check --replay: a multi-tensor call's golden is per model tensor") {
  // LAMB over a model of several tensors; replayed as dumped it passes, replayed as if the
  // model were one tensor (its chunk table all 0) the trust ratios differ and it fails.
  TempDir dir;
  const std::string dump = dir / "dump";
  const Result c = opforge_reg({"check", "multi_tensor_apply_lamb", "--n", "3001"},
                               {{"OPFORGE_DUMP_DIR", dump}});
  REQUIRE_MESSAGE(c.rc == 0, c.all());
  const auto e = entries(dump);
  REQUIRE(e.size() == 1);
  CHECK(opforge({"check", "--replay", dump}).rc == 0);
  npy::Array table = npy::read(e[0] / "in.segments.npy");
  CHECK(table.elements() == 12);  // 3001 elements in chunks of 256
  CHECK(table.data[4 * 11] > 0);  // more than one model tensor
  std::fill(table.data.begin(), table.data.end(), 0);
  npy::write_atomic(e[0] / "in.segments.npy", table);
  const Result one = opforge({"check", "--replay", dump});
  CHECK(one.rc == 1);
  CHECK(contains(one.out, "FAILED  " + e[0].filename().string()));
}

TEST_CASE("check --replay: a perturbed output fails at its call; unfinished, damaged entries") {
  TempDir dir;
  const AdamInputs in({1001}, 3);
  const std::vector<std::string> run = concat(
      concat({"run", "apply_adam", "--out", dir / "out", "--dump", dir / "dump"}, in.write(dir)),
      scalar_args(adam_scalars()));
  for (int k = 0; k < 3; ++k) {
    const Result r = opforge_reg(run);
    REQUIRE_MESSAGE(r.rc == 0, r.all());
  }
  const auto e = entries(dir / "dump");
  REQUIRE(e.size() == 3);
  CHECK(opforge({"check", "--replay", dir / "dump"}).rc == 0);

  // One element of call 2's var moved by 1e-3 relative: past Adam's bound.
  npy::Array var = npy::read(e[1] / "out.var.npy");
  float x;
  std::memcpy(&x, var.data.data() + 4 * 5, 4);
  x *= 1.001f;
  std::memcpy(var.data.data() + 4 * 5, &x, 4);
  npy::write_atomic(e[1] / "out.var.npy", var);
  const Result bad = opforge({"check", "--replay", dir / "dump"});
  CHECK(bad.rc == 1);
  CHECK(contains(bad.out, "ok      " + e[0].filename().string()));
  CHECK(contains(bad.out, "FAILED  " + e[1].filename().string()));
  CHECK(contains(bad.out, "var: max abs"));
  CHECK(contains(bad.out, "(1 of 1001 past the bound)"));
  CHECK(contains(bad.out, "3 calls: 2 ok, 1 failed, 0 skipped"));
  CHECK(contains(bad.out, "first call past its bound: " + e[1].filename().string()));

  fs::remove(e[2] / "call.json");  // a call that did not finish
  std::ofstream(e[0] / "in.m.npy") << "truncated";
  const Result worse = opforge({"check", "--replay", dir / "dump", "--json"});
  CHECK(worse.rc == 1);
  const json j = json::parse(worse.out);
  CHECK(j["calls"][0]["status"] == "FAILED");
  CHECK(contains(j["calls"][0]["detail"], "cannot replay"));
  CHECK(contains(j["calls"][0]["detail"], "in.m.npy"));
  CHECK(j["calls"][2]["status"] == "skipped");
  CHECK(contains(j["calls"][2]["detail"], "no call.json"));
  CHECK(contains(j["first_failed"], e[0].filename().string()));

  const Result none = opforge({"check", "--replay", dir / "missing"});
  CHECK(none.rc == 2);
  CHECK(contains(none.err, "not a directory"));
  const Result both = opforge({"check", "apply_adam", "--replay", dir / "dump"});
  CHECK(both.rc == 2);
  CHECK(contains(both.err, "name no OP"));
}

TEST_CASE("check --replay: a multi-tensor call that skips on inf, every tensor, as the kernel") {
  // A model of three tensors (chunks 0-1, 2, 3 of 256 elements), an inf in the first one's
  // gradient: the kernel sets found_inf and leaves all three untouched, and so must the
  // golden (per tensor, the other two would update).
  TempDir dir;
  const int64_t n = 1024;
  std::vector<std::string> args = {"run",    "multi_tensor_apply_lamb",
                                   "--attr", "unscale=1",
                                   "--attr", "skip_if_nonfinite=1",
                                   "--out",  dir / "out",
                                   "--dump", dir / "dump"};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.1f, 1.f);
  for (const char* name : {"var", "m", "v", "grad"}) {
    std::vector<float> x(n);
    for (auto& e : x) e = u(rng);
    if (std::string(name) == "grad") x[10] = std::numeric_limits<float>::infinity();
    npy::write_atomic(dir / (std::string(name) + ".npy"), npy::from_f32(x, {n}));
    args.insert(args.end(),
                {"--in", std::string(name) + "=" + (dir / (std::string(name) + ".npy"))});
  }
  npy::write_atomic(dir / "found_inf.npy", npy::from_f32({0.f}, {1}));
  npy::Array seg;
  seg.descr = "<i4";
  seg.shape = {4};
  const int32_t table[4] = {0, 0, 1, 2};
  seg.data.assign(reinterpret_cast<const uint8_t*>(table),
                  reinterpret_cast<const uint8_t*>(table) + 16);
  npy::write_atomic(dir / "segments.npy", seg);
  args.insert(args.end(), {"--in", "found_inf=" + (dir / "found_inf.npy"), "--in",
                           "segments=" + (dir / "segments.npy")});
  for (const auto& [k, v] : std::map<std::string, std::string>{{"lr", "0.001"},
                                                               {"beta1", "0.9"},
                                                               {"beta2", "0.999"},
                                                               {"epsilon", "1e-6"},
                                                               {"weight_decay", "0.01"},
                                                               {"step", "3"},
                                                               {"inv_scale", "0.5"}})
    args.insert(args.end(), {"--scalar", k + "=" + v});
  const Result r = opforge_reg(args);
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(npy::to_f32(npy::read(dir / "out/found_inf.npy"), "found_inf")[0] == 1.f);
  CHECK(npy::read(dir / "out/var.npy").data == npy::read(dir / "var.npy").data);
  const Result replay = opforge({"check", "--replay", dir / "dump"});
  CHECK_MESSAGE(replay.rc == 0, replay.all());
}

}  // namespace
}  // namespace opforge::testing
