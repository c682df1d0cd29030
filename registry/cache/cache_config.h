// The cache's persistent settings (ccache's ccache.conf): <root>/opforge.conf, lines of
// "name = value". Only max-size so far. The environment overrides the file:
// OPFORGE_CACHE_MAXSIZE for max-size.
#pragma once

#include <cstdint>
#include <string>

namespace opforge::cache {

constexpr uint64_t kDefaultMaxSize = uint64_t(2) << 30;  // 2 GiB
constexpr const char* kMaxSizeEnv = "OPFORGE_CACHE_MAXSIZE";

// "512M", "5G", "1.5T", "123": K/M/G/T are powers of 1024, no suffix is bytes; 0 is no limit.
// Throws std::invalid_argument naming `what` and the value when it is not a size.
uint64_t parse_size(const std::string& text, const std::string& what);
std::string format_size(uint64_t bytes);   // "2.0 GiB", "512.0 MiB", "0 B"
std::string format_limit(uint64_t bytes);  // format_size, but "unlimited" for 0

struct CacheConfig {
  uint64_t max_size = kDefaultMaxSize;
  bool max_size_set = false;  // present in the file
};

std::string config_path(const std::string& root);
// The file's settings (defaults when absent); std::runtime_error naming the file and line
// for an unknown name or a bad value.
CacheConfig load_config(const std::string& root);
// Sets one setting ("max-size") and rewrites the file (temp-then-rename). Throws
// std::invalid_argument for an unknown name or a bad value, before anything is written.
void set_config(const std::string& root, const std::string& name, const std::string& value);

// Where the effective max-size comes from: "environment (OPFORGE_CACHE_MAXSIZE)", the
// config file, or "default".
struct EffectiveSize {
  uint64_t bytes;
  std::string source;
};
EffectiveSize effective_max_size(const std::string& root);

}  // namespace opforge::cache
