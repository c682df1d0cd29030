#include "runtime/thread_pool.h"

#include <omp.h>
#include <pthread.h>

#include <atomic>
#include <cstdlib>

#include "opforge/runtime.hpp"

namespace opforge::thread_pool {

namespace {
std::atomic<int> requested{0};  // set_openmp_threads; 0 = the team's default
std::atomic<bool> forked_child{false};
std::atomic<ParFor (*)(ParFor)> installer{nullptr};

void after_fork_in_child() {
  forked_child.store(true);
  if (auto set = installer.load()) set(openmp_do_par_for);
}
}  // namespace

void run_serially_after_fork(ParFor (*set_par_for)(ParFor)) {
  static const int registered = pthread_atfork(nullptr, nullptr, after_fork_in_child);
  (void)registered;
  installer.store(set_par_for);
}

Kind from_environment() {
  const char* v = std::getenv("OPFORGE_THREAD_POOL");
  if (!v || !*v || std::string(v) == "openmp") return Kind::openmp;
  if (std::string(v) == "halide") return Kind::halide;
  throw Error(std::string("OPFORGE_THREAD_POOL=") + v + ": expected openmp or halide");
}

const char* name(Kind k) {
  return k == Kind::openmp ? "openmp" : "halide";
}

void set_openmp_threads(int n) {
  requested.store(n, std::memory_order_relaxed);
}

int openmp_threads() {
  if (forked_child.load(std::memory_order_relaxed)) return 1;
  const int n = requested.load(std::memory_order_relaxed);
  return omp_in_parallel() && !omp_get_nested() ? 1 : n > 0 ? n : omp_get_max_threads();
}

int openmp_do_par_for(void* user_context, Task task, int min, int size, uint8_t* closure) {
  const int threads = openmp_threads();
  int result = 0;
  if (threads <= 1 || size <= 1) {
    for (int i = min; i < min + size && result == 0; ++i) result = task(user_context, i, closure);
    return result;
  }
  std::atomic<int> first_error{0};
  // static: the same thread takes the same tasks of the same tensor on every call, so a
  // cache-resident tensor stays in that core's cache (dynamic measured 18.8 vs 14.2 us at 1e5).
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int i = min; i < min + size; ++i) {
    if (first_error.load(std::memory_order_relaxed) != 0) continue;
    const int r = task(user_context, i, closure);
    if (r != 0) {
      int expected = 0;
      first_error.compare_exchange_strong(expected, r);
    }
  }
  return first_error.load();
}

}  // namespace opforge::thread_pool
