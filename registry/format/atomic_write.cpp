#include "registry/format/atomic_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace opforge::registry {

namespace {

std::string errno_text(int err) {
  return std::generic_category().message(err);
}

// Permission bits a newly created file would get: 0666 & ~umask. The umask is read from
// /proc/self/status (calling umask() to query it would race with other threads).
mode_t default_file_mode() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Umask:", 0) == 0) {
      const unsigned long mask = std::strtoul(line.c_str() + 6, nullptr, 8);
      return static_cast<mode_t>(0666 & ~mask);
    }
  }
  return 0644;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes,
                       std::optional<unsigned> mode) {
  auto fail = [&](const std::string& what) { throw std::runtime_error(path + ": " + what); };
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) fail("cannot write: path names a directory");
  const std::string tmpl = (dir == "/" ? std::string("/") : dir + "/") + ".tmp-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');

  // O_CLOEXEC: a process the caller starts meanwhile must not inherit the descriptor.
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) fail("cannot create temporary file in '" + dir + "': " + errno_text(errno));
  const std::string tmp(name.data());
  auto abort_with = [&](const std::string& what, int err, bool close_fd) {
    if (close_fd) ::close(fd);
    ::unlink(tmp.c_str());
    fail(what + ": " + errno_text(err));
  };

  // mkostemp creates the file 0600.
  mode_t bits = 0;
  struct stat st {};
  if (mode) {
    bits = static_cast<mode_t>(*mode);
  } else if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    bits = static_cast<mode_t>(st.st_mode & 07777);
  } else {
    bits = default_file_mode();
  }
  if (::fchmod(fd, bits) != 0) abort_with("cannot set permissions on temporary file", errno, true);

  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      abort_with("write failed", errno, true);
    }
    off += static_cast<size_t>(w);
  }
  if (::close(fd) != 0) abort_with("write failed (close)", errno, false);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    abort_with("cannot rename temporary file into place", errno, false);
  }
}

}  // namespace opforge::registry
