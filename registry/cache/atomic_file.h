// Whole-file writes that readers see complete or not at all, for the cache, builder and CLI:
// registry/format/atomic_write.h (a temp file in the target's directory, renamed into place)
// with parent directories created and a fixed mode.
#pragma once

#include <string>

namespace opforge::cache {

// Creates parent directories. Throws std::runtime_error naming `path`; leaves no temp file.
void write_file_atomic(const std::string& path, const std::string& bytes, unsigned mode = 0644);
// Throws std::runtime_error naming `path` and the errno text (open and read errors alike).
std::string read_file(const std::string& path);

}  // namespace opforge::cache
