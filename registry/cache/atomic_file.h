// Whole-file writes that readers see complete or not at all: a temp file in the target's
// directory (llvm::sys::fs::TempFile), renamed into place.
#pragma once

#include <string>

namespace opforge::cache {

// Creates parent directories. Throws std::runtime_error naming `path`; leaves no temp file.
void write_file_atomic(const std::string& path, const std::string& bytes, unsigned mode = 0644);
std::string read_file(const std::string& path);  // throws std::runtime_error naming `path`

}  // namespace opforge::cache
