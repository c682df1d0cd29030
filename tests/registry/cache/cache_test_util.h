// Helpers shared by the compile-cache tests: a temp directory, whole-file reads/writes, an
// environment variable restored on scope exit, entry times, keys and error messages.
#pragma once

#include <doctest/doctest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Process.h>
#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <utility>

#include "registry/cache/compile_cache.h"

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

// Sets a file's access and modification times (the cache's LRU order).
inline void set_times(const std::string& p, std::chrono::system_clock::time_point t) {
  int fd = -1;
  REQUIRE(!llvm::sys::fs::openFileForRead(p, fd));
  REQUIRE(!llvm::sys::fs::setLastAccessAndModificationTime(fd, t));
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
}

// A valid key made from `s`.
inline std::string key_of(const std::string& s) {
  return KeyBuilder().add("k", s).hex_digest();
}

// The message of the exception `f` throws, "<no error>" when it throws none.
inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no error>";
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace opforge::cache::testing
