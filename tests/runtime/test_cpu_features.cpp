// OPFORGE_CPU_FEATURES: the mask's grammar (mask_cpu_features, on made-up hosts), and in this
// process the mask "avx2", set before the runtime first reads it, so that selection under a
// mask is checked on every run of the suite, masked or not.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <functional>

#include "generators/isa.h"
#include "host_isa.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

// Before main, so before any cpu_supports call: the runtime reads the variable once.
const bool kMaskSet = setenv("OPFORGE_CPU_FEATURES", "avx2", 1) == 0;

using Features = std::vector<std::string>;

const Features kAvx2Level = {"sse4.1", "sse4.2", "avx", "avx2", "fma", "f16c"};
const Features kAvx512Level = {"sse4.1",  "sse4.2",   "avx",      "avx2",     "fma",     "f16c",
                               "avx512f", "avx512cd", "avx512vl", "avx512bw", "avx512dq"};
const Features kAvx512Bf16Level = [] {
  Features f = kAvx512Level;
  for (const char* more : {"avx512ifma", "avx512vbmi", "avx512vnni", "avx512bf16"})
    f.push_back(more);
  return f;
}();

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("mask_cpu_features: levels, feature lists and removals, in host order") {
  const Features& all = known_cpu_features();  // a host with every feature
  CHECK(mask_cpu_features("avx2", all) == kAvx2Level);
  CHECK(mask_cpu_features("avx512", all) == kAvx512Level);
  CHECK(mask_cpu_features("avx512_bf16", all) == kAvx512Bf16Level);
  CHECK(mask_cpu_features("none", all).empty());
  // An explicit list, in any order and with spaces, is the same as the level.
  CHECK(mask_cpu_features("avx2,fma,f16c,sse4.1,sse4.2,avx", all) == kAvx2Level);
  CHECK(mask_cpu_features(" f16c , avx2,fma,avx , sse4.2,sse4.1", all) == kAvx2Level);
  CHECK(mask_cpu_features("avx2,avx512f", all) ==
        Features{"sse4.1", "sse4.2", "avx", "avx2", "fma", "f16c", "avx512f"});
  CHECK(mask_cpu_features("fma", all) == Features{"fma"});
  // Removals: from the listed features, or from every host feature when nothing is listed.
  Features no_dq = kAvx512Level;
  no_dq.pop_back();
  CHECK(mask_cpu_features("avx512,-avx512dq", all) == no_dq);
  CHECK(mask_cpu_features("-avx512dq,avx512", all) == no_dq);  // removals apply last
  Features no_f = all;
  no_f.erase(std::find(no_f.begin(), no_f.end(), "avx512f"));
  CHECK(mask_cpu_features("-avx512f", all) == no_f);
  // "-avx2" hides the avx2 feature alone (a removal names a feature, not a level).
  CHECK(mask_cpu_features("avx2,-avx2", all) == Features{"sse4.1", "sse4.2", "avx", "fma", "f16c"});
}

TEST_CASE("mask_cpu_features never claims a feature the host lacks") {
  CHECK(mask_cpu_features("avx512", kAvx2Level) == kAvx2Level);
  CHECK(mask_cpu_features("avx512f,avx512bf16", kAvx2Level).empty());
  CHECK(mask_cpu_features("-avx512f", kAvx2Level) == kAvx2Level);
  CHECK(mask_cpu_features("avx2", {}).empty());
}

