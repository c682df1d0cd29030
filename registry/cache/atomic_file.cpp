#include "registry/cache/atomic_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "registry/format/atomic_write.h"

namespace opforge::cache {

void write_file_atomic(const std::string& path, const std::string& bytes, unsigned mode) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw std::runtime_error(path + ": mkdir: " + ec.message());
  }
  registry::write_file_atomic(path, bytes, mode);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace opforge::cache
