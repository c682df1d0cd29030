#include "registry/format/bounded_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace opforge::registry {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int err = 0) {
  throw std::runtime_error(path + ": " + what +
                           (err ? ": " + std::generic_category().message(err) : ""));
}

}  // namespace

std::string file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

std::string read_regular_file(const std::string& path, const ReadLimits& limits) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
  const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (limits.follow_symlink ? 0 : O_NOFOLLOW);
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP && !limits.follow_symlink) fail(path, "is a symbolic link; not followed");
    fail(path, "cannot open", err);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) fail(path, "is " + file_kind(st.st_mode) + ", not a regular file");
  if (static_cast<uint64_t>(st.st_size) > limits.max_bytes) {
    fail(path, "is " + std::to_string(st.st_size) + " bytes; the limit is " +
                   std::to_string(limits.max_bytes));
  }
  std::string bytes;
  bytes.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(path, "cannot read", errno);
    }
    if (r == 0) break;
    bytes.append(buf, static_cast<size_t>(r));
    // A file that grows while it is read stops at the limit too.
    if (bytes.size() > limits.max_bytes) {
      fail(path, "grew past the limit of " + std::to_string(limits.max_bytes) + " bytes");
    }
  }
  return bytes;
}

}  // namespace opforge::registry
