#include "registry/cache/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
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
  auto fail = [&](const std::string& what, int err) {
    throw std::runtime_error(path + ": " + what + ": " + std::generic_category().message(err));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open", errno);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail("read failed", err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace opforge::cache
