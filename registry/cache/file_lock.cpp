#include "registry/cache/file_lock.h"

#include <llvm/Support/LockFileManager.h>

namespace opforge::cache {

std::string run_locked(const std::string& target, std::chrono::seconds wait,
                       const std::function<void()>& fn) {
  const auto give_up = std::chrono::steady_clock::now() + wait;
  for (;;) {
    llvm::LockFileManager lock(target);
    switch (lock.getState()) {
      case llvm::LockFileManager::LFS_Owned:
        fn();
        return "";
      case llvm::LockFileManager::LFS_Error:
        return "cannot make " + target + ".lock: " + lock.getErrorMessage();
      case llvm::LockFileManager::LFS_Shared: {
        const auto now = std::chrono::steady_clock::now();
        if (now >= give_up) {
          return "another process held " + target + ".lock for " + std::to_string(wait.count()) +
                 " s";
        }
        lock.waitForUnlock(static_cast<unsigned>(
            std::chrono::duration_cast<std::chrono::seconds>(give_up - now).count() + 1));
        break;  // try to take it ourselves
      }
    }
  }
}

}  // namespace opforge::cache
