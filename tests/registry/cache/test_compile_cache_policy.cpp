// The cache's ccache-like policy (compile_cache.cpp): the prune that keeps a build's entries,
// least recently used first; zeroed statistics; recache.
#include <doctest/doctest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Process.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>

#include "cache_test_util.h"
#include "registry/cache/cache_config.h"
#include "registry/cache/compile_cache.h"

using namespace opforge::cache;
using namespace opforge::cache::testing;
namespace fs = llvm::sys::fs;

namespace {

Entry entry_of(const std::string& tag, size_t payload) {
  Entry e;
  e.artifacts["kernel.so"] = std::string(payload, 's') + tag;
  return e;
}

}  // namespace

TEST_CASE("prune_keeping: least recently used first, never the kept entries") {
  TempDir t;
  CompileCache c(t.path);
  const std::string ka = key_of("a"), kb = key_of("b"), kc = key_of("c");
  for (const auto& k : {ka, kb, kc}) c.store(k, entry_of(k, 4000));
  uint64_t size_a = 0, size_c = 0;
  REQUIRE(!fs::file_size(c.entry_path(ka), size_a));
  REQUIRE(!fs::file_size(c.entry_path(kc), size_c));
  const auto now = std::chrono::system_clock::now();
  set_times(c.entry_path(ka), now - std::chrono::hours(3));  // oldest, but kept below
  set_times(c.entry_path(kb), now - std::chrono::hours(2));
  set_times(c.entry_path(kc), now - std::chrono::hours(1));
  bool over = true;

  SUBCASE("within the limit after dropping the oldest unkept entry") {
    CHECK(c.prune_keeping(size_a + size_c, {ka}, &over) == 1);
    CHECK_FALSE(over);
    CHECK(fs::exists(c.entry_path(ka)));
    CHECK_FALSE(fs::exists(c.entry_path(kb)));
    CHECK(fs::exists(c.entry_path(kc)));
  }
  SUBCASE("the kept entries alone exceed the limit: everything else goes, they stay") {
    CHECK(c.prune_keeping(1, {ka, key_of("never stored")}, &over) == 2);
    CHECK(over);
    CHECK(fs::exists(c.entry_path(ka)));
    CHECK(c.stats().entries == 1);
  }
  SUBCASE("0 is no limit") {
    CHECK(c.prune_keeping(0, {}, &over) == 0);
    CHECK_FALSE(over);
    CHECK(c.stats().entries == 3);
  }
}

TEST_CASE("zero_stats resets the persistent counters") {
  TempDir t;
  CompileCache c(t.path);
  for (int i = 0; i < 3; ++i) c.count(true);
  c.count(false);
  REQUIRE(c.stats().hits == 3);
  c.zero_stats();
  CHECK(CompileCache(t.path).stats().hits == 0);
  CHECK(CompileCache(t.path).stats().misses == 0);
  c.count(false);
  CHECK(c.stats().misses == 1);
  CHECK(c.stats().hits == 0);
}

TEST_CASE("rebuild compiles and replaces an existing entry") {
  TempDir t;
  CompileCache c(t.path);
  const std::string k = key_of("r");
  c.store(k, entry_of("old", 10));
  int builds = 0;
  const Entry got = c.rebuild(k, [&] {
    ++builds;
    return entry_of("new", 10);
  });
  CHECK(builds == 1);
  CHECK(got.artifacts.at("kernel.so") == entry_of("new", 10).artifacts.at("kernel.so"));
  auto found = c.lookup(k);
  REQUIRE(found.has_value());
  CHECK(found->artifacts.at("kernel.so") == entry_of("new", 10).artifacts.at("kernel.so"));
  // An absent key is simply stored.
  c.rebuild(key_of("fresh"), [&] { return entry_of("fresh", 5); });
  CHECK(c.lookup(key_of("fresh")).has_value());
}

// Killed builds left *.opfc.lock-* files that no build, prune or clear removed.
TEST_CASE(
    "sweep_leftovers: old locks and temp files and other format versions go, live ones stay") {
  TempDir t;
  CompileCache c(t.path + "/cache");
  const std::string k = key_of("kept");
  c.store(k, entry_of("kept", 10));
  const std::string d = t.path + "/cache/v" + std::to_string(kFormatVersion);
  const auto old = std::chrono::system_clock::now() - std::chrono::hours(48);
  const std::vector<std::string> stale = {d + "/llvmcache-" + k + ".opfc.lock",
                                          d + "/llvmcache-" + k + ".opfc.lock-1a2b3c",
                                          d + "/.tmp-abcdef"};
  const std::string fresh = d + "/llvmcache-" + key_of("busy") + ".opfc.lock-9z8y7x";
  for (const auto& p : stale) {
    write_all(p, "x");
    set_times(p, old);
  }
  write_all(fresh, "x");
  fs::create_directories(t.path + "/cache/v1");
  write_all(t.path + "/cache/v1/llvmcache-" + key_of("old") + ".opfc", "old format");
  write_all(t.path + "/cache/opforge.conf", "max-size = 1G\n");
  CHECK(c.sweep_leftovers(std::chrono::hours(24)) == stale.size() + 1);
  for (const auto& p : stale) CHECK_FALSE(fs::exists(p));
  CHECK(fs::exists(fresh));  // a build may hold it now
  CHECK_FALSE(fs::exists(t.path + "/cache/v1"));
  CHECK(fs::exists(t.path + "/cache/opforge.conf"));
  CHECK(c.lookup(k).has_value());
  // prune sweeps too.
  write_all(stale[0], "x");
  set_times(stale[0], old);
  c.prune(0, 0);
  CHECK_FALSE(fs::exists(stale[0]));
}
