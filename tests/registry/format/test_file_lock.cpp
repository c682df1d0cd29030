#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "processes.h"
#include "registry/format/file_lock.h"

using namespace opforge::registry;
using opforge::testing::in_processes;
using namespace std::chrono_literals;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/opforge-lock-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

void write_all(const std::string& p, const std::string& text) {
  std::ofstream(p, std::ios::trunc) << text;
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

TEST_CASE("wait_until_unlocked: at once without an owner; waits for one") {
  TempDir t;
  const std::string target = t.path + "/thing";
  CHECK(wait_until_unlocked(target, 0ms));  // no lock file at all
  auto held = std::make_unique<FileLock>(target, 1s);
  REQUIRE(held->owned());
  CHECK_FALSE(wait_until_unlocked(target, 100ms));
  std::atomic<bool> releasing{false};
  std::thread release([&] {
    std::this_thread::sleep_for(200ms);
    releasing = true;
    held.reset();
  });
  CHECK(wait_until_unlocked(target, 30s));
  CHECK(releasing.load());  // returned only once the owner let go
  release.join();
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
