// opforge bench OP --n N: median time of the op, and of the bandwidth kernel that reads and
// writes the same bytes, in the same process, interleaved (the host is shared and noisy:
// only same-run ratios mean anything). The bandwidth kernel runs at the op's thread count
// and at 1 thread: small tensors must not pay a thread-pool dispatch.
// opforge bench OP --n N --split K[,K...]: the whole-tensor call against the chunked update
// (consecutive calls of K elements), interleaved on the same buffers.
// opforge bench OP --model PRESET: multi-tensor apply (bench_model.cpp).
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dsl/elementwise_schedule.h"
#include "opforge/runtime.hpp"
#include "registry/builder/tuning.h"
#include "registry/cli/bench/bench_model.h"
#include "registry/cli/bench/bench_nn.h"
#include "registry/cli/bench/bench_workload.h"
#include "registry/cli/commands.h"
#include "registry/cli/inspected_kernel.h"
#include "registry/cli/preview_kernel.h"
#include "registry/cli/user_rules.h"
#include "runtime/thread_pool.h"

namespace opforge::cli {

namespace {

// Rows updated per second for a sparse op.
// Options that do not apply to what is benched: an error, never silently ignored.
void refuse_options(const Args& a, std::initializer_list<const char*> names, const char* why) {
  for (const char* o : names) {
    if (a.has(o)) throw UsageError(std::string("--") + o + " does not apply here: " + why);
  }
}

nlohmann::json bench_sparse(const Args& a, Registry& reg, Kernel& op,
                            const std::map<std::string, double>& given) {
  const registry::Descriptor& d = op.descriptor();
  const int64_t rows = a.get_int("rows", 100000), cols = a.get_int("cols", 128);
  const int64_t count = a.get_int("indices", rows);
  if (rows < 1 || cols < 1 || count < 1) {
    throw UsageError("--rows, --cols, --indices must be positive");
  }
  SparseWorkload w(d, rows, cols, count, given);
  reg.set_num_threads(static_cast<int>(a.get_int("threads", 2, 1, kMaxThreads)));
  auto call = [&] { return time_call(op, w); };
  call();
  const double once = std::max(1e-7, call());
  const int64_t reps = a.has("reps") ? a.get_int("reps", 0, 1, 100000000)
                                     : std::clamp<int64_t>(int64_t(1.0 / once), 11, 2001);
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
// and ISA; or, with --set, the registered variant the op previews) is compared in a loop of
// its own, on its own copy of the data: interleaved with the
// op's timed calls it perturbed them (Adams2019's fixed 131072-element tiles take 3.2 ms at
// N = 3e4 and leave the op's next call at 42 us instead of 10.7, AVX-512, 2 threads). There
// each timed call follows an untimed call of the same kernel, so both are timed awake.
nlohmann::json bench_dense(const Args& a, Registry& reg, Kernel& op,
                           const std::map<std::string, double>& given, Kernel* twin) {
  const registry::Descriptor& d = op.descriptor();
  const int64_t n = a.get_int("n", 1000000);
  const int threads = static_cast<int>(a.get_int("threads", 2, 1, kMaxThreads));
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
  // Idle: each call sleeps first, so fewer reps (201 x 3 series x 2 ms is a few seconds).
  const int64_t reps =
      a.has("reps") ? a.get_int("reps", 0, 1, 100000000)
                    : std::clamp<int64_t>(int64_t(0.3 / once), 21, regime().idle ? 201 : 5001);
  std::vector<double> t_op, t_bw, t_bw1, t_hand, t_twin;
  std::unique_ptr<Workload> wt(twin ? new Workload(twin->descriptor(), n, given) : nullptr);
  const int rounds = 5;  // thread-count switches happen between rounds, never inside timing
  for (int r = 0; r < rounds; ++r) {
    // Exactly `reps` timed calls in all (--reps 2 times two, not one per round).
    const int64_t count = reps * (r + 1) / rounds - reps * r / rounds;
    if (count == 0) continue;
    reg.set_num_threads(threads);
    time_call(op, wo), time_call(bw, wb);  // wake the pool
    for (int64_t i = 0; i < count; ++i) {
      t_op.push_back(time_call(op, wo));
      t_bw.push_back(time_call(bw, wb));
    }
    reg.set_num_threads(1);
    time_call(bw, wb);
    for (int64_t i = 0; i < count; ++i) t_bw1.push_back(time_call(bw, wb));
  }
  if (twin) {
    reg.set_num_threads(threads);
    const double twin_once = std::max(1e-7, time_call(*twin, *wt));
    // The twin may be far slower (fixed tiles at small N): about 0.3 s of it, at least 5.
    const int64_t pairs =
        a.has("reps") ? reps : std::clamp<int64_t>(int64_t(0.3 / twin_once), 5, reps);
    // Which goes first alternates, so neither gains from the other's cache or clock state.
    auto hand = [&] { time_call(op, wo), t_hand.push_back(time_call(op, wo)); };
    auto other = [&] { time_call(*twin, *wt), t_twin.push_back(time_call(*twin, *wt)); };
    for (int64_t i = 0; i < pairs; ++i) {
      if (i % 2 == 0) {
        hand(), other();
      } else {
        other(), hand();
      }
    }
  }
  const double m_op = median(t_op), m_bw = median(t_bw), m_bw1 = median(t_bw1);
  nlohmann::json side_by_side = nlohmann::json::array();
  const bool preview = a.has("set");
  for (auto [k, t] : {std::pair<Kernel*, std::vector<double>*>{&op, &t_hand}, {twin, &t_twin}}) {
    if (t->empty()) continue;  // no twin: no side-by-side loop ran
    const double m = median(*t);
    const std::string label = !preview   ? k->descriptor().schedule.recipe
                              : k == &op ? "preview"
                                         : "registered";
    side_by_side.push_back({{"variant", k->descriptor().variant},
                            {"recipe", k->descriptor().schedule.recipe},
                            {"label", label},
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
  const int64_t l3 = builder::this_machine().l3_bytes;
  const CacheFit fit = cache_fit(d, n, l3);
  j["l3_bytes"] = l3;
  j["footprint_bytes"] = fit.footprint_bytes;
  j["fits_in_l3"] = fit.fits;
  if (fit.dram_n > 0) j["dram_n"] = fit.dram_n;
  if (twin) {
    j["side_by_side"] = side_by_side;  // hand and autoscheduled (or preview and registered)
    // Per pair, the first's time over the second's. The quartiles are how much single calls
    // vary in this run; the median's own uncertainty is the box-plot notch, +-1.58 (q3 - q1) /
    // sqrt(pairs) (about 95%, McGill, Tukey and Larsen 1978): a notch holding 1.0 is parity.
    const std::vector<double> ratio = paired_ratios(t_hand, t_twin);
    const Quartiles q = quartiles(ratio);
    const double notch = 1.58 * (q.q3 - q.q1) / std::sqrt(static_cast<double>(ratio.size()));
    j["paired"] = {{"of", side_by_side[0]["label"]},
                   {"to", side_by_side[1]["label"]},
                   {"median", q.median},
                   {"notch", notch},
                   {"q1", q.q1},
                   {"q3", q.q3},
                   {"pairs", ratio.size()}};
  }
  return j;
}

// The whole-tensor call against the same update as consecutive calls of K elements
// (Kernel::call_chunked), on the same buffers, interleaved (the order rotates every rep). No
// bandwidth kernel or twin: at the sizes this is for (over 1 GB per tensor) their buffers
// would not fit beside the op's.
nlohmann::json bench_split(const Args& a, Registry& reg, Kernel& op,
                           const std::map<std::string, double>& given) {
  const registry::Descriptor& d = op.descriptor();
  if (!op.splittable()) {
    throw UsageError("--split: " + d.op + " is not splittable (" +
                     (d.kind == "nn"        ? "an NN op"
                      : d.shape.elementwise ? "its update reads whole-tensor reductions"
                                            : "a sparse op") +
                     "): it cannot be updated in chunks");
  }
  const int64_t n = a.get_int("n", 1000000);
  const int threads = static_cast<int>(a.get_int("threads", 2, 1, kMaxThreads));
  const std::vector<int64_t> chunks = count_list(a.get("split"), "--split");
  Workload w(d, n, given);
  const double bytes = static_cast<double>(n) * bytes_per_element(d);
  double tensor_bytes = 4;
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::state) {
      tensor_bytes = registry::dtype_bytes(in.dtype);
      break;
    }
  }
  reg.set_num_threads(threads);
  auto run = [&](int64_t chunk) {  // chunk 0: the whole-tensor call
    return timed_seconds([&] {
      if (chunk == 0) {
        op.call(w.tensors.data(), w.tensors.size(), w.scalars.data(), w.scalars.size());
      } else {
        op.call_chunked(w.tensors.data(), w.tensors.size(), w.scalars.data(), w.scalars.size(),
                        chunk);
      }
    });
  };
  std::vector<int64_t> series = {0};
  series.insert(series.end(), chunks.begin(), chunks.end());
  for (int64_t c : series) run(c);  // warm up: pages, pool, caches
  const double once = std::max(1e-7, run(0));
  const int64_t reps = a.has("reps") ? a.get_int("reps", 0, 1, 100000000)
                                     : std::clamp<int64_t>(int64_t(0.3 / once), 7, 2001);
  if (reps < 1) throw UsageError("--reps must be positive");
  std::vector<std::vector<double>> t(series.size());
  for (int64_t r = 0; r < reps; ++r) {
    for (size_t s = 0; s < series.size(); ++s) {
      const size_t k = (s + static_cast<size_t>(r)) % series.size();
      t[k].push_back(run(series[k]));
    }
  }
  const double m_whole = median(t[0]);
  // Kernel calls per update: past the per-call limit the runtime splits the "whole" call too
  // (into the fewest slices of at most `limit`, rounded down to 64 elements), and caps K.
  const int64_t limit = std::min<int64_t>(d.shape.max_elements, INT32_MAX);
  const int64_t step = limit >= 64 ? limit / 64 * 64 : limit;
  auto row = [&](size_t k) {
    const double m = median(t[k]);
    const int64_t c = series[k] == 0 ? n : std::min({series[k], n, limit});
    const int64_t calls =
        series[k] == 0 ? (n > limit ? (n + step - 1) / step : 1) : (n + c - 1) / c;
    nlohmann::json j = {{"chunk", c},
                        {"requested", series[k] == 0 ? n : series[k]},
                        {"calls", calls},
                        {"us", m * 1e6},
                        {"min_us", *std::min_element(t[k].begin(), t[k].end()) * 1e6},
                        {"gbps", bytes / m / 1e9}};
    if (k > 0) {
      j["time_ratio"] = m / m_whole;                 // < 1: the chunked update is faster
      j["speedup_pct"] = 100.0 * (m_whole / m - 1);  // 30: 30% faster than whole
    }
    return j;
  };
  nlohmann::json chunked = nlohmann::json::array();
  for (size_t k = 1; k < series.size(); ++k) chunked.push_back(row(k));
  return {{"op", d.op},
          {"variant", d.variant},
          {"isa", d.target.isa},
          {"n", n},
          {"threads", threads},
          {"reps", reps},
          {"bytes_per_update", bytes},
          {"tensor_bytes", static_cast<double>(n) * tensor_bytes},
          {"whole", row(0)},
          {"chunked", chunked}};
}

void print_split(const nlohmann::json& j) {
  std::printf(
      "%s  n=%lld (%.3g GiB per tensor, %.3g GB moved per update)  threads=%d  %lld "
      "reps (medians, interleaved)\n",
      j["variant"].get<std::string>().c_str(), j["n"].get<long long>(),
      j["tensor_bytes"].get<double>() / 1073741824.0, j["bytes_per_update"].get<double>() / 1e9,
      j["threads"].get<int>(), j["reps"].get<long long>());
  auto line = [](const char* label, const nlohmann::json& r) {
    std::printf("  %-20s %8lld calls %13.1f us (min %.1f)  %7.2f GB/s", label,
                r["calls"].get<long long>(), r["us"].get<double>(), r["min_us"].get<double>(),
                r["gbps"].get<double>());
  };
  line("whole tensor", j["whole"]);
  std::printf("\n");
  for (const auto& r : j["chunked"]) {
    const std::string label = "chunk " + std::to_string(r["chunk"].get<long long>());
    line(label.c_str(), r);
    const double ratio = r["time_ratio"].get<double>();
    std::printf("   %.3fx the whole call's time (%.1f%% %s)", ratio, std::fabs(ratio - 1) * 100,
                ratio > 1 ? "longer" : "shorter");
    if (r["requested"].get<long long>() != r["chunk"].get<long long>())
      std::printf("  [--split %lld clamped]", r["requested"].get<long long>());
    std::printf("\n");
  }
}

nlohmann::json bench_one(const Args& a, Registry& reg, Kernel& op,
                         const std::map<std::string, double>& given, Kernel* twin = nullptr) {
  const registry::Descriptor& d = op.descriptor();
  check_scalar_names(d, given);
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
  std::printf("%s%s  n=%lld  threads=%d  %lld reps (medians, interleaved)\n",
              j["variant"].get<std::string>().c_str(),
              j.contains("set") ? (" (preview: " + j["set"].get<std::string>() + ")").c_str() : "",
              j["n"].get<long long>(), j["threads"].get<int>(), j["reps"].get<long long>());
  std::printf("  op                  %10.2f us  %7.2f GB/s\n", j["op_us"].get<double>(),
              j["op_gbps"].get<double>());
  std::printf("  bandwidth (%d thr)   %10.2f us  %7.2f GB/s   op at %.1f%% of its GB/s\n",
              j["threads"].get<int>(), j["bw_us"].get<double>(), j["bw_gbps"].get<double>(),
              j["pct_of_bw"].get<double>());
  if (j["threads"].get<int>() != 1) {  // at one thread the row above is the same kernel
    std::printf("  bandwidth (1 thr)   %10.2f us\n", j["bw_1thread_us"].get<double>());
  }
  if (j.contains("side_by_side")) {
    std::printf("  side by side (same run, %% of the %d-thread bandwidth kernel's GB/s):\n",
                j["threads"].get<int>());
    for (const auto& v : j["side_by_side"]) {
      std::printf("    %-12s %10.2f us  %7.2f GB/s  %6.1f%%   %s\n",
                  v["label"].get<std::string>().c_str(), v["op_us"].get<double>(),
                  v["op_gbps"].get<double>(), v["pct_of_bw"].get<double>(),
                  v["variant"].get<std::string>().c_str());
    }
    const nlohmann::json& p = j["paired"];
    std::printf(
        "    %s / %s per pair: %.3fx median, +-%.3f (95%% notch; quartiles %.3f-%.3f, %lld "
        "pairs)\n",
        p["of"].get<std::string>().c_str(), p["to"].get<std::string>().c_str(),
        p["median"].get<double>(), p["notch"].get<double>(), p["q1"].get<double>(),
        p["q3"].get<double>(), p["pairs"].get<long long>());
  }
  std::printf("  op / faster bandwidth kernel = %.2fx   (%.0f B moved per element)\n",
              j["ratio_to_best_bw"].get<double>(),
              j["bytes_per_call"].get<double>() / j["n"].get<double>());
  if (j.value("fits_in_l3", false)) {
    const double footprint = j["footprint_bytes"].get<double>();
    char reads[32];  // below 1 MB in kB: "reads 0 MB" read as nothing
    std::snprintf(reads, sizeof reads, footprint < 1e6 ? "%.0f kB" : "%.0f MB",
                  footprint < 1e6 ? footprint / 1e3 : footprint / 1e6);
    std::printf(
        "  note: one call reads %s and this CPU's L3 holds %.0f MB (as the OS reports it):\n"
        "        back-to-back calls run partly from cache; --n 1e%ld or more measures memory\n",
        reads, j["l3_bytes"].get<double>() / 1e6,
        std::lround(std::log10(j["dram_n"].get<double>())));
  }
}

// Every table names the machine it ran on (the ISA is in each variant's name); printed with
// the results, so an error leaves stdout empty.
void print_host() {
  std::printf("%s\nregime: %s; parallel loops on the %s thread pool (OPFORGE_THREAD_POOL)\n",
              host_summary().c_str(), regime().text().c_str(),
              thread_pool::name(thread_pool::from_environment()));
}

// The machine and the regime, in every JSON result.
nlohmann::json with_regime(nlohmann::json j) {
  j["host"] = host_json();
  j["regime"] = regime().idle ? "idle" : "awake";
  if (regime().idle) j["idle_gap_us"] = regime().gap_us;
  return j;
}

}  // namespace

int cmd_bench(const Args& a) {
  apply_unchecked_scalars(a);
  set_regime(a);
  if (a.has("models")) {
    if (a.has("json")) {
      std::cout << model_list_json().dump(2) << "\n";
    } else {
      std::cout << model_list_text();
    }
    return 0;
  }
  if (!a.positional.empty()) build_rule_op_if_missing(a, a.positional.at(0));
  auto reg = Registry::open(registry_dir(a));
  const std::map<std::string, double> given = scalar_options(a);
  if (a.get_int("n", 1) < 1 || a.get_int("threads", 1, 1, kMaxThreads) < 1) {
    throw UsageError("--n and --threads must be positive");
  }
  const std::string target = a.positional.at(0);
  if (a.has("align") && !a.has("model")) throw UsageError("--align goes with --model");
  if (a.has("set") && (a.has("model") || a.has("split"))) {
    throw UsageError("--set times a preview against the registered variant: drop --model/--split");
  }
  // What applies to which kind of op, once: NN ops are sized by --shape and timed cold (or
  // --warm); optimizer ops by --n (dense) or --rows/--cols/--indices (sparse), timed warm.
  const bool nn =
      target == "nn" || (target != "all" && reg->variants(target).front().shape.named_dims);
  if (nn) {
    refuse_options(a, {"n", "rows", "cols", "indices", "model", "split", "align"},
                   "NN ops take their sizes by --shape");
  } else {
    refuse_options(a, {"shape"}, "it sizes NN ops; optimizer ops take --n");
    refuse_options(a, {"warm"}, "optimizer ops are timed warm; --n 1e7 or more measures memory");
  }
  if (a.has("model")) {
    if (target == "all") throw UsageError("--model takes one op, not all");
    for (const char* o : {"n", "split", "rows", "cols", "indices"}) {
      if (a.has(o)) {
        throw UsageError(std::string("--model sets the tensors and their sizes: drop --") + o);
      }
    }
    Kernel& k = op_kernel(*reg, a, target);
    check_scalar_names(k.descriptor(), given);
    const nlohmann::json j = with_regime(bench_model(a, *reg, k, given));
    if (a.has("json")) {
      std::cout << j.dump(2) << "\n";
    } else {
      print_host();
      print_model(j);
    }
    return 0;
  }
  if (a.has("split")) {
    if (target == "all") throw UsageError("--split takes one op, not all");
    if (a.has("rows") || a.has("cols") || a.has("indices")) {
      throw UsageError("--split is for dense ops: give --n, not --rows/--cols/--indices");
    }
    Kernel& k = op_kernel(*reg, a, target);
    check_scalar_names(k.descriptor(), given);
    const nlohmann::json j = with_regime(bench_split(a, *reg, k, given));
    if (a.has("json")) {
      std::cout << j.dump(2) << "\n";
    } else {
      print_host();
      print_split(j);
    }
    return 0;
  }
  if (target == "nn") return bench_nn_all(a, *reg);
  if (nn) {
    const nlohmann::json j = with_regime(bench_nn(a, *reg, target, given));
    if (a.has("json")) {
      std::cout << j.dump(2) << "\n";
    } else {
      print_host();
      print_nn(j);
    }
    return 0;
  }
  if (a.has("set") && target == "all") throw UsageError("--set takes one op, not all");
  if (target != "all") {
    Kernel& k = op_kernel(*reg, a, target);
    if (k.descriptor().shape.elementwise) {
      refuse_options(a, {"rows", "cols", "indices"}, "they size sparse ops; dense ops take --n");
    } else {
      refuse_options(a, {"n"}, "sparse ops take --rows, --cols and --indices");
    }
    nlohmann::json j;
    if (a.has("set")) {
      // The preview against the registered variant, side by side in the same run.
      const std::map<std::string, int64_t> set = set_options(a);
      const LoadedPreview p = load_preview(*reg, k.descriptor(), set, cache_dir(a), a.all("rules"));
      if (!p.kernel->descriptor().shape.elementwise) {
        throw UsageError("--set: " + target + " is not a dense elementwise op");
      }
      j = with_regime(bench_one(a, *reg, *p.kernel, given, &k));
      j["set"] = set_text(set);
    } else {
      // Without --variant, an autoscheduled twin of the selected variant runs alongside.
      j = with_regime(bench_one(a, *reg, k, given,
                                a.has("variant") ? nullptr : auto_twin(*reg, k.descriptor())));
    }
    if (a.has("json")) {
      std::cout << j.dump(2) << "\n";
    } else {
      print_host();
      print_one(j);
    }
    return 0;
  }
  // `opforge bench all`: every optimizer op of the registry (default attrs, best ISA), so a
  // new op in the op table is benchmarked by construction.
  if (!given.empty() || a.has("attr")) throw UsageError("bench all takes no --scalar or --attr");
  nlohmann::json all = nlohmann::json::array();
  if (!a.has("json")) {
    print_host();
    std::printf(
        "| op | variant | time (us) | GB/s | %% of same-traffic bandwidth kernel | rows/s |\n");
    std::printf("|---|---|---|---|---|---|\n");
  }
  for (const auto& op : reg->ops()) {
    if (reg->variants(op).front().kind != "optimizer") continue;
    const nlohmann::json j = with_regime(bench_one(a, *reg, reg->select(op, {}, a.get("isa")), {}));
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

Command bench_command() {
  return {
      {"bench",
       "OP|all|nn",
       "Time an op (or every optimizer op: all; every NN op: nn) against the bandwidth kernel "
       "with the same traffic and, for NN ops, every algorithm that applies and oneDNN",
       {registry_option(),
        rules_option(),
        cache_option(),
        {"n", "N", "elements per tensor (default 1e6; accepts 1e7)"},
        {"rows", "R", "sparse ops: rows of the states (default 1e5)"},
        {"cols", "C", "sparse ops: columns (default 128)"},
        {"indices", "K", "sparse ops: indexed rows per call (default: rows)"},
        attr_option(),
        isa_option(),
        variant_option(),
        {"threads", "N", "threads for the op (default 2)"},
        {"reps", "N", "timed calls per kernel (default: about 1 s of work)"},
        {"regime", "awake|idle",
         "awake (default): timed calls back to back, the thread pool still spinning "
         "(OMP_WAIT_POLICY=active unless set); idle: a sleep before each timed call (never "
         "timed), so every call pays the workers' wake-up, as a step between forward and "
         "backward passes does (OMP_WAIT_POLICY=passive unless set)"},
        {"idle-gap", "US", "--regime idle: microseconds of sleep before each call (default 2000)"},
        {"scalar", "NAME=VALUE", "a scalar argument (default 0.5; 1 for integer scalars)", true},
        {"set", "NAME=VALUE",
         "time a preview with this schedule param changed (dense ops: " +
             dsl::ElementwiseSchedule::param_names() +
             "; NN ops: their algorithm's, e.g. the row ops' double_buffer, db_rows; compiled "
             "into the cache, not the registry) side by side with the registered variant",
         true},
        {"split", "K[,K...]",
         "splittable dense ops: time the whole-tensor call against the update as consecutive "
         "calls of K elements (2^20, 1e6; several comma-separated), interleaved on the same "
         "buffers; no bandwidth kernel"},
        {"model", "PRESET",
         "multi-tensor apply on a model preset (" + model_names() +
             "): one call over flat buffers holding every tensor, one call per tensor on the "
             "same buffers, and the bandwidth kernel, interleaved; elementwise ops only"},
        {"align", "N", "--model: each tensor starts at a multiple of N elements (default 32)"},
        {"shape", "NAME=D0,D1,...",
         "NN ops: a tensor's shape (outermost first); default: the op's example call", true},
        {"warm", "",
         "NN ops: skip the cache eviction before each timed call (default: cold caches, a "
         "pass over twice the L3 first)"},
        {"models", "", "list the model presets (tensors, elements, source) and exit", false, true},
        unchecked_scalars_option(),
        json_option()}},
      cmd_bench};
}

}  // namespace opforge::cli
