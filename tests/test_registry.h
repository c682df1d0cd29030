// Where the tests find the registry and cache that ctest's build_test_registry fixture made.
#pragma once

#include <cstdlib>
#include <string>

namespace opforge::testing {

inline std::string test_registry_dir() {
  const char* e = std::getenv("OPFORGE_TEST_REGISTRY");
  return e && *e ? e : OPFORGE_TEST_REGISTRY;
}
inline std::string test_cache_dir() {
  const char* e = std::getenv("OPFORGE_TEST_CACHE");
  return e && *e ? e : OPFORGE_TEST_CACHE;
}
inline std::string opforge_exe() {
  return OPFORGE_EXE;
}

}  // namespace opforge::testing
