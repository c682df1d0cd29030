// Whole-file writes that readers see complete or not at all: the bytes go to a new temp file
// ".tmp-XXXXXX" in the target's directory, which is then renamed over the target. The one
// implementation for every layer: the runtime (opforge::npy::write_atomic) reaches it here, in
// the leaf both it and the tooling depend on, and registry/cache/atomic_file.h (the builder's and
// CLI's writes) forwards to it. Standard library and POSIX only: no LLVM.
#pragma once

#include <optional>
#include <string>

namespace opforge::registry {

// Writes `bytes` to `path` through a temp file in the same directory (which must exist). The
// file gets `mode` exactly when it is given; otherwise the permission bits of the file it
// replaces, or 0666 & ~umask for a new file (what open(O_CREAT, 0666) would give). Throws
// std::runtime_error "PATH: what failed[: reason]" and leaves no temp file behind.
void write_file_atomic(const std::string& path, const std::string& bytes,
                       std::optional<unsigned> mode = std::nullopt);

}  // namespace opforge::registry
