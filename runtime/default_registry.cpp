// Registry::default_dir(): where a registry is looked for when the caller names none.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "opforge/runtime.hpp"

namespace opforge {
namespace {

// The real directory of the file that holds this code (libopforge_runtime.so), or "".
std::string library_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&library_dir), &info) || !info.dli_fname) return "";
  char buf[PATH_MAX];
  if (!realpath(info.dli_fname, buf)) return "";
  std::string path = buf;
  return path.substr(0, path.find_last_of('/'));
}

std::string real_dir(const std::string& dir) {
  char buf[PATH_MAX];
  return realpath(dir.c_str(), buf) ? std::string(buf) : dir;
}

}  // namespace

std::string Registry::default_dir() {
  const char* env = std::getenv("OPFORGE_REGISTRY");
  if (env && *env) return env;
  // Decided by where the library lies, not by which registry exists: an installed runtime
  // never falls back to a build tree that may be gone or belong to another version.
  static const std::string dir = [] {
    const std::string lib = library_dir();
    if (lib.empty() || lib == real_dir(OPFORGE_BUILD_LIBDIR))
      return std::string(OPFORGE_DEFAULT_REGISTRY);
    const std::string installed = lib + "/" + OPFORGE_REGISTRY_FROM_LIBDIR;
    return real_dir(installed);
  }();
  return dir;
}

std::string cli_path() {
  const std::string lib = library_dir();
  const std::string path = lib.empty() || lib == real_dir(OPFORGE_BUILD_LIBDIR)
                               ? std::string(OPFORGE_BUILD_CLI)
                               : real_dir(lib + "/" + OPFORGE_CLI_FROM_LIBDIR);
  return access(path.c_str(), X_OK) == 0 ? path : "";
}

}  // namespace opforge
