// cache_config: max-size parsing and formatting, the config file (temp-then-rename), the
// environment override and the errors of each.
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
