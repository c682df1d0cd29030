#include "registry/cli/bench/bench_nn.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include "registry/cli/bench/bench_workload.h"
#include "registry/cli/commands.h"
#include "registry/cli/inspected_kernel.h"
#include "registry/cli/peers/onednn.h"
#include "registry/cli/preview_kernel.h"
#include "registry/format/shape_expr.h"

namespace opforge::cli {

namespace {

using Clock = std::chrono::steady_clock;

// 64-byte aligned storage, so no kernel or peer is favoured by its buffers' alignment.
struct Buffer {
  std::unique_ptr<void, decltype(&std::free)> p{nullptr, &std::free};
  explicit Buffer(size_t bytes)
      : p(std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64)), &std::free) {
    if (!p) throw std::bad_alloc();
  }
};

// One call's tensors (inputs random in [-1, 1), fixed seed; outputs zero) and scalars.
struct Problem {
  std::vector<Buffer> buffers;
  std::vector<Tensor> tensors;
  std::map<std::string, double> scalars;
  ArgViews views;
  std::string text;  // "x=4096,1024 eps=1e-05"

  void add(const std::string& name, registry::DType t, const std::vector<int64_t>& shape,
           bool random) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    buffers.emplace_back(static_cast<size_t>(n) * registry::dtype_bytes(t));
    void* data = buffers.back().p.get();
    std::memset(data, 0, static_cast<size_t>(n) * registry::dtype_bytes(t));
    if (random && t == registry::DType::b8) std::memset(data, 1, static_cast<size_t>(n));  // true
    if (random && (t == registry::DType::f32 || t == registry::DType::bf16)) {
      std::mt19937 rng(static_cast<unsigned>(buffers.size()));
      std::uniform_real_distribution<float> u(-1.f, 1.f);
      auto* f = static_cast<float*>(data);
      auto* h = static_cast<uint16_t*>(data);
      for (int64_t i = 0; i < n; ++i) {
        const float v = u(rng);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        if (t == registry::DType::f32) {
          f[i] = v;
        } else {
          h[i] = static_cast<uint16_t>(bits >> 16);  // truncated: any finite bf16 times alike
        }
      }
    }
    tensors.push_back({name, data, t, shape});
  }
  void make_views() {
    views.tensors.clear();
    views.scalars.clear();
    for (const auto& t : tensors)
      views.tensors.push_back(
          {t.name.c_str(), t.data, t.dtype, t.shape.data(), static_cast<int>(t.shape.size())});
    for (const auto& [n, v] : scalars) views.scalars.push_back({n.c_str(), v});
  }
};

std::vector<int64_t> parse_shape(const std::string& name, const std::string& text) {
  std::vector<int64_t> s;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      s.push_back(v);
    } catch (const std::exception&) {
      throw UsageError("--shape " + name + "=" + text + ": expected D0,D1,... (integers >= 0)");
    }
  }
  return s;
}

// The inputs of `d` from its example, overridden by --shape NAME=D0,D1 and --scalar.
Problem make_problem(const registry::Descriptor& d, const std::vector<std::string>& shapes,
                     const std::map<std::string, double>& given) {
  std::map<std::string, std::string> values;
  std::stringstream ss(d.cost.example);
  std::string tok;
  while (ss >> tok) {
    const auto eq = tok.find('=');
    if (eq != std::string::npos) values[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  for (const auto& s : shapes) {
    auto [name, text] = split_assignment(s, "shape");
    if (!d.find_input(name) || d.find_input(name)->role == registry::Input::Role::scalar)
      throw UsageError("--shape " + name + ": op '" + d.op + "' has no tensor input '" + name +
                       "'");
    values[name] = text;
  }
  Problem p;
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::scalar) {
      auto g = given.find(in.name);
      if (g != given.end()) {
        p.scalars[in.name] = g->second;
      } else if (values.count(in.name)) {
        p.scalars[in.name] = std::stod(values[in.name]);
      } else {
        throw UsageError("give --scalar " + in.name + "=VALUE (the op's example has none)");
      }
      char value[32];
      std::snprintf(value, sizeof value, "%g", p.scalars[in.name]);
      p.text += (p.text.empty() ? "" : " ") + in.name + "=" + value;
      continue;
    }
    if (!values.count(in.name))
      throw UsageError("give --shape " + in.name + "=D0,D1,... (the op's example has none)");
    p.add(in.name, in.dtype, parse_shape(in.name, values[in.name]), true);
    p.text += (p.text.empty() ? "" : " ") + in.name + "=" + values[in.name];
  }
  for (const auto& [name, v] : given) {
    if (!d.find_input(name))
      throw UsageError("--scalar " + name + ": op '" + d.op + "' has no such scalar");
  }
  p.make_views();
  return p;
}

