#include "registry/cli/tune/tune_plan.h"

#include <algorithm>

#include "dsl/elementwise_schedule.h"

namespace opforge::cli {

std::vector<TuneCandidate> param_candidates(const std::string& param,
                                            const std::vector<int64_t>& values,
                                            const std::map<std::string, int64_t>& best,
                                            const std::map<std::string, int64_t>& kept) {
  // A param in force: as searched so far, else as the registered variant has it.
  auto on = [&](const std::string& name) {
    const auto b = best.find(name);
    if (b != best.end()) return b->second != 0;
    const auto k = kept.find(name);
    return k != kept.end() && k->second != 0;
  };
  std::vector<TuneCandidate> out;
  // A slot size changes nothing while double buffering is off (identical kernels); nor a
  // divide threshold with double buffering (ElementwiseSchedule::exact_divides ignores it).
  if (param == "db_grain" && !on("double_buffer")) return out;
  if (param == "divide_below" && on("double_buffer")) return out;
  // divide=1 beat the estimate on the mean over every size; the split may still beat it,
  // keeping the divide where it wins (cache sizes) and the estimate where it loses (DRAM
  // sizes: 1.05-1.12x at 1e7 on an AVX-512 core in some hours).
  const bool against_divide = param == "divide_below" && on("divide");
  const int64_t current = best.at(param);
  for (int64_t value : values) {
    // Without a threshold, divide=0 is the estimate everywhere: what divide=1 replaced.
    if (against_divide ? value == 0 : value == current) continue;
    TuneCandidate c{best, param + "=" + std::to_string(value)};
    c.params[param] = value;
    if (against_divide) {
      c.params["divide"] = 0;
      c.label = "divide=0 " + c.label;
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::map<std::string, int64_t> path_at(const std::map<std::string, int64_t>& p, int64_t n,
                                       const PathContext& ctx) {
  using dsl::ElementwiseSchedule;
  std::map<std::string, int64_t> all;
  for (const auto& d : ElementwiseSchedule::params()) all[d.name] = d.default_value;
  for (const auto& [key, value] : p) all[key] = value;
  if (all.at("vector") == 0) all["vector"] = ctx.natural_vector;
  const int64_t vec = all.at("vector"), tasks = all.at("tasks");
  const int64_t serial_below = all.at("serial_below");
  std::map<std::string, int64_t> out;
  if (ctx.block > 0) {
    // apply_blockwise: runs of whole blocks, ceil(blocks / tasks) or serial_below's worth if
    // more, one schedule for every size (no buckets, unroll, chunk or divide threshold).
    const int64_t blocks = (n + ctx.block - 1) / ctx.block;
    const int64_t run =
        std::max((blocks + tasks - 1) / tasks, (serial_below + ctx.block - 1) / ctx.block);
    out = {
        {"vector", vec}, {"divide", all.at("divide") != 0}, {"block_run", std::min(blocks, run)}};
  } else {
    // apply(): size buckets on the parallel path only, the base values below serial_below.
    const bool parallel = n >= serial_below;
    out = ElementwiseSchedule::params_at(all, parallel ? n : 0);
    out.erase("serial_below");
    out["parallel"] = parallel;
    if (!parallel) {
      out.erase("tasks");
      out.erase("chunk");
    }
    const bool staged = out.at("double_buffer") != 0;
    if (!staged) out.erase("db_grain");
    // exact_divides: the threshold splits the update with the estimate in force and no double
    // buffering.
    const int64_t below = out.at("divide_below");
    out.erase("divide_below");
    out["divide"] = out.at("divide") != 0 || (!staged && below > 0 && n < below);
  }
  if (ctx.reduction) {
    // apply_reduction's split, from the base values: chunks of whole vectors, at least
    // serial_below / tasks elements each; a chunk of n or more is one task whatever its size.
    out["reduction_vector"] = vec;
    out["reduction_chunk"] =
        std::min(n, std::max((n + tasks * vec - 1) / (tasks * vec) * vec, serial_below / tasks));
  }
  return out;
}

std::map<std::string, int64_t> over_kept(const std::map<std::string, int64_t>& set,
                                         const std::map<std::string, int64_t>& kept) {
  std::map<std::string, int64_t> all = kept;
  for (const auto& [k, v] : set) all[k] = v;
  return all;
}

bool threading_param(const std::string& name) {
  return name == "serial_below" || name == "tasks" || name == "chunk" || name == "double_buffer" ||
         name == "db_grain";
}

std::vector<TunePoint> points_changed(const std::vector<TunePoint>& at,
                                      const std::map<std::string, int64_t>& best,
                                      const std::map<std::string, int64_t>& cand,
                                      const std::map<std::string, int64_t>& kept,
                                      const PathContext& ctx) {
  const std::map<std::string, int64_t> b = over_kept(best, kept), c = over_kept(cand, kept);
  // Whether a param that differs (a size bucket's included) is a threading one.
  bool threading = false;
  auto note = [&](const std::string& key) {
    threading = threading || threading_param(key.substr(0, key.find('@')));
  };
  for (const auto& [k, v] : c) {
    if (!b.count(k) || b.at(k) != v) note(k);
  }
  for (const auto& [k, v] : b) {
    if (!c.count(k)) note(k);
  }
  std::vector<TunePoint> out;
  for (const TunePoint& p : at) {
    const auto pb = path_at(b, p.n, ctx), pc = path_at(c, p.n, ctx);
    if (pb == pc) continue;
    const bool awake_twin = std::any_of(at.begin(), at.end(), [&](const TunePoint& q) {
      return !q.idle && q.n == p.n && q.threads == p.threads;
    });
    // A reduction's split, or a blockwise run of blocks, is a hand-off too.
    const bool split = (ctx.reduction && pb.at("reduction_chunk") != pc.at("reduction_chunk")) ||
                       (ctx.block > 0 && pb.at("block_run") != pc.at("block_run"));
    if (p.idle && !threading && !split && awake_twin) continue;
    out.push_back(p);
  }
  return out;
}

}  // namespace opforge::cli
