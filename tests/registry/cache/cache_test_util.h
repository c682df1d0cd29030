// Helpers shared by the compile-cache tests: a temp directory, whole-file reads/writes and
// an environment variable restored on scope exit.
#pragma once

#include <doctest/doctest.h>
#include <llvm/Support/FileSystem.h>
#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

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

// Saves an environment variable and restores it on scope exit.
struct EnvGuard {
  std::string name;
  bool had;
  std::string value;
  explicit EnvGuard(std::string n) : name(std::move(n)) {
    const char* v = std::getenv(name.c_str());
    had = v != nullptr;
    if (had) value = v;
  }
  ~EnvGuard() {
    if (had) {
      setenv(name.c_str(), value.c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
};

}  // namespace opforge::cache::testing