double cost(const std::string& expr, const std::map<std::string, int64_t>& env) {
  if (expr.empty()) return 0;
  auto v = registry::ShapeExpr::parse(expr).evaluate(env);
  return v ? static_cast<double>(*v) : 0;
}

}  // namespace

nlohmann::json bench_nn(const Args& a, Registry& reg, const std::string& op,
                        const std::map<std::string, double>& given) {
  std::map<std::string, std::string> attrs = attr_options(a);
  // The tensors' dtypes come from a variant with the asked attrs (a bf16 variant's
  // activations, a bool mask), before the variant itself is selected by shape.
  const registry::Descriptor d0 =
      a.has("variant") ? reg.descriptor(a.get("variant")) : reg.choose(op, attrs, a.get("isa"));
  if (!d0.shape.named_dims) throw UsageError("op '" + op + "' is not an NN op");
  Problem p = make_problem(d0, a.all("shape"), given);
  const int threads = static_cast<int>(a.get_int("threads", 2, 1, kMaxThreads));
  reg.set_num_threads(threads);
  Kernel& registered =
      a.has("variant") ? op_kernel(reg, a, op)
                       : reg.select(op, attrs, p.views.tensors.data(), p.views.tensors.size(),
                                    p.views.scalars.data(), p.views.scalars.size(), a.get("isa"));
  // --set: the preview is the op timed (first row), the registered variant beside it.
  const std::map<std::string, int64_t> set = set_options(a);
  Kernel& k =
      set.empty()
          ? registered
          : *load_preview(reg, registered.descriptor(), set, cache_dir(a), a.all("rules")).kernel;
  const registry::Descriptor& d = k.descriptor();
  const size_t n_inputs = p.tensors.size();
  const auto shapes = k.output_shapes(p.tensors, p.scalars);
  for (size_t j = 0; j < d.outputs.size(); ++j)
    p.add(d.outputs[j].name, d.outputs[j].dtype, shapes[j], false);
  p.make_views();
  const auto env = k.shape_values(p.views.tensors.data(), n_inputs, p.views.scalars.data(),
                                  p.views.scalars.size());
  const double flops = cost(d.cost.flops, env), bytes = cost(d.cost.bytes, env);

  // Every other algorithm that applies to these shapes, on the same ISA.
  struct Timed {
    std::string label, variant;
    std::function<void()> run;
    std::vector<double> t;
  };
  std::vector<Timed> runs;
  auto call = [&p](Kernel& kk) {
    return [&p, &kk] {
      kk.call(p.views.tensors.data(), p.views.tensors.size(), p.views.scalars.data(),
              p.views.scalars.size());
    };
  };
  const std::string label = d.algorithm.name.empty() ? "opforge" : "opforge " + d.algorithm.name;
  runs.push_back(
      {set.empty() ? label : label + " (" + set_text(set) + ")", d.variant, call(k), {}});
  if (!set.empty()) {
    runs.push_back({label + " (registered)", d.variant, call(registered), {}});
  } else if (!a.has("variant") && !attrs.count("algorithm")) {
    std::set<std::string> seen = {d.algorithm.name};
    for (const auto& v : reg.variants(op)) {
      if (!seen.insert(v.algorithm.name).second) continue;
      auto forced = attrs;
      forced["algorithm"] = v.algorithm.name;
      try {
        Kernel& alt = reg.select(op, forced, p.views.tensors.data(), n_inputs,
                                 p.views.scalars.data(), p.views.scalars.size(), d.target.isa);
        runs.push_back({"opforge " + v.algorithm.name, alt.descriptor().variant, call(alt), {}});
      } catch (const Error&) {
        // does not apply to these shapes
      }
    }
  }
  // The same-traffic bandwidth kernel (a copy, or an add for two-input ops) moving cost.bytes:
  // n fp32 elements per tensor of it, n = bytes / (4 * its tensors).
  Problem bw;
  if (!d.bandwidth_op.empty() && bytes > 0) {
    Kernel& bk = reg.select(d.bandwidth_op, {}, d.target.isa);
    const registry::Descriptor& bd = bk.descriptor();
    std::vector<std::string> bw_in;
    for (const auto& in : bd.inputs)
      if (in.role != registry::Input::Role::scalar) bw_in.push_back(in.name);
    const int64_t n =
        static_cast<int64_t>(bytes / (4.0 * static_cast<double>(bw_in.size() + bd.outputs.size())));
    // Its j-th input and output on the op's j-th where they hold n fp32 elements (same pages,
    // same alignment as the op's); its own buffers otherwise.
    auto bind = [&](const std::string& name, size_t op_index, size_t op_end, bool input) {
      if (op_index < op_end) {
        const Tensor& t = p.tensors[op_index];
        if (t.dtype == registry::DType::f32 && t.elements() >= n) {
          bw.tensors.push_back({name, t.data, registry::DType::f32, {n}});
          return;
        }
      }
      bw.add(name, registry::DType::f32, {n}, input);
    };
    for (size_t j = 0; j < bw_in.size(); ++j) bind(bw_in[j], j, n_inputs, true);
    for (size_t j = 0; j < bd.outputs.size(); ++j)
      bind(bd.outputs[j].name, n_inputs + j, p.tensors.size(), false);
    bw.make_views();
    runs.push_back(
        {"bandwidth (" + d.bandwidth_op + ")",
         bk.descriptor().variant,
         [&bw, &bk] { bk.call(bw.views.tensors.data(), bw.views.tensors.size(), nullptr, 0); },
         {}});
  }
  std::string peer_error;
  std::unique_ptr<peers::PeerRun> peer;
  try {
    auto peer_attrs = attrs;
    peer_attrs.erase("algorithm");
    peer = peers::onednn_peer(op, peer_attrs, p.tensors, p.scalars);
  } catch (const std::exception& e) {
    peer_error = e.what();
  }
  if (peer) runs.push_back({peer->name, "", [&peer] { peer->run(); }, {}});

  // Cold caches: before each timed call, a pass over twice the L3 evicts what the previous
  // call (the op, the peer or the copy, which share tensors) left there. Without it, at
  // 4096x1024 fp32 (a 32 MB working set on a 32 MB L3) whichever kernel ran after another on
  // the same tensors found them cached: layer_norm measured 171% of the copy with the copy on
  // its own buffers, the copy 2.4x the op's speed on the op's. --warm skips the eviction.
  const bool warm = a.has("warm");
  // Twice the L3 glibc reports, clamped to [64, 256] MB: on this VM glibc reports 320 MiB
  // (lscpu: 32 MiB), and a 640 MB pass per timed call made a run of reps take minutes.
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const size_t scrub_bytes = std::clamp<size_t>(2 * static_cast<size_t>(std::max(l3, 0L)),
                                                size_t(64) << 20, size_t(256) << 20);
  std::vector<uint8_t> scrub(warm ? 0 : scrub_bytes, 1);
  auto evict = [&scrub] {
    uint64_t sum = 0;
    for (size_t i = 0; i < scrub.size(); i += 64) sum += scrub[i]++;
    [[maybe_unused]] static volatile uint64_t sink;
    sink = sum;
  };
  auto timed = [&](const std::function<void()>& f) {
    if (!scrub.empty()) evict();
    return timed_seconds(f);
  };
  for (auto& r : runs) r.run();  // warm up: first-touch pages, JIT, thread pools
  double once = 0;
  for (auto& r : runs) once += timed(r.run);
  const int64_t reps = a.has("reps")
                           ? a.get_int("reps", 0, 1, 100000000)
                           : std::clamp<int64_t>(int64_t(2.0 / std::max(once, 1e-7)), 7, 301);
  for (int64_t i = 0; i < reps; ++i) {
    for (auto& r : runs) r.t.push_back(timed(r.run));
  }
  nlohmann::json j = {{"op", op},
                      {"variant", d.variant},
                      {"algorithm", d.algorithm.name},
                      {"caches", warm ? "warm" : "cold"},
                      {"problem", p.text},
                      {"threads", threads},
                      {"reps", reps},
                      {"isa", d.target.isa},
                      {"flops", flops},
                      {"bytes", bytes},
                      {"runs", nlohmann::json::array()}};
  const double op_s = median(runs[0].t);
  double bw_gbps = 0;
  for (const auto& r : runs) {
    const double s = median(r.t);
    nlohmann::json jr = {{"label", r.label},        {"variant", r.variant},
                         {"ms", s * 1e3},           {"gflops", flops / s / 1e9},
                         {"gbps", bytes / s / 1e9}, {"opforge_speedup", s / op_s}};
    if (r.label.rfind("bandwidth", 0) == 0) bw_gbps = bytes / s / 1e9;
    j["runs"].push_back(jr);
  }
  if (bw_gbps > 0) j["pct_of_bw"] = 100.0 * (bytes / op_s / 1e9) / bw_gbps;
  if (!set.empty()) j["set"] = set_text(set);
  if (!peer_error.empty()) j["peer_error"] = peer_error;
  if (!peer && peer_error.empty()) {
    const std::string why = peers::onednn_missing(op);
    j["peer_error"] = !peers::onednn_available() ? "built without oneDNN"
                      : why.empty()              ? "oneDNN has no equivalent of " + op
                                                 : why;
    if (peers::onednn_available() && !why.empty()) j["peer_missing"] = why;
  }
  return j;
}

