// opforge bench OP --n N: median time of the op, and of the bandwidth kernel that reads and
// writes the same bytes, in the same process, interleaved (the host is shared and noisy:
// only same-run ratios mean anything). The bandwidth kernel runs at the op's thread count
// and at 1 thread: small tensors must not pay a thread-pool dispatch.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "opforge/runtime.hpp"
#include "registry/cli/commands.h"

namespace opforge::cli {

namespace {

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float, AlignedFree>;

// Scalars not given on the command line: 0.5, or 1 for integer ones (a step count).
double default_scalar(const registry::Input& in) {
  return in.dtype == registry::DType::i32 || in.dtype == registry::DType::i64 ? 1.0 : 0.5;
}

// Tensors and scalars for one kernel: positive values keep sqrt() and divisions tame.
struct Workload {
  std::vector<Buffer> buffers;
  std::vector<TensorView> tensors;  // views: the timed call allocates nothing
  std::vector<ScalarView> scalars;
  int64_t n;

  Workload(const registry::Descriptor& d, int64_t n_, const std::map<std::string, double>& given)
      : n(n_) {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> u(0.1f, 1.0f);
    for (const auto& in : d.inputs) {
      if (in.role == registry::Input::Role::scalar) {
        scalars.push_back(
            {in.name.c_str(), given.count(in.name) ? given.at(in.name) : default_scalar(in)});
        continue;
      }
      const size_t bytes = ((static_cast<size_t>(n) * 4 + 63) / 64) * 64;
      Buffer b(static_cast<float*>(std::aligned_alloc(64, bytes)));
      if (!b) throw std::runtime_error("out of memory for " + in.name);
      for (int64_t i = 0; i < n; ++i) b.get()[i] = u(rng);
      tensors.push_back({in.name.c_str(), b.get(), registry::DType::f32, &this->n, 1});
      buffers.push_back(std::move(b));
    }
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double time_call(Kernel& k, Workload& w) {
  const auto t0 = std::chrono::steady_clock::now();
  k.call(w.tensors.data(), w.tensors.size(), w.scalars.data(), w.scalars.size());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Sparse ops: states [rows, cols], `count` gradient rows at seeded random indices (duplicates
// possible). Reported as rows updated per second and GB/s over the touched rows.
struct SparseWorkload {
  std::vector<std::vector<float>> f32;
  std::vector<int64_t> idx64;
  std::vector<int32_t> idx32;
  std::vector<int64_t> state_shape, grad_shape, index_shape;
  std::vector<TensorView> tensors;
  std::vector<ScalarView> scalars;

  SparseWorkload(const registry::Descriptor& d, int64_t rows, int64_t cols, int64_t count,
                 const std::map<std::string, double>& given)
      : state_shape{rows, cols}, grad_shape{count, cols}, index_shape{count} {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> u(0.1f, 1.0f);
    std::uniform_int_distribution<int64_t> pick(0, rows - 1);
    f32.reserve(d.inputs.size());
    for (const auto& in : d.inputs) {
      if (in.role == registry::Input::Role::scalar) {
        scalars.push_back(
            {in.name.c_str(), given.count(in.name) ? given.at(in.name) : default_scalar(in)});
      } else if (in.name == d.shape.indices) {
        for (int64_t k = 0; k < count; ++k) idx64.push_back(pick(rng));
        idx32.assign(idx64.begin(), idx64.end());
        const bool wide = in.dtype == registry::DType::i64;
        tensors.push_back({in.name.c_str(), wide ? static_cast<void*>(idx64.data()) : idx32.data(),
                           in.dtype, index_shape.data(), 1});
      } else {
        const bool state = in.role == registry::Input::Role::state;
        f32.emplace_back(static_cast<size_t>((state ? rows : count) * cols));
        for (float& x : f32.back()) x = u(rng);
        tensors.push_back({in.name.c_str(), f32.back().data(), registry::DType::f32,
                           state ? state_shape.data() : grad_shape.data(), 2});
      }
    }
  }
};

// Rows updated per second for a sparse op.
nlohmann::json bench_sparse(const Args& a, Registry& reg, Kernel& op,
                            const std::map<std::string, double>& given) {
  const registry::Descriptor& d = op.descriptor();
  const int64_t rows = a.get_int("rows", 100000), cols = a.get_int("cols", 128);
  const int64_t count = a.get_int("indices", rows);
  if (rows < 1 || cols < 1 || count < 1) {
    throw UsageError("--rows, --cols, --indices must be positive");
  }
  SparseWorkload w(d, rows, cols, count, given);
  reg.set_num_threads(static_cast<int>(a.get_int("threads", 2)));
  auto call = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    op.call(w.tensors.data(), w.tensors.size(), w.scalars.data(), w.scalars.size());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  call();
  const double once = std::max(1e-7, call());
  const int64_t reps =
      a.has("reps") ? a.get_int("reps", 0) : std::clamp<int64_t>(int64_t(1.0 / once), 11, 2001);
  std::vector<double> t;
  for (int64_t r = 0; r < reps; ++r) t.push_back(call());
  const double m = median(t);
  const double bytes = static_cast<double>(count) * static_cast<double>(cols) *
                       (d.traffic.bytes_read_per_element + d.traffic.bytes_written_per_element);
  return {{"op", d.op},
          {"variant", d.variant},
          {"isa", d.target.isa},
          {"rows", rows},
          {"cols", cols},
          {"indices", count},
          {"reps", reps},
          {"op_us", m * 1e6},
          {"rows_per_s", count / m},
          {"op_gbps", bytes / m / 1e9}};
}

// The op and the same-traffic bandwidth kernel, interleaved, at the op's thread count; the
// bandwidth kernel at 1 thread too.
nlohmann::json bench_dense(const Args& a, Registry& reg, Kernel& op,
                           const std::map<std::string, double>& given) {
  const registry::Descriptor& d = op.descriptor();
  const int64_t n = a.get_int("n", 1000000);
  const int threads = static_cast<int>(a.get_int("threads", 2));
  Kernel& bw = reg.select(d.bandwidth_op, {}, d.target.isa);
  Workload wo(d, n, given), wb(bw.descriptor(), n, {});
  auto bytes_of = [&](const registry::Descriptor& x) {
    return static_cast<double>(n) *
           (x.traffic.bytes_read_per_element + x.traffic.bytes_written_per_element);
  };
  const double bytes = bytes_of(d), bw_bytes = bytes_of(bw.descriptor());

  // Reps: about 0.3 s of op time per series, at least 21, at most 5001.
  reg.set_num_threads(threads);
  time_call(op, wo);
  const double once = std::max(1e-7, time_call(op, wo));
  const int64_t reps =
      a.has("reps") ? a.get_int("reps", 0) : std::clamp<int64_t>(int64_t(0.3 / once), 21, 5001);
  std::vector<double> t_op, t_bw, t_bw1;
  const int rounds = 5;  // thread-count switches happen between rounds, never inside timing
  for (int r = 0; r < rounds; ++r) {
    reg.set_num_threads(threads);
    time_call(op, wo), time_call(bw, wb);  // wake the pool
    for (int64_t i = 0; i < (reps + rounds - 1) / rounds; ++i) {
      t_op.push_back(time_call(op, wo));
      t_bw.push_back(time_call(bw, wb));
    }
    reg.set_num_threads(1);
    time_call(bw, wb);
    for (int64_t i = 0; i < (reps + rounds - 1) / rounds; ++i) t_bw1.push_back(time_call(bw, wb));
  }
  const double m_op = median(t_op), m_bw = median(t_bw), m_bw1 = median(t_bw1);
  return {{"op", d.op},
          {"variant", d.variant},
          {"isa", d.target.isa},
          {"n", n},
          {"threads", threads},
          {"reps", t_op.size()},
          {"bytes_per_call", bytes},
          {"op_us", m_op * 1e6},
          {"op_gbps", bytes / m_op / 1e9},
          {"bandwidth_kernel", bw.descriptor().variant},
          {"bw_us", m_bw * 1e6},
          {"bw_gbps", bw_bytes / m_bw / 1e9},
          {"bw_1thread_us", m_bw1 * 1e6},
          {"pct_of_bw", 100.0 * (bytes / m_op) / (bw_bytes / m_bw)},
          {"ratio_to_best_bw", m_op / std::min(m_bw, m_bw1)}};
}

nlohmann::json bench_one(const Args& a, Registry& reg, Kernel& op,
                         const std::map<std::string, double>& given) {
  const registry::Descriptor& d = op.descriptor();
  for (const auto& [name, v] : given) {
    const registry::Input* in = d.find_input(name);
    if (!in || in->role != registry::Input::Role::scalar) {
      throw UsageError("--scalar '" + name + "': " + d.op + " has no such scalar argument");
    }
  }
  return d.shape.elementwise ? bench_dense(a, reg, op, given) : bench_sparse(a, reg, op, given);
}

void print_one(const nlohmann::json& j) {
  if (j.contains("rows_per_s")) {
    std::printf("%s  var [%lld, %lld], %lld indexed rows (random, with repeats), %lld reps\n",
                j["variant"].get<std::string>().c_str(), j["rows"].get<long long>(),
                j["cols"].get<long long>(), j["indices"].get<long long>(),
                j["reps"].get<long long>());
    std::printf("  median %.1f us   %.3g rows/s   %.2f GB/s over the touched rows\n",
                j["op_us"].get<double>(), j["rows_per_s"].get<double>(),
                j["op_gbps"].get<double>());
    return;
  }
  std::printf("%s  n=%lld  threads=%d  %lld reps (medians, interleaved)\n",
              j["variant"].get<std::string>().c_str(), j["n"].get<long long>(),
              j["threads"].get<int>(), j["reps"].get<long long>());
  std::printf("  op                  %10.2f us  %7.2f GB/s\n", j["op_us"].get<double>(),
              j["op_gbps"].get<double>());
  std::printf("  bandwidth (%d thr)   %10.2f us  %7.2f GB/s   op at %.1f%% of its GB/s\n",
              j["threads"].get<int>(), j["bw_us"].get<double>(), j["bw_gbps"].get<double>(),
              j["pct_of_bw"].get<double>());
  std::printf("  bandwidth (1 thr)   %10.2f us\n", j["bw_1thread_us"].get<double>());
  std::printf("  op / faster bandwidth kernel = %.2fx   (%.0f B moved per element)\n",
              j["ratio_to_best_bw"].get<double>(),
              j["bytes_per_call"].get<double>() / j["n"].get<double>());
}

}  // namespace

int cmd_bench(const Args& a) {
  auto reg = Registry::open(registry_dir(a));
  const std::map<std::string, double> given = scalar_options(a);
  if (a.get_int("n", 1) < 1 || a.get_int("threads", 1) < 1) {
    throw UsageError("--n and --threads must be positive");
  }
  const std::string target = a.positional.at(0);
  if (target != "all") {
    const nlohmann::json j =
        bench_one(a, *reg, reg->select(target, attr_options(a), a.get("isa")), given);
    if (a.has("json")) {
      std::cout << j.dump(2) << "\n";
    } else {
      print_one(j);
    }
    return 0;
  }
  // `opforge bench all`: every optimizer op of the registry (default attrs, best ISA), so a
  // new op in the op table is benchmarked by construction.
  if (!given.empty() || a.has("attr")) throw UsageError("bench all takes no --scalar or --attr");
  nlohmann::json all = nlohmann::json::array();
  if (!a.has("json")) {
    std::printf(
        "| op | variant | time (us) | GB/s | %% of same-traffic bandwidth kernel | rows/s |\n");
    std::printf("|---|---|---|---|---|---|\n");
  }
  for (const auto& op : reg->ops()) {
    if (reg->variants(op).front().kind != "optimizer") continue;
    const nlohmann::json j = bench_one(a, *reg, reg->select(op, {}, a.get("isa")), {});
    all.push_back(j);
    if (a.has("json")) continue;
    char pct[32] = "-", rows[32] = "-";
    if (j.contains("pct_of_bw")) {
      std::snprintf(pct, sizeof pct, "%.1f%%", j["pct_of_bw"].get<double>());
    }
    if (j.contains("rows_per_s")) {
      std::snprintf(rows, sizeof rows, "%.3g", j["rows_per_s"].get<double>());
    }
    std::printf("| %s | %s | %.1f | %.1f | %s | %s |\n", op.c_str(),
                j["variant"].get<std::string>().c_str(), j["op_us"].get<double>(),
                j["op_gbps"].get<double>(), pct, rows);
    std::fflush(stdout);
  }
  if (a.has("json")) std::cout << all.dump(2) << "\n";
  return 0;
}

}  // namespace opforge::cli
