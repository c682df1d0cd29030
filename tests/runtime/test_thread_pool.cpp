// The parallel loops' thread pool (runtime/thread_pool.h): openmp_do_par_for runs every task
// once and reports the first failure; one thread runs them on the caller; a bad
// OPFORGE_THREAD_POOL is named; the registry installs the pool the environment names (ctest runs
// these cases again with OPFORGE_THREAD_POOL=halide), and Adam's result does not depend on the
// threads that ran it, in place at odd sizes.
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "runtime/runtime_test_util.h"
#include "runtime/thread_pool.h"

namespace opforge::testing {
namespace {

struct Seen {
  std::atomic<int> runs[64] = {};
  std::mutex mu;
  std::set<std::thread::id> threads;
  int fail_at = -1;  // the task that returns an error (-7)
};

int record(void*, int task, uint8_t* closure) {
  auto* s = reinterpret_cast<Seen*>(closure);
  s->runs[task]++;
  std::lock_guard<std::mutex> lock(s->mu);
  s->threads.insert(std::this_thread::get_id());
  return task == s->fail_at ? -7 : 0;
}

struct ThreadsGuard {  // restores the pool's default thread count
  ~ThreadsGuard() { thread_pool::set_openmp_threads(0); }
};

TEST_CASE("thread pool: openmp_do_par_for runs tasks [min, min + size) once each") {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    thread_pool::set_openmp_threads(threads);
    CHECK(thread_pool::openmp_threads() == threads);
    Seen s;
    CHECK(thread_pool::openmp_do_par_for(nullptr, record, 5, 37, reinterpret_cast<uint8_t*>(&s)) ==
          0);
    for (int i = 0; i < 64; ++i) CHECK(s.runs[i].load() == (i >= 5 && i < 42 ? 1 : 0));
    if (threads == 1) {
      CHECK(s.threads == std::set<std::thread::id>{std::this_thread::get_id()});
    } else {
      CHECK(s.threads.size() <= static_cast<size_t>(threads));
    }
  }
  Seen none;
  CHECK(thread_pool::openmp_do_par_for(nullptr, record, 0, 0, reinterpret_cast<uint8_t*>(&none)) ==
        0);
  for (int i = 0; i < 64; ++i) CHECK(none.runs[i].load() == 0);
}

TEST_CASE("thread pool: a failing task's code is the call's result") {
  ThreadsGuard guard;
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    thread_pool::set_openmp_threads(threads);
    Seen s;
    s.fail_at = 11;
    CHECK(thread_pool::openmp_do_par_for(nullptr, record, 0, 16, reinterpret_cast<uint8_t*>(&s)) ==
          -7);
    CHECK(s.runs[11].load() == 1);
  }
}

TEST_CASE("thread pool: OPFORGE_THREAD_POOL names openmp or halide, anything else is an error") {
  const char* was = std::getenv("OPFORGE_THREAD_POOL");
  const std::string saved = was ? was : "";
  setenv("OPFORGE_THREAD_POOL", "openmp", 1);
  CHECK(thread_pool::from_environment() == thread_pool::Kind::openmp);
  setenv("OPFORGE_THREAD_POOL", "halide", 1);
  CHECK(thread_pool::from_environment() == thread_pool::Kind::halide);
  unsetenv("OPFORGE_THREAD_POOL");
  CHECK(thread_pool::from_environment() == thread_pool::Kind::openmp);
  setenv("OPFORGE_THREAD_POOL", "tbb", 1);
  const std::string err = error_of([] { thread_pool::from_environment(); });
  CHECK(contains(err, "OPFORGE_THREAD_POOL=tbb"));
  CHECK(contains(err, "openmp or halide"));
  if (was) {
    setenv("OPFORGE_THREAD_POOL", saved.c_str(), 1);
  } else {
    unsetenv("OPFORGE_THREAD_POOL");
  }
}

TEST_CASE("thread pool: the registry runs kernels on the pool the environment names") {
  shared_registry().select("apply_adam");  // loads the runtime
  void* h = dlopen("libopforge_halide_runtime.so", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(h);
  // The Halide runtime's hook that halide_set_custom_do_par_for sets.
  using ParFor = int (*)(void*, thread_pool::Task, int, int, uint8_t*);
  auto* hook =
      reinterpret_cast<ParFor*>(dlsym(h, "_ZN6Halide7Runtime8Internal17custom_do_par_forE"));
  REQUIRE(hook);
  const bool openmp = thread_pool::from_environment() == thread_pool::Kind::openmp;
  CHECK((*hook == &thread_pool::openmp_do_par_for) == openmp);
  dlclose(h);
}

TEST_CASE("thread pool: Adam in place gives the same bits on 1, 2 and 3 threads, odd sizes") {
  Registry& reg = shared_registry();
  for (const std::string& isa : host_isas(reg, "apply_adam").runnable) {
    Kernel& k = reg.select("apply_adam", {}, isa);
    for (size_t n : {1, 5, 17, 1000, 65543, 300007}) {
      CAPTURE(isa);
      CAPTURE(n);
      std::vector<std::vector<float>> got;
      for (int threads : {1, 2, 3}) {
        reg.set_num_threads(threads);
        AdamData d(n, 11);
        k.call(d.tensors({static_cast<int64_t>(n)}), adam_scalars());
        got.push_back(d.var);
        got.push_back(d.m);
        got.push_back(d.v);
      }
      for (size_t i = 3; i < got.size(); ++i) {
        CHECK(std::memcmp(got[i].data(), got[i % 3].data(), n * sizeof(float)) == 0);
      }
    }
  }
  reg.set_num_threads(0);
}

TEST_CASE("thread pool: a forked child runs kernels (serially) after the parent's parallel calls") {
  // libgomp's team does not exist in a child: before the fork handler (thread_pool.h) its
  // first parallel loop waited for it forever (this test, with the handler removed, killed the
  // hung child after 30 s; Halide's pool passed). The child exits 0 when its result matches.
  Registry& reg = shared_registry();
  Kernel& k = reg.select("apply_adam");
  const size_t n = 300007;  // the parallel path
  reg.set_num_threads(2);
  const std::vector<float> want = [&] {
    AdamData d(n, 5);
    k.call(d.tensors({static_cast<int64_t>(n)}), adam_scalars());
    return d.var;
  }();
  for (int i = 0; i < 3; ++i) {  // the team (or Halide's workers) awake at the fork
    AdamData d(n, 6);
    k.call(d.tensors({static_cast<int64_t>(n)}), adam_scalars());
  }
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    AdamData d(n, 5);
    k.call(d.tensors({static_cast<int64_t>(n)}), adam_scalars());
    _exit(std::memcmp(d.var.data(), want.data(), n * sizeof(float)) == 0 ? 0 : 3);
  }
  int status = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL("the forked child hung in its kernel call");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  reg.set_num_threads(0);
}

}  // namespace
}  // namespace opforge::testing
