// opforge bench OP --n N: median time of the op, and of the bandwidth kernel that reads and
// writes the same bytes, in the same process, interleaved (the host is shared and noisy:
// only same-run ratios mean anything). The bandwidth kernel runs at the op's thread count
// and at 1 thread: small tensors must not pay a thread-pool dispatch.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "opforge/runtime.hpp"
#include "registry/cli/bench_workload.h"
#include "registry/cli/commands.h"

namespace opforge::cli {

namespace {

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
  auto call = [&] { return time_call(op, w); };
  call();
  const double once = std::max(1e-7, call());
  const int64_t reps =
      a.has("reps") ? a.get_int("reps", 0) : std::clamp<int64_t>(int64_t(1.0 / once), 11, 2001);
  std::vector<double> t;
  for (int64_t r = 0; r < reps; ++r) t.push_back(call());
  const double m = median(t);
  const double bytes =
      static_cast<double>(count) * static_cast<double>(cols) * bytes_per_element(d);
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
// bandwidth kernel at 1 thread too. `twin` (an autoscheduled variant of the same op, attrs
// and ISA) is timed in the same interleaved loop, on its own copy of the data.
nlohmann::json bench_dense(const Args& a, Registry& reg, Kernel& op,
                           const std::map<std::string, double>& given, Kernel* twin) {
  const registry::Descriptor& d = op.descriptor();
  const int64_t n = a.get_int("n", 1000000);
  const int threads = static_cast<int>(a.get_int("threads", 2));
  Kernel* bwk = bandwidth_kernel(reg, d);
  if (!bwk) throw Error(d.variant + ": the registry has no bandwidth kernel with its traffic");
  Kernel& bw = *bwk;
  Workload wo(d, n, given), wb(bw.descriptor(), n, {});
  const double bytes = static_cast<double>(n) * bytes_per_element(d),
               bw_bytes = static_cast<double>(n) * bytes_per_element(bw.descriptor());

  // Reps: about 0.3 s of op time per series, at least 21, at most 5001.
  reg.set_num_threads(threads);
  time_call(op, wo);
  const double once = std::max(1e-7, time_call(op, wo));
  const int64_t reps =
      a.has("reps") ? a.get_int("reps", 0) : std::clamp<int64_t>(int64_t(0.3 / once), 21, 5001);
  std::vector<double> t_op, t_bw, t_bw1, t_twin;
  std::unique_ptr<Workload> wt(twin ? new Workload(twin->descriptor(), n, given) : nullptr);
  const int rounds = 5;  // thread-count switches happen between rounds, never inside timing
  for (int r = 0; r < rounds; ++r) {
    reg.set_num_threads(threads);
    time_call(op, wo), time_call(bw, wb);  // wake the pool
    if (twin) time_call(*twin, *wt);
    for (int64_t i = 0; i < (reps + rounds - 1) / rounds; ++i) {
      t_op.push_back(time_call(op, wo));
      t_bw.push_back(time_call(bw, wb));
      if (twin) t_twin.push_back(time_call(*twin, *wt));
    }
    reg.set_num_threads(1);
    time_call(bw, wb);
    for (int64_t i = 0; i < (reps + rounds - 1) / rounds; ++i) t_bw1.push_back(time_call(bw, wb));
  }
  const double m_op = median(t_op), m_bw = median(t_bw), m_bw1 = median(t_bw1);
  nlohmann::json side_by_side = nlohmann::json::array();
  for (auto [k, t] : {std::pair<Kernel*, std::vector<double>*>{&op, &t_op}, {twin, &t_twin}}) {
    if (!k) continue;
    const double m = median(*t);
    side_by_side.push_back({{"variant", k->descriptor().variant},
                            {"recipe", k->descriptor().schedule.recipe},
                            {"op_us", m * 1e6},
                            {"op_gbps", bytes / m / 1e9},
                            {"pct_of_bw", 100.0 * (bytes / m) / (bw_bytes / m_bw)}});
  }
  nlohmann::json j = {{"op", d.op},
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
  if (twin) j["side_by_side"] = side_by_side;  // hand and autoscheduled, same run
  return j;
}

nlohmann::json bench_one(const Args& a, Registry& reg, Kernel& op,
                         const std::map<std::string, double>& given, Kernel* twin = nullptr) {
  const registry::Descriptor& d = op.descriptor();
  for (const auto& [name, v] : given) {
    const registry::Input* in = d.find_input(name);
    if (!in || in->role != registry::Input::Role::scalar) {
      throw UsageError("--scalar '" + name + "': " + d.op + " has no such scalar argument");
    }
  }
  return d.shape.elementwise ? bench_dense(a, reg, op, given, twin)
                             : bench_sparse(a, reg, op, given);
}

// The autoscheduled twin of a selected variant ("<id>__auto"), when the registry has one
// this CPU runs.
Kernel* auto_twin(Registry& reg, const registry::Descriptor& d) {
  const std::string id = d.variant + "__auto";
  for (const auto& e : reg.index().variants) {
    if (e.variant != id) continue;
    try {
      return &reg.load(id);
    } catch (const Error&) {
      return nullptr;  // its CPU features are missing
    }
  }
  return nullptr;
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
  if (j.contains("side_by_side")) {
    std::printf("  side by side (same run, %% of the %d-thread bandwidth kernel's GB/s):\n",
                j["threads"].get<int>());
    for (const auto& v : j["side_by_side"]) {
      std::printf("    %-12s %10.2f us  %7.2f GB/s  %6.1f%%   %s\n",
                  v["recipe"].get<std::string>().c_str(), v["op_us"].get<double>(),
                  v["op_gbps"].get<double>(), v["pct_of_bw"].get<double>(),
                  v["variant"].get<std::string>().c_str());
    }
  }
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
    Kernel& k = op_kernel(*reg, a, target);
    // Without --variant, an autoscheduled twin of the selected variant runs alongside.
    const nlohmann::json j =
        bench_one(a, *reg, k, given, a.has("variant") ? nullptr : auto_twin(*reg, k.descriptor()));
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
