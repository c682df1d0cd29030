// A cross-process lock on "<target>.lock", for the cache's entries and statistics and the
// registry's install (which the runtime waits for). POSIX only: the runtime uses it too.
//
// flock(2) on the open lock file, so that the kernel releases it when its owner dies (kill -9
// included) and two owners are impossible. Not llvm::LockFileManager: it decides ownership by
// linking files and reading PIDs, and can let two callers own a free lock at once. Not
// llvm::sys::fs::tryLockFile either: it takes fcntl locks, which every thread of a process
// shares and any close() of the file drops.
//
// The owner unlinks the file before it unlocks, so no lock files pile up; a caller that got
// the lock on a file that is no longer at the path (unlinked meanwhile) tries again.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace opforge::registry {

class FileLock {
 public:
  // Takes the lock on `target` + ".lock", waiting up to `wait` while another holds it.
  FileLock(const std::string& target, std::chrono::milliseconds wait);
  ~FileLock();  // releases it (and removes the lock file) when owned
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  bool owned() const { return fd_ >= 0; }
  // Why it is not owned: the lock file could not be made, or the wait ran out.
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::string error_;
};

// Runs `fn` holding the lock on `target`, waiting up to `wait` while another process holds
// it. Returns "" once `fn` has run; otherwise, without running it, why the lock was not taken
// (it could not be made, or the wait ran out). Callers decide: run unlocked, skip, or fail.
std::string run_locked(const std::string& target, std::chrono::seconds wait,
                       const std::function<void()>& fn);

// Waits up to `wait` until no one holds the lock on `target` (a reader waiting for a writer
// to finish: the runtime, for a registry install). True at once when there is no lock file;
// false when the wait ran out.
bool wait_until_unlocked(const std::string& target, std::chrono::milliseconds wait);

// Removes the lock file `path` (a "<target>.lock") when no one holds it, as an owner would;
// a held lock is left alone. True when removed.
bool remove_unheld_lock(const std::string& path);

}  // namespace opforge::registry
