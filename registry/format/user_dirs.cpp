#include "opforge/user_dirs.h"

#include <cstdlib>
#include <stdexcept>

namespace opforge::registry {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::string cache_root() {
  if (const std::string dir = env("OPFORGE_CACHE_DIR"); !dir.empty()) return dir;
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/')
    return xdg + "/opforge";
  if (const std::string home = env("HOME"); !home.empty()) return home + "/.cache/opforge";
  throw std::runtime_error(
      "cannot determine the cache directory: set OPFORGE_CACHE_DIR, XDG_CACHE_HOME or HOME");
}

std::string user_registry_dir() {
  if (const std::string dir = env("OPFORGE_USER_REGISTRY"); !dir.empty()) return dir;
  try {
    return cache_root() + "/user-registry";
  } catch (const std::runtime_error&) {
    return "";
  }
}

}  // namespace opforge::registry
