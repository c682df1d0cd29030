// opforge bench OP --model PRESET: the model's tensors back to back in flat buffers (one per
// tensor argument of the variant, dtypes as its descriptor says, padding zeroed), and three
// series timed in the same process, interleaved (the order rotates every rep): (a) ONE
// call_model over the flat buffers, (b) one Kernel::call per tensor on views into the same
// buffers (the allocation-free TensorView path), (c) the same-traffic bandwidth kernel over
// the flat buffers, on the op's own buffers where its arguments map onto them (as `profile`
// does). Elements/s and GB/s count the model's elements (not padding); the bandwidth kernel's
// GB/s counts every element it moves.
#include "registry/cli/bench/bench_model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

#include "opforge/model_presets.hpp"
#include "opforge/runtime.hpp"
#include "registry/cli/bench/bench_workload.h"

namespace opforge::cli {

namespace {

// Zeroes [offset(i) + elements(i), offset(i + 1)) of every flat buffer: the padding.
void zero_padding(const ModelLayout& layout, const std::vector<TensorView>& flat) {
  for (const TensorView& t : flat) {
    if (t.rank != 1 || t.shape[0] != layout.total_elements()) continue;  // found_inf, segments
    const int64_t size = registry::dtype_bytes(t.dtype);
    uint8_t* base = static_cast<uint8_t*>(t.data);
    for (size_t i = 0; i < layout.size(); ++i) {
      const int64_t end = layout.offset(i) + layout.elements(i);
      std::memset(base + end * size, 0,
                  static_cast<size_t>((layout.offsets()[i + 1] - end) * size));
    }
  }
}

}  // namespace

nlohmann::json bench_model(const Args& a, Registry& reg, Kernel& op,
                           const std::map<std::string, double>& given) {
  const registry::Descriptor& d = op.descriptor();
  check_multi_tensor(d);
  // Segmented forms reduce per tensor over chunks of the alignment: 2048 by default.
  const bool segmented = !d.shape.segments.empty();
  const ModelLayout layout = model_preset(
      a.get("model"), a.get_int("align", segmented ? 2048 : ModelLayout::kDefaultAlignment));
  const int threads = static_cast<int>(a.get_int("threads", 2, 1, kMaxThreads));
  Kernel* bwk = bandwidth_kernel(reg, d);
  if (!bwk) throw Error(d.variant + ": the registry has no bandwidth kernel with its traffic");
  Kernel& bw = *bwk;
  const int64_t total = layout.total_elements();

  Workload w(d, total, given);
  // call_model builds a segmented kernel's chunk table from the layout itself.
  std::vector<TensorView> flat;
  for (const TensorView& t : w.tensors) {
    if (!segmented || d.shape.segments != t.name) flat.push_back(t);
  }
  zero_padding(layout, flat);
  // One call per tensor: the op itself, or for a segmented form (multi_tensor_apply_lamb) the
  // single-tensor op it applies per tensor (apply_lamb), same attrs, storage and ISA.
  Kernel* single = &op;
  if (segmented) {
    const std::string prefix = "multi_tensor_";
    if (d.op.rfind(prefix, 0) != 0) throw Error(d.op + ": no single-tensor op to compare with");
    std::map<std::string, std::string> attrs = d.attr_values();
    attrs["storage"] = storage_tag(d);
    single = &reg.select(d.op.substr(prefix.size()), attrs, d.target.isa);
  }
  ArgViews bw_args;
  std::unique_ptr<Workload> bw_own;
  const bool shared = share_buffers(bw.descriptor(), w, d, bw_args);
  if (!shared) {
    bw_own = std::make_unique<Workload>(bw.descriptor(), total, std::map<std::string, double>{});
    zero_padding(layout, bw_own->tensors);
    bw_args = ArgViews{bw_own->tensors, bw_own->scalars};
  }
  std::vector<std::vector<TensorView>> per_tensor(layout.size());
  for (size_t i = 0; i < layout.size(); ++i) {
    per_tensor[i] = tensor_views(layout, i, flat.data(), flat.size(), &d);
  }

  const std::function<void()> series[3] = {
      [&] { call_model(op, layout, flat.data(), flat.size(), w.scalars.data(), w.scalars.size()); },
      [&] {
        for (const auto& v : per_tensor) {
          single->call(v.data(), v.size(), w.scalars.data(), w.scalars.size());
        }
      },
      [&] {
        bw.call(bw_args.tensors.data(), bw_args.tensors.size(), bw_args.scalars.data(),
                bw_args.scalars.size());
      }};
  reg.set_num_threads(threads);
  for (const auto& f : series) timed_seconds(f);  // warm up: pool, caches, lazy binding
  const double once = std::max(1e-7, timed_seconds(series[0]));
  const int64_t reps = a.has("reps") ? a.get_int("reps", 0, 1, 100000000)
                                     : std::clamp<int64_t>(int64_t(0.3 / once), 21, 2001);
  if (reps < 1) throw UsageError("--reps must be positive");
  std::vector<double> t[3];
  for (int64_t r = 0; r < reps; ++r) {
    for (size_t s = 0; s < 3; ++s) {
      const size_t k = (s + static_cast<size_t>(r)) % 3;
      t[k].push_back(timed_seconds(series[k]));
    }
  }

  const double elems = static_cast<double>(layout.model_elements());
  const double bytes = elems * bytes_per_element(d);
  const double m_bw = median(t[2]);
  const double bw_gbps =
      static_cast<double>(total) * bytes_per_element(bw.descriptor()) / m_bw / 1e9;
  auto row = [&](size_t k, int64_t calls) {
    const double m = median(t[k]);
    return nlohmann::json{{"calls", calls},
                          {"us", m * 1e6},
                          {"min_us", *std::min_element(t[k].begin(), t[k].end()) * 1e6},
                          {"elements_per_s", elems / m},
                          {"gbps", bytes / m / 1e9},
                          {"pct_of_bw", 100.0 * (bytes / m / 1e9) / bw_gbps}};
  };
  return {{"op", d.op},
          {"variant", d.variant},
          {"isa", d.target.isa},
          {"storage", storage_tag(d)},
          {"model", a.get("model")},
          {"tensors", layout.size()},
          {"model_elements", layout.model_elements()},
          {"padded_elements", total},
          {"alignment", layout.alignment()},
          {"threads", threads},
          {"reps", reps},
          {"bytes_per_element", bytes_per_element(d)},
          {"one_call", row(0, 1)},
          {"per_tensor", row(1, static_cast<int64_t>(layout.size()))},
          {"per_tensor_variant", single->descriptor().variant},
          {"bandwidth_kernel", bw.descriptor().variant},
          {"bandwidth_shares_buffers", shared},
          {"bandwidth",
           {{"calls", 1},
            {"us", m_bw * 1e6},
            {"min_us", *std::min_element(t[2].begin(), t[2].end()) * 1e6},
            {"gbps", bw_gbps}}},
          {"speedup", median(t[1]) / median(t[0])}};
}

void print_model(const nlohmann::json& j) {
  std::printf(
      "%s  model %s: %lld tensors, %lld elements (%lld with padding to %lld)  threads=%d  %lld "
      "reps (medians, interleaved)\n",
      j["variant"].get<std::string>().c_str(), j["model"].get<std::string>().c_str(),
      j["tensors"].get<long long>(), j["model_elements"].get<long long>(),
      j["padded_elements"].get<long long>(), j["alignment"].get<long long>(),
      j["threads"].get<int>(), j["reps"].get<long long>());
  auto line = [](const std::string& label, const nlohmann::json& r) {
    std::printf("  %-22s %12.1f us  %7.3f G elem/s  %7.2f GB/s  %5.1f%% of bandwidth\n",
                label.c_str(), r["us"].get<double>(), r["elements_per_s"].get<double>() / 1e9,
                r["gbps"].get<double>(), r["pct_of_bw"].get<double>());
  };
  line("one call", j["one_call"]);
  const long long calls = j["per_tensor"]["calls"].get<long long>();
  line(std::to_string(calls) + (calls == 1 ? " call" : " calls") + ", per tensor", j["per_tensor"]);
  if (j["per_tensor_variant"] != j["variant"])
    std::printf("  %-22s %s\n", "(per tensor: variant)",
                j["per_tensor_variant"].get<std::string>().c_str());
  std::printf("  %-22s %12.1f us                    %7.2f GB/s  %s%s\n", "bandwidth kernel",
              j["bandwidth"]["us"].get<double>(), j["bandwidth"]["gbps"].get<double>(),
              j["bandwidth_kernel"].get<std::string>().c_str(),
              j["bandwidth_shares_buffers"].get<bool>() ? " (same buffers)" : "");
  std::printf("  one call: %.2fx the speed of one call per tensor\n", j["speedup"].get<double>());
}

std::string model_list_text() {
  std::string s;
  for (const auto& p : model_presets()) {
    const ModelLayout layout(p.tensors());
    char line[128];
    std::snprintf(line, sizeof line, "%-20s %6zu tensors %12lld elements  ", p.name.c_str(),
                  layout.size(), static_cast<long long>(layout.model_elements()));
    s += line + p.summary + "\n";
  }
  return s;
}

nlohmann::json model_list_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : model_presets()) {
    const ModelLayout layout(p.tensors());
    out.push_back({{"name", p.name},
                   {"summary", p.summary},
                   {"tensors", layout.size()},
                   {"elements", layout.model_elements()}});
  }
  return out;
}

std::string model_names() {
  std::string s;
  for (const auto& p : model_presets()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

}  // namespace opforge::cli
