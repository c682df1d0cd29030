#include "registry/cache/cache_config.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "registry/cache/atomic_file.h"

namespace opforge::cache {

namespace {

constexpr const char* kConfigFile = "opforge.conf";

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

uint64_t parse_size(const std::string& text, const std::string& what) {
  auto bad = [&] {
    return std::invalid_argument(what + " '" + text +
                                 "': expected a size like 512M or 5G (suffixes K, M, G, T: "
                                 "powers of 1024; 0 for no limit)");
  };
  const std::string s = trim(text);
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) throw bad();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno || !std::isfinite(v) || v < 0) throw bad();
  const std::string suffix = end;
  double mult = 1;
  if (suffix.empty()) {
    mult = 1;
  } else if (suffix == "K" || suffix == "k") {
    mult = 1024.0;
  } else if (suffix == "M" || suffix == "m") {
    mult = 1024.0 * 1024;
  } else if (suffix == "G" || suffix == "g") {
    mult = 1024.0 * 1024 * 1024;
  } else if (suffix == "T" || suffix == "t") {
    mult = 1024.0 * 1024 * 1024 * 1024;
  } else {
    throw bad();
  }
  const double bytes = v * mult;
  if (bytes >= 18e18) throw bad();  // past uint64_t
  return static_cast<uint64_t>(bytes);
}

std::string format_limit(uint64_t bytes) {
  return bytes == 0 ? "unlimited" : format_size(bytes);
}

std::string format_size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string config_path(const std::string& root) {
  return root + "/" + kConfigFile;
}

CacheConfig load_config(const std::string& root) {
  CacheConfig c;
  const std::string path = config_path(root);
  std::ifstream in(path);
  if (!in) return c;  // no file: defaults
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const size_t eq = t.find('=');
    const std::string where = path + ":" + std::to_string(n);
    if (eq == std::string::npos) throw std::runtime_error(where + ": expected 'name = value'");
    const std::string name = trim(t.substr(0, eq)), value = trim(t.substr(eq + 1));
    if (name != "max-size") throw std::runtime_error(where + ": unknown setting '" + name + "'");
    try {
      c.max_size = parse_size(value, "max-size");
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(where + ": " + e.what());
    }
    c.max_size_set = true;
  }
  return c;
}

void set_config(const std::string& root, const std::string& name, const std::string& value) {
  if (name != "max-size") {
    throw std::invalid_argument("unknown cache setting '" + name + "' (settings: max-size)");
  }
  parse_size(value, "max-size");  // validate before writing
  load_config(root);              // a broken file is reported, not silently replaced
  write_file_atomic(config_path(root),
                    "# opforge compile cache settings (opforge cache config NAME VALUE)\n"
                    "max-size = " +
                        trim(value) + "\n");
}

EffectiveSize effective_max_size(const std::string& root) {
  if (const char* env = std::getenv(kMaxSizeEnv); env && *env) {
    try {
      return {parse_size(env, kMaxSizeEnv), std::string("environment (") + kMaxSizeEnv + ")"};
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(e.what());
    }
  }
  const CacheConfig c = load_config(root);
  return {c.max_size, c.max_size_set ? config_path(root) : "default"};
}

}  // namespace opforge::cache
