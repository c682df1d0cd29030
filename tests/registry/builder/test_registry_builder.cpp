// Building a registry through the cache: cold misses, warm hits, corrupt entries rebuilt,
// atomic installs, partial builds, and refusal to write over a foreign directory.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "builder_test_util.h"
#include "generators/op_table.h"
#include "opforge/runtime.hpp"
#include "registry/builder/registry_builder.h"

namespace opforge::builder {
namespace {

namespace fs = std::filesystem;
using testing::build;
using testing::TempDir;

int leftover_temps(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    n += name.find("tmp") != std::string::npos;
  }
  return n;
}

TEST_CASE("cold build misses, warm build hits, and the registry loads") {
  TempDir t;
  const fs::path reg = t.path / "reg", cache = t.path / "cache";
  BuildReport cold = build(reg, cache, {"apply_gradient_descent"});
  // The op and the bandwidth kernel it is benchmarked against, each for avx512 and avx2, and
  // the op's autoscheduled avx512 twin; its bf16m and f16m forms with their bandwidth
  // kernels (same dtypes), each for avx512 and avx2; and its loss-scaled rows.
  REQUIRE(cold.variants.size() >= 13);
  int gd = 0;
  for (const auto& row : generators::op_table()) {
    if (row.decl->name() == "apply_gradient_descent")
      gd += row.isas.size() + row.autoschedule.size();
  }
  int built_gd = 0;
  for (const auto& v : cold.variants) built_gd += v.op == "apply_gradient_descent";
  CHECK(built_gd == gd);
  for (const auto& v : cold.variants) CHECK_FALSE(v.hit);
  CHECK_FALSE(cold.runtime.hit);
  BuildReport warm = build(reg, cache, {"apply_gradient_descent"});
  for (const auto& v : warm.variants) CHECK(v.hit);
  CHECK(warm.runtime.hit);
  CHECK(leftover_temps(reg) == 0);
  CHECK(leftover_temps(cache) == 0);

  auto r = Registry::open(reg.string());
  Kernel& k = r->select("apply_gradient_descent", {}, "avx2");
  std::vector<float> var = {1, 2, 3}, delta = {1, 1, 1};
  k.call({{"var", var.data(), registry::DType::f32, {3}},
          {"delta", delta.data(), registry::DType::f32, {3}}},
         {{"alpha", 0.5}});
  CHECK(var == std::vector<float>{0.5f, 1.5f, 2.5f});
}

TEST_CASE("a corrupt cache entry is a miss, says why, and is rebuilt") {
  TempDir t;
  const fs::path reg = t.path / "reg", cache = t.path / "cache";
  BuildReport first = build(reg, cache, {"apply_gradient_descent"});
  cache::CompileCache c(cache.string());
  const std::string victim = c.entry_path(first.variants[0].key);
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  BuildReport second = build(reg, cache, {"apply_gradient_descent"});
  CHECK_FALSE(second.variants[0].hit);
  CHECK(second.variants[0].why.find("corrupt") != std::string::npos);
  CHECK(second.variants[1].hit);
  CHECK(c.lookup(first.variants[0].key).has_value());  // rebuilt and intact
  fs::remove(c.entry_path(first.variants[1].key));
  BuildReport third = build(reg, cache, {"apply_gradient_descent"});
  CHECK(third.variants[1].why.find("absent") != std::string::npos);
}

// The entry files of a cache, by name, with their contents.
std::map<std::string, std::string> cache_files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().extension() != ".opfc") continue;
    std::ifstream f(e.path(), std::ios::binary);
    out[e.path().filename().string()] = {std::istreambuf_iterator<char>(f), {}};
  }
  return out;
}

TEST_CASE("cache_from: a second cache's entries are copied, not compiled; their contents kept") {
  TempDir t;
  const fs::path first = t.path / "first", second = t.path / "second";
  build(t.path / "reg1", first, {"apply_gradient_descent"});
  const auto before = cache_files(first);
  REQUIRE(!before.empty());

  BuildOptions o;
  o.registry_dir = (t.path / "reg2").string();
  o.cache_dir = second.string();
  o.only = {"apply_gradient_descent"};
  o.cache_from = first.string();
  const BuildReport r = build_registry(o);
  CHECK(r.runtime.hit);
  CHECK(r.runtime.copied_from == first.string());
  for (const auto& v : r.variants) {
    CAPTURE(v.variant);
    CHECK(v.hit);
    CHECK(v.copied_from == first.string());
  }
  CHECK(cache_files(second).size() == before.size());  // copied into the build's own cache
  CHECK(cache_files(first) == before);                 // its entries as they were

  // Now in the build's own cache: plain hits. And a cache_from that does not exist is none.
  o.cache_from = (t.path / "absent").string();
  for (const auto& v : build_registry(o).variants) {
    CHECK(v.hit);
    CHECK(v.copied_from.empty());
  }
  o.cache_dir = (t.path / "third").string();
  for (const auto& v : build_registry(o).variants) CHECK_FALSE(v.hit);
}

TEST_CASE("a partial build keeps the registry's other ops") {
  TempDir t;
  const fs::path reg = t.path / "reg", cache = t.path / "cache";
  build(reg, cache, {"apply_gradient_descent", "apply_momentum"});
  build(reg, cache, {"apply_gradient_descent"});
  auto r = Registry::open(reg.string());
  const std::vector<std::string> ops = r->ops();
  for (const char* op : {"apply_gradient_descent", "apply_momentum", "bandwidth_s1_g1",
                         "bandwidth_s1_g1_bf16m", "bandwidth_s1_g1_f16m", "bandwidth_s2_g1",
                         "bandwidth_s2_g1_bf16m", "bandwidth_s2_g1_f16m"}) {
    CHECK_MESSAGE(std::find(ops.begin(), ops.end(), op) != ops.end(), op);
  }
  for (const auto& op : ops) {  // nothing else but bandwidth kernels
    CHECK_MESSAGE((op == "apply_gradient_descent" || op == "apply_momentum" ||
                   op.rfind("bandwidth_", 0) == 0),
                  op);
  }
  CHECK_NOTHROW(r->select("apply_momentum", {{"use_nesterov", "true"}}, "avx2"));
}

TEST_CASE("refuses to write a registry over a foreign non-empty directory; unknown ops fail") {
  TempDir t;
  fs::create_directories(t.path / "reg");
  std::ofstream(t.path / "reg" / "notes.txt") << "mine";
  CHECK_THROWS_WITH(build(t.path / "reg", t.path / "cache", {"apply_gradient_descent"}),
                    doctest::Contains("refusing"));
  CHECK(fs::exists(t.path / "reg" / "notes.txt"));
  CHECK_THROWS_WITH(build(t.path / "reg2", t.path / "cache", {"apply_adma"}),
                    doctest::Contains("unknown op 'apply_adma'"));
  CHECK_FALSE(fs::exists(t.path / "reg2"));
}

}  // namespace
}  // namespace opforge::builder
