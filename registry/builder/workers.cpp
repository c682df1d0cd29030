#include "registry/builder/workers.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>

namespace opforge::builder {

std::vector<std::string> run_on_workers(size_t count, int jobs,
                                        const std::function<void(size_t)>& work) {
  std::vector<std::string> errors(count);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k = next++; k < count; k = next++) {
      try {
        work(k);
      } catch (const std::exception& e) {
        errors[k] = e.what();
      }
    }
  };
  const size_t n =
      jobs > 0 ? static_cast<size_t>(jobs) : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (size_t j = 1; j < n && j < count; ++j) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the ones started (and this one) do the work
    }
  }
  worker();
  for (auto& t : pool) t.join();
  return errors;
}

}  // namespace opforge::builder
