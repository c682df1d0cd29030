// cache::read_file and cache::write_file_atomic (registry/cache/atomic_file.cpp): whole files
// of any size and content, and errors that name the path and give the errno text.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "cache_test_util.h"
#include "registry/cache/atomic_file.h"

namespace opforge::cache::testing {
namespace {

std::string error_of(const std::string& path) {
  try {
    read_file(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("read_file returns every byte, past its buffer and through NULs") {
  TempDir dir;
  std::string bytes;
  for (int k = 0; k < 200000; ++k) bytes.push_back(static_cast<char>(k * 131 % 256));
  write_file_atomic(dir.path + "/sub/f.bin", bytes);
  CHECK(read_file(dir.path + "/sub/f.bin") == bytes);
  write_file_atomic(dir.path + "/empty", "");
  CHECK(read_file(dir.path + "/empty").empty());
}

TEST_CASE("read_file errors name the path and the errno text") {
  TempDir dir;
  CHECK(error_of(dir.path + "/missing") ==
        dir.path + "/missing: cannot open: No such file or directory");
  CHECK(error_of(dir.path) == dir.path + ": read failed: Is a directory");
}

}  // namespace
}  // namespace opforge::cache::testing
