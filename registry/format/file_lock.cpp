#include "registry/format/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace opforge::registry {

namespace {

// True when `fd` is still the file at `path`: the previous owner may have unlinked it (and a
// new caller made a new one there) between our open() and our flock().
bool still_at_path(int fd, const std::string& path) {
  struct stat a {
  }, b{};
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

}  // namespace

FileLock::FileLock(const std::string& target, std::chrono::milliseconds wait)
    : path_(target + ".lock") {
  const auto give_up = std::chrono::steady_clock::now() + wait;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      error_ = "cannot make " + path_ + ": " + std::strerror(errno);
      return;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      if (still_at_path(fd, path_)) {
        fd_ = fd;
        return;
      }
      ::close(fd);  // a released, unlinked file: take the one at the path now
      continue;
    }
    const int err = errno;
    ::close(fd);
    if (err != EWOULDBLOCK && err != EINTR) {
      error_ = "cannot lock " + path_ + ": " + std::strerror(err);
      return;
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      const auto ms = wait.count();
      error_ = "another process holds " + path_ + " (waited " +
               (ms % 1000 ? std::to_string(ms) + " ms)" : std::to_string(ms / 1000) + " s)");
      return;
    }
    // Polled (flock has no timeout), backing off to 50 ms: builds hold these for seconds.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

FileLock::~FileLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: no one can own this file after us
  ::close(fd_);
}

std::string run_locked(const std::string& target, std::chrono::seconds wait,
                       const std::function<void()>& fn) {
  FileLock lock(target, wait);
  if (!lock.owned()) return lock.error();
  fn();
  return "";
}

bool wait_until_unlocked(const std::string& target, std::chrono::milliseconds wait) {
  const std::string path = target + ".lock";
  const auto give_up = std::chrono::steady_clock::now() + wait;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return true;  // no lock file: no owner
    const bool free = ::flock(fd, LOCK_SH | LOCK_NB) == 0;
    ::close(fd);  // drops the shared lock too
    if (free) return true;
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

bool remove_unheld_lock(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool removed = false;
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && still_at_path(fd, path)) {
    removed = ::unlink(path.c_str()) == 0;
  }
  ::close(fd);
  return removed;
}

}  // namespace opforge::registry
