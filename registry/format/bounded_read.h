// Whole-file reads that cannot hang or run away: only regular files (a FIFO would block, a
// device such as /dev/zero never ends), at most `max_bytes`, and optionally no symlink as the
// last path component (files inside a registry: a link out of it is refused, not followed).
// The one implementation for every layer: the runtime's descriptors and index, .npy inputs, rule
// files. Standard library and POSIX only.
#pragma once

#include <cstdint>
#include <string>

namespace opforge::registry {

struct ReadLimits {
  uint64_t max_bytes;
  bool follow_symlink = true;
};

// Limits for the files opforge reads.
inline constexpr ReadLimits kJsonLimits{64ull << 20, false};  // descriptors, index (registry)
inline constexpr ReadLimits kRuleLimits{1ull << 20, true};    // rule files
inline constexpr ReadLimits kNpyLimits{64ull << 30, true};    // .npy inputs (64 GiB)

// The bytes of `path`. Throws std::runtime_error "PATH: what is wrong[: reason]" for a path
// that is not a regular file (naming what it is), a symlink when `follow_symlink` is false, a
// file over the limit, and any I/O error (with errno's text).
std::string read_regular_file(const std::string& path, const ReadLimits& limits);

// "a directory", "a FIFO", "a character device", ... for a stat mode; "a regular file".
std::string file_kind(unsigned mode);

}  // namespace opforge::registry
