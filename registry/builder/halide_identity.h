// Which libHalide this process compiles with: its path, version and content hash. The hash
// is part of every cache key; hashing 25 MB costs ~0.1 s, so it is remembered per
// (path, size, mtime) in the cache directory, as ccache does for compilers.
#pragma once

#include <string>

namespace opforge::builder {

struct HalideIdentity {
  std::string library_path;
  std::string version;  // "14.0.0"
  std::string sha256;
};

// `cache_root` empty: no memo (the cache is disabled), the library is hashed.
HalideIdentity halide_identity(const std::string& cache_root);

}  // namespace opforge::builder
