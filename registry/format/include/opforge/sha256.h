// SHA-256 (FIPS 180-4) of bytes and of files, for the runtime's check of a registry's kernels
// against the digests their descriptors record. The runtime cannot use LLVM's (it links only
// the format layer), so this is the format's own, checked against FIPS 180-2's test vectors
// and against LLVM's SHA-256 on the registry's own files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace opforge::registry {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  std::string hex_digest();  // 64 lowercase hex characters; call once

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t bytes_ = 0;
};

std::string sha256_hex(const std::string& bytes);
// The digest of a regular file's content (read in chunks); throws std::runtime_error naming
// the file and errno's text.
std::string sha256_file_hex(const std::string& path);

}  // namespace opforge::registry
