// One Registry shared between threads, as users of a library will share it: concurrent
// select/load of many variants (each dlopened once), and set_num_threads while other threads
// call kernels (it waits for calls in flight). Every result is bit-identical to the same call
// made alone. Before the registry's lock, concurrent opforge_select crashed in 15 of 20 runs;
// set_num_threads during calls hung 3 of 9 times and aborted once.
//
// test_runtime_tsan builds this file under ThreadSanitizer too, which checks every access
// (each ~10x slower): there a round or two and fewer threads find what the repetitions here are
// for.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "host_isa.h"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif
#else
constexpr bool kTsan = false;
#endif
constexpr int kTrials = kTsan ? 2 : 20;
constexpr int kThreads = kTsan ? 6 : 10;

// Adam on `data` with `reg`, one call, n elements.
std::vector<float> adam_once(Kernel& k, size_t n, unsigned seed) {
  AdamData d(n, seed);
  k.call(d.tensors({static_cast<int64_t>(n)}), adam_scalars());
  return d.var;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("select and load from 10 threads on one fresh registry, 20 times: one Kernel each") {
  const auto ops = shared_registry().ops();
  REQUIRE(ops.size() > 20);
  for (int trial = 0; trial < kTrials; ++trial) {
    CAPTURE(trial);
    auto reg = Registry::open(test_registry_dir());
    std::vector<std::map<std::string, Kernel*>> got(kThreads);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          // Every thread walks every op, from a different starting point.
          for (size_t i = 0; i < ops.size(); ++i) {
            const std::string& op = ops[(i + t * 7) % ops.size()];
            const auto variants = reg->variants(op);
            if (variants.front().shape.named_dims) continue;  // NN: selected by shape
            bool runs = false;
            for (const auto& d : variants) runs = runs || runs_here(d);
            if (runs) got[t][op] = &reg->select(op);
          }
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) CHECK_MESSAGE(errors[t].empty(), errors[t]);
    // The same Kernel object for the same op, whichever thread loaded it.
    for (int t = 1; t < kThreads; ++t) CHECK(got[t] == got[0]);
    CHECK(got[0].count("apply_adam"));
  }
}

TEST_CASE("set_num_threads while 4 threads call kernels: no hang, results bit-identical") {
  Registry& reg = shared_registry();
  Kernel& adam = reg.select("apply_adam");
  const size_t n = 100003;  // parallel path, odd tail
  std::vector<std::vector<float>> want;
  for (unsigned s = 0; s < 4; ++s) want.push_back(adam_once(adam, n, s));
  std::atomic<bool> stop{false};
  std::atomic<int> calls{0}, wrong{0};
  std::vector<std::string> errors(4);
  std::vector<std::thread> callers;
  for (unsigned s = 0; s < 4; ++s) {
    callers.emplace_back([&, s] {
      try {
        while (!stop) {
          wrong += !same_bits(adam_once(adam, n, s), want[s]);
          ++calls;
        }
      } catch (const std::exception& e) {
        errors[s] = e.what();
      }
    });
  }
  // A pause after each change lets callers in: on the OpenMP team a change takes microseconds
  // (no Halide pool to shut down), and 40 back to back could end before any call started.
  for (int k = 0; k < 40; ++k) {
    reg.set_num_threads(1 + k % 4);
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  stop = true;
  for (auto& th : callers) th.join();
  reg.set_num_threads(0);
  for (const auto& e : errors) CHECK_MESSAGE(e.empty(), e);
  CHECK(calls > 0);
  CHECK(wrong == 0);
  CHECK_THROWS_AS(reg.set_num_threads(-5), Error);
}

// conv2d (an NN op, selected by shape) on 1x8x9x9 with a 3x3 kernel: groups 1 picks
// direct_oc_small, groups 8 (and 8 output channels) depthwise. Returns the output.
struct Conv {
  std::vector<float> x, w, y;
  std::vector<Tensor> tensors;
  std::map<std::string, double> scalars;
  explicit Conv(int groups)
      : x(8 * 9 * 9, 0.5f), w((groups == 1 ? 16 * 8 : 8) * 9, 0.25f), scalars{{"stride_h", 1},
                                                                              {"stride_w", 1},
                                                                              {"pad_h", 1},
                                                                              {"pad_w", 1},
                                                                              {"dilation_h", 1},
                                                                              {"dilation_w", 1},
                                                                              {"groups", groups}} {
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.125f;
    const int64_t o = groups == 1 ? 16 : 8;
    tensors = {{"x", x.data(), registry::DType::f32, {1, 8, 9, 9}},
               {"weight", w.data(), registry::DType::f32, {o, 8 / groups, 3, 3}}};
  }
  std::vector<float> run(Registry& reg) {
    Kernel& k = reg.select("conv2d", {}, tensors, scalars);
    const auto shapes = k.output_shapes(tensors, scalars);
    y.assign(shapes.at(0)[0] * shapes[0][1] * shapes[0][2] * shapes[0][3], 0.f);
    std::vector<Tensor> all = tensors;
    all.push_back({"y", y.data(), registry::DType::f32, shapes[0]});
    k.call(all, scalars);
    return y;
  }
};

TEST_CASE("a fresh registry: first loads, NN selection by shape, calls, set_num_threads at once") {
  const size_t n = 100003;
  std::vector<std::vector<float>> want_adam;
  for (unsigned s = 0; s < 2; ++s) {
    want_adam.push_back(adam_once(shared_registry().select("apply_adam"), n, s));
  }
  const std::vector<float> want_groups1 = Conv(1).run(shared_registry());
  const std::vector<float> want_depthwise = Conv(8).run(shared_registry());
  const int rounds = kTsan ? 3 : 20;
  for (int trial = 0; trial < (kTsan ? 1 : 5); ++trial) {
    CAPTURE(trial);
    // Nothing loaded yet, not even the Halide runtime: every thread's first step races to load.
    auto reg = Registry::open(test_registry_dir());
    std::atomic<int> wrong{0};
    std::vector<std::string> errors(5);
    Kernel* adam_kernels[2] = {nullptr, nullptr};
    std::vector<std::thread> threads;
    auto guarded = [&](int t, std::function<void()> f) {
      threads.emplace_back([&errors, t, f] {
        try {
          f();
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    };
    for (unsigned s = 0; s < 2; ++s) {
      guarded(s, [&, s] {
        Kernel& adam = reg->select("apply_adam");
        adam_kernels[s] = &adam;
        for (int r = 0; r < rounds; ++r) wrong += !same_bits(adam_once(adam, n, s), want_adam[s]);
      });
    }
    guarded(2, [&] {
      for (int r = 0; r < rounds; ++r) wrong += !same_bits(Conv(1).run(*reg), want_groups1);
    });
    guarded(3, [&] {
      for (int r = 0; r < rounds; ++r) wrong += !same_bits(Conv(8).run(*reg), want_depthwise);
    });
    guarded(4, [&] {
      for (int r = 0; r < 4 * rounds; ++r) reg->set_num_threads(1 + r % 4);
    });
    for (auto& th : threads) th.join();
    reg->set_num_threads(0);
    for (const auto& e : errors) CHECK_MESSAGE(e.empty(), e);
    CHECK(wrong == 0);
    // Both Adam threads got the one Kernel the registry keeps.
    CHECK(adam_kernels[0] == &reg->select("apply_adam"));
    CHECK(adam_kernels[1] == adam_kernels[0]);
  }
}

}  // namespace
}  // namespace opforge::testing
