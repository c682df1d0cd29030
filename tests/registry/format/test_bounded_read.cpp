// read_regular_file: regular files only (a FIFO refused without blocking, a device without
// reading it), at most the limit, symlinks followed only when allowed, errno in errors.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "registry/format/bounded_read.h"

namespace opforge::registry {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/opforge-read-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string error_of(const std::string& path, const ReadLimits& limits) {
  try {
    read_regular_file(path, limits);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "<no error>";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_CASE("read_regular_file: a regular file's bytes, up to the limit") {
  TempDir t;
  const fs::path f = t.path / "a.bin";
  std::ofstream(f, std::ios::binary) << std::string("ab\0cd", 5);
  CHECK(read_regular_file(f.string(), {5, true}) == std::string("ab\0cd", 5));
  CHECK(read_regular_file(f.string(), {5, false}) == std::string("ab\0cd", 5));
  CHECK(error_of(f.string(), {4, true}) == f.string() + ": is 5 bytes; the limit is 4");
  std::ofstream(t.path / "empty");
  CHECK(read_regular_file((t.path / "empty").string(), {0, true}).empty());
}

TEST_CASE("read_regular_file: FIFOs, devices and directories are refused, not read") {
  TempDir t;
  const fs::path fifo = t.path / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No writer: a blocking open would wait forever.
  CHECK(error_of(fifo.string(), {1 << 20, true}) ==
        fifo.string() + ": is a FIFO, not a regular file");
  CHECK(error_of("/dev/zero", {1 << 20, true}) ==
        "/dev/zero: is a character device, not a regular file");
  CHECK(error_of(t.path.string(), {1 << 20, true}) ==
        t.path.string() + ": is a directory, not a regular file");
  CHECK(error_of((t.path / "missing").string(), {1 << 20, true}) ==
        (t.path / "missing").string() + ": cannot open: No such file or directory");
}

TEST_CASE("read_regular_file: a symlink is followed only when allowed") {
  TempDir t;
  std::ofstream(t.path / "target") << "x";
  fs::create_symlink(t.path / "target", t.path / "link");
  CHECK(read_regular_file((t.path / "link").string(), {10, true}) == "x");
  CHECK(error_of((t.path / "link").string(), {10, false}) ==
        (t.path / "link").string() + ": is a symbolic link; not followed");
  fs::create_symlink("/dev/zero", t.path / "zero");
  CHECK(contains(error_of((t.path / "zero").string(), {10, true}), "a character device"));
}

}  // namespace
}  // namespace opforge::registry
