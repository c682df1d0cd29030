// The cache's ccache-like policy: max-size parsing and its config file, the environment
// override, the automatic prune that keeps a build's entries, zeroed statistics, recache.
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

// Names in `dir`, for checking that no temp file is left behind.
size_t files_in(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) ++n;
  return n;
}

void set_times(const std::string& p, std::chrono::system_clock::time_point t) {
  int fd = -1;
  REQUIRE(!fs::openFileForRead(p, fd));
  REQUIRE(!fs::setLastAccessAndModificationTime(fd, t));
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
}

std::string key_of(const std::string& s) {
  return KeyBuilder().add("k", s).hex_digest();
}

Entry entry_of(const std::string& tag, size_t payload) {
  Entry e;
  e.artifacts["kernel.so"] = std::string(payload, 's') + tag;
  return e;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no error>";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("parse_size: bytes, K/M/G/T as powers of 1024, 0 for no limit") {
  CHECK(parse_size("0", "x") == 0);
  CHECK(parse_size("123", "x") == 123);
  CHECK(parse_size("1K", "x") == 1024);
  CHECK(parse_size("1.5k", "x") == 1536);
  CHECK(parse_size("512M", "x") == 536870912ull);
  CHECK(parse_size("2G", "x") == 2147483648ull);
  CHECK(parse_size("5G", "x") == 5368709120ull);
  CHECK(parse_size("1T", "x") == 1099511627776ull);
  CHECK(kDefaultMaxSize == 2147483648ull);
  for (const char* bad : {"", "G", "5X", "5GB", "-1", "1e999", "nan", "5 G", "abc"}) {
    CAPTURE(bad);
    const std::string msg = message_of([&] { parse_size(bad, "max-size"); });
    CHECK(msg.rfind(std::string("max-size '") + bad + "': expected a size", 0) == 0);
  }
}

TEST_CASE("format_size") {
  CHECK(format_size(0) == "0 B");
  CHECK(format_limit(0) == "unlimited");
  CHECK(format_limit(1024) == "1.0 KiB");
  CHECK(format_size(100) == "100 B");
  CHECK(format_size(1536) == "1.5 KiB");
  CHECK(format_size(2147483648ull) == "2.0 GiB");
}

TEST_CASE("config: max-size is stored in <root>/opforge.conf, temp-then-rename") {
  TempDir t;
  const std::string root = t.path + "/cache";
  EnvGuard env(kMaxSizeEnv);
  unsetenv(kMaxSizeEnv);
  CHECK(load_config(root).max_size == kDefaultMaxSize);
  CHECK_FALSE(load_config(root).max_size_set);
  CHECK(effective_max_size(root).bytes == kDefaultMaxSize);
  CHECK(effective_max_size(root).source == "default");

  set_config(root, "max-size", "5G");
  CHECK(config_path(root) == root + "/opforge.conf");
  CHECK(contains(read_all(config_path(root)), "max-size = 5G\n"));
  CHECK(files_in(root) == 1);  // no temp file left
  CHECK(load_config(root).max_size == 5368709120ull);
  CHECK(effective_max_size(root).source == config_path(root));

  // A bad value or name is refused before anything is written.
  const std::string before = read_all(config_path(root));
  CHECK(contains(message_of([&] { set_config(root, "max-size", "5X"); }), "'5X'"));
  CHECK(contains(message_of([&] { set_config(root, "max-sise", "1G"); }), "'max-sise'"));
  CHECK(read_all(config_path(root)) == before);

  SUBCASE("the environment overrides the file") {
    setenv(kMaxSizeEnv, "100M", 1);
    CHECK(effective_max_size(root).bytes == 104857600ull);
    CHECK(contains(effective_max_size(root).source, "OPFORGE_CACHE_MAXSIZE"));
    setenv(kMaxSizeEnv, "lots", 1);
    const std::string msg = message_of([&] { effective_max_size(root); });
    CHECK(contains(msg, "OPFORGE_CACHE_MAXSIZE 'lots'"));
  }
  SUBCASE("a broken file names itself and the line") {
    write_all(config_path(root), "# comment\nmax-size = 1G\ncolour = blue\n");
    CHECK(message_of([&] { load_config(root); }) ==
          config_path(root) + ":3: unknown setting 'colour'");
    write_all(config_path(root), "max-size = huge\n");
    CHECK(contains(message_of([&] { load_config(root); }), config_path(root) + ":1: "));
    // Setting a value does not silently replace a broken file either.
    CHECK(contains(message_of([&] { set_config(root, "max-size", "1G"); }),
                   config_path(root) + ":1: "));
  }
}

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
