// Helpers shared by the compile-cache tests: a temp directory and whole-file reads/writes.
#pragma once

#include <doctest/doctest.h>
#include <llvm/Support/FileSystem.h>
#include <stdlib.h>

#include <fstream>
#include <iterator>
#include <string>

namespace opforge::cache::testing {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/opforge-cache-test-XXXXXX";
    char* p = mkdtemp(tmpl);
    REQUIRE(p != nullptr);
    path = p;
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
};

inline std::string read_all(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_all(const std::string& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

}  // namespace opforge::cache::testing
