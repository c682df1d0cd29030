#include "registry/cli/preview_kernel.h"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "opforge/sha256.h"
#include "registry/builder/preview.h"

namespace opforge::cli {

namespace {

// The kernel bytes in a fresh temp file (mkstemps); the caller removes it once loaded.
std::string write_temp_kernel(const std::string& bytes) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/opforge-preview-XXXXXX.so";
  const int fd = mkstemps(path.data(), 3);
  if (fd < 0) throw std::runtime_error("cannot create a temp file for a preview kernel: " + path);
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (w <= 0) {
      ::close(fd);
      ::unlink(path.c_str());
      throw std::runtime_error("cannot write the preview kernel to " + path);
    }
    off += static_cast<size_t>(w);
  }
  ::close(fd);
  return path;
}

}  // namespace

LoadedPreview load_preview(Registry& reg, const registry::Descriptor& registered,
                           const std::map<std::string, int64_t>& set, const std::string& cache_dir,
                           const std::vector<std::string>& rules) {
  builder::PreviewResult p = builder::preview_variant(registered, set, cache_dir, rules);
  const std::string& bytes = p.entry.artifacts.at("kernel.so");
  p.descriptor.kernel.sha256 = registry::sha256_hex(bytes);
  const std::string path = write_temp_kernel(bytes);
  LoadedPreview out;
  try {
    out.kernel = &reg.load_file(p.descriptor, path);
  } catch (...) {
    ::unlink(path.c_str());
    throw;
  }
  ::unlink(path.c_str());  // mapped: the loaded kernel outlives its file
  out.hit = p.hit;
  out.compile_ms = p.compile_ms;
  return out;
}

std::string set_text(const std::map<std::string, int64_t>& set) {
  std::string s;
  for (const auto& [k, v] : set) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s;
}

}  // namespace opforge::cli
