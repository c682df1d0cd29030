#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cache_test_util.h"
#include "registry/cache/compile_cache.h"
#include "registry/cache/file_lock.h"

using namespace opforge::cache;
using namespace opforge::cache::testing;
using namespace std::chrono_literals;

namespace {

// Forks `n` children that each run `body` and exit 0, or 1 when it throws; true when all
// exited 0. Bounded: a child still running after 60 s is killed and counts as a failure.
bool in_processes(int n, const std::function<void()>& body) {
  std::vector<pid_t> kids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      alarm(60);
      try {
        body();
      } catch (...) {
        _exit(1);
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : kids) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok;
}

int read_int(const std::string& p) {
  std::ifstream in(p);
  int v = 0;
  in >> v;
  return v;
}

}  // namespace

TEST_CASE("FileLock: one owner at a time; the owner's release removes the lock file") {
  TempDir t;
  const std::string target = t.path + "/thing";
  {
    FileLock a(target, 1s);
    REQUIRE(a.owned());
    CHECK(std::filesystem::exists(target + ".lock"));
    FileLock b(target, 100ms);  // another open file: flock excludes threads of one process too
    CHECK_FALSE(b.owned());
    CHECK(b.error() == "another process holds " + target + ".lock (waited 100 ms)");
    CHECK_FALSE(remove_unheld_lock(target + ".lock"));  // held: left alone
    CHECK(std::filesystem::exists(target + ".lock"));
  }
  CHECK_FALSE(std::filesystem::exists(target + ".lock"));
  FileLock c(target, 100ms);
  CHECK(c.owned());
}

TEST_CASE("FileLock: a lock that cannot be made says why") {
  FileLock a("/nonexistent-dir/opforge/thing", 100ms);
  CHECK_FALSE(a.owned());
  CHECK(a.error() == "cannot make /nonexistent-dir/opforge/thing.lock: No such file or directory");
}

// kill -9 of the owner: the kernel drops its flock, so the next caller owns the lock at once
// (llvm::LockFileManager needed the dead PID check, and raced on it).
TEST_CASE("FileLock: the lock of an owner killed with -9 is taken over") {
  TempDir t;
  const std::string target = t.path + "/thing";
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    FileLock mine(target, 1s);
    const char c = mine.owned() ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char c = 0;
  REQUIRE(read(ready[0], &c, 1) == 1);
  REQUIRE(c == 'y');
  CHECK_FALSE(FileLock(target, 50ms).owned());
  kill(pid, SIGKILL);
  REQUIRE(waitpid(pid, nullptr, 0) == pid);
  CHECK(std::filesystem::exists(target + ".lock"));  // left behind, but no longer held
  FileLock after(target, 1s);
  CHECK(after.owned());
  close(ready[0]);
  close(ready[1]);
}

// A counter read, incremented and written back under the lock by 4 processes x 2 threads:
// any two owners at once would lose an increment.
TEST_CASE("FileLock: mutual exclusion across processes and threads") {
  TempDir t;
  const std::string counter = t.path + "/counter";
  write_all(counter, "0");
  constexpr int kProcs = 4, kThreads = 2, kRounds = 150;
  const bool ok = in_processes(kProcs, [&] {
    std::vector<std::thread> threads;
    std::atomic<bool> failed{false};
    for (int k = 0; k < kThreads; ++k) {
      threads.emplace_back([&] {
        for (int r = 0; r < kRounds; ++r) {
          const std::string why = run_locked(counter, 30s, [&] {
            const int v = read_int(counter);
            std::this_thread::yield();
            std::ofstream(counter, std::ios::trunc) << v + 1;
          });
          if (!why.empty()) failed = true;
        }
      });
    }
    for (auto& th : threads) th.join();
    if (failed) throw std::runtime_error("lock not taken");
  });
  CHECK(ok);
  CHECK(read_int(counter) == kProcs * kThreads * kRounds);
  CHECK_FALSE(std::filesystem::exists(counter + ".lock"));
}

// Defect: concurrent builds lost hit/miss updates (the counters were written without the
// lock after a wait).
TEST_CASE("cache statistics lose no update under contention") {
  TempDir t;
  constexpr int kProcs = 4, kRounds = 40;
  const bool ok = in_processes(kProcs, [&] {
    CompileCache c(t.path);
    for (int r = 0; r < kRounds; ++r) c.count(r % 4 != 0);
  });
  CHECK(ok);
  const Stats s = CompileCache(t.path).stats();
  CHECK(s.hits == kProcs * kRounds * 3 / 4);
  CHECK(s.misses == kProcs * kRounds / 4);
}
