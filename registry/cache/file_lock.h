// A cross-process lock on a file, llvm::LockFileManager's ("<target>.lock"; a lock whose owner
// died is taken over), for the cache's statistics and the registry's install.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace opforge::cache {

// Runs `fn` holding the lock on `target`, waiting up to `wait` while another process holds
// it. Returns "" once `fn` has run; otherwise, without running it, why the lock was not taken
// (it could not be made, or the wait ran out). Callers decide: run unlocked, or fail.
std::string run_locked(const std::string& target, std::chrono::seconds wait,
                       const std::function<void()>& fn);

}  // namespace opforge::cache