TEST_CASE("mask_cpu_features: a bad item is an Error naming it") {
  const Features& all = known_cpu_features();
  const std::string unknown = error_of([&] { mask_cpu_features("avx2,avx3", all); });
  CHECK(contains(unknown, "OPFORGE_CPU_FEATURES='avx2,avx3': "));
  CHECK(contains(unknown, "unknown CPU feature or level 'avx3' (did you mean 'avx2'?)"));
  CHECK(contains(unknown, "known: levels avx2 avx512 avx512_bf16 none; features sse4.1"));
  CHECK(contains(error_of([&] { mask_cpu_features("AVX2", all); }), "'AVX2'"));
  CHECK(contains(error_of([&] { mask_cpu_features("avx512fp16", all); }), "'avx512fp16'"));
  CHECK(contains(error_of([&] { mask_cpu_features("-sse5", all); }),
                 "'-sse5': 'sse5' is not a CPU feature"));
  CHECK(contains(error_of([&] { mask_cpu_features("-avx512", all); }),
                 "'avx512' is not a CPU feature (a level"));
  for (const char* empty : {"avx2,,fma", "avx2,", ",avx2", " ", "-"}) {
    CAPTURE(empty);
    const std::string msg = error_of([&] { mask_cpu_features(empty, all); });
    CHECK((contains(msg, "empty item") || contains(msg, "'-': '' is not a CPU feature")));
  }
}

TEST_CASE("every registry ISA's features lie within the mask level of the same name") {
  // So OPFORGE_CPU_FEATURES=avx2 keeps every avx2 variant and =avx512 every avx512 one.
  for (const auto& isa : generators::isas()) {
    CAPTURE(isa.name);
    CHECK(mask_cpu_features(isa.name, isa.cpu_features) == isa.cpu_features);
  }
}

TEST_CASE("this process runs under OPFORGE_CPU_FEATURES=avx2: avx512 variants are hidden") {
  REQUIRE(kMaskSet);
  const CpuFeatures& c = cpu_features();
  CHECK(c.mask == "avx2");
  CHECK(c.visible == mask_cpu_features("avx2", c.host));
  for (const auto& f : known_cpu_features()) {
    CAPTURE(f);
    const bool in_level = std::find(kAvx2Level.begin(), kAvx2Level.end(), f) != kAvx2Level.end();
    const bool on_host = std::find(c.host.begin(), c.host.end(), f) != c.host.end();
    CHECK(cpu_supports(f) == (in_level && on_host));
  }
  CHECK_FALSE(cpu_supports("avx512f"));
  CHECK_FALSE(cpu_supports("not-a-feature"));
  REQUIRE_MESSAGE(cpu_supports("avx2"), "this CPU cannot run the AVX2 baseline");

  auto reg = Registry::open(test_registry_dir());
  const std::string avx512 = "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx512";
  const std::string avx2 = "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx2";
  CHECK(reg->select("apply_adam").descriptor().variant == avx2);
  const std::string forced = error_of([&] { reg->select("apply_adam", {}, "avx512"); });
  CHECK(contains(forced, "op 'apply_adam': ISA avx512 needs CPU feature avx512"));
  const std::string loaded = error_of([&] { reg->load(avx512); });
  CHECK(contains(loaded, "variant " + avx512 + " (ISA avx512) needs CPU feature avx512"));
  // On an AVX-512 host the error says the mask hides it; elsewhere the CPU lacks it anyway.
  const bool host_512 = std::find(c.host.begin(), c.host.end(), "avx512f") != c.host.end();
  if (host_512) {
    CHECK(contains(forced, "(hidden by OPFORGE_CPU_FEATURES=avx2)"));
  } else {
    note_skipped("the mask's own effect on avx512 selection", "CPU lacks avx512f itself");
  }
  // choose() reads descriptors only: a forced avx512 variant is still described.
  CHECK(reg->choose("apply_adam", {}, "avx512").variant == avx512);
  CHECK(reg->choose("apply_adam").variant == avx2);
  // Every selection of every op lands on a variant the masked CPU runs.
  const HostIsas isas = host_isas(*reg);
  CHECK(isas.runnable == std::vector<std::string>{"avx2"});
  for (const auto& op : reg->ops()) {
    CAPTURE(op);
    for (const auto& f : reg->choose(op).target.cpu_features) CHECK(cpu_supports(f));
  }
}

}  // namespace
}  // namespace opforge::testing