void print_nn(const nlohmann::json& j) {
  std::printf("%s  %s  threads=%d  %lld reps (medians, interleaved)\n",
              j["variant"].get<std::string>().c_str(), j["problem"].get<std::string>().c_str(),
              j["threads"].get<int>(), j["reps"].get<long long>());
  for (const auto& r : j["runs"]) {
    std::printf("  %-34s %10.3f ms  %8.1f GFLOP/s  %7.2f GB/s   opforge speedup %.2fx\n",
                r["label"].get<std::string>().c_str(), r["ms"].get<double>(),
                r["gflops"].get<double>(), r["gbps"].get<double>(),
                r["opforge_speedup"].get<double>());
  }
  if (j.contains("pct_of_bw"))
    std::printf("  opforge at %.1f%% of the same-traffic bandwidth kernel's GB/s\n",
                j["pct_of_bw"].get<double>());
  if (j.contains("peer_error"))
    std::printf("  peer: %s\n", j["peer_error"].get<std::string>().c_str());
}

int bench_nn_all(const Args& a, Registry& reg) {
  nlohmann::json all = nlohmann::json::array();
  if (!a.has("json")) {
    // the machine (each variant names its ISA) and how calls were spaced
    std::printf("%s\nregime: %s\n", host_summary().c_str(), regime().text().c_str());
    std::printf(
        "| op | problem | opforge (algorithm) | ms | GFLOP/s | GB/s | %% of bw kernel | oneDNN ms "
        "| oneDNN / opforge time |\n|---|---|---|---|---|---|---|---|---|\n");
  }
  for (const auto& op : reg.ops()) {
    if (reg.variants(op).front().kind != "nn") continue;
    nlohmann::json j = bench_nn(a, reg, op, {});
    j["host"] = host_json();
    j["regime"] = regime().idle ? "idle" : "awake";
    all.push_back(j);
    if (a.has("json")) continue;
    const auto& r0 = j["runs"][0];
    std::string peer_ms = "-", peer_ratio = "-";
    if (j.contains("peer_missing")) peer_ms = "none: " + j["peer_missing"].get<std::string>();
    for (const auto& r : j["runs"]) {
      if (r["label"].get<std::string>().rfind("oneDNN", 0) == 0) {
        peer_ms = std::to_string(r["ms"].get<double>()).substr(0, 7);
        peer_ratio = std::to_string(r["opforge_speedup"].get<double>()).substr(0, 4) + "x";
      }
    }
    char pct[32] = "-";
    if (j.contains("pct_of_bw"))
      std::snprintf(pct, sizeof pct, "%.1f%%", j["pct_of_bw"].get<double>());
    std::printf(
        "| %s | %s | %s | %.3f | %.1f | %.2f | %s | %s | %s |\n", op.c_str(),
        j["problem"].get<std::string>().c_str(),
        j["algorithm"].get<std::string>().empty() ? "-" : j["algorithm"].get<std::string>().c_str(),
        r0["ms"].get<double>(), r0["gflops"].get<double>(), r0["gbps"].get<double>(), pct,
        peer_ms.c_str(), peer_ratio.c_str());
    std::fflush(stdout);
  }
  if (a.has("json")) std::cout << all.dump(2) << "\n";
  return 0;
}

}  // namespace opforge::cli
