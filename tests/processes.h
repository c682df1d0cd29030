// Forked worker processes for multi-process tests, bounded in count and time.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <vector>

namespace opforge::testing {

// Forks `n` children that each run `body` and exit 0, or 1 when it throws; true when all
// exited 0. A child still running after 60 s is killed (SIGALRM) and counts as a failure.
inline bool in_processes(int n, const std::function<void()>& body) {
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

}  // namespace opforge::testing
