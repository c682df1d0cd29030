#include "registry/cli/tune/tune_search.h"

#include <Halide.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "dsl/elementwise_schedule.h"
#include "dsl/optimizer_pipeline.h"
#include "registry/builder/preview.h"
#include "registry/builder/registry_builder.h"
#include "registry/cli/bench/bench_workload.h"
#include "registry/cli/preview_kernel.h"
#include "registry/cli/tune/tune_keep.h"
#include "registry/cli/tune/tune_plan.h"

namespace opforge::cli {

namespace {

using Clock = std::chrono::steady_clock;

// The size a family's members are compared at to choose the one it is tuned on: L2-resident
// on both hosts measured, so the ratio to the bandwidth kernel is the member's compute.
constexpr int64_t kPickSize = 100000;
// Rounds of the final evidence (defaults against the result), buffers swapped every other
// round; each column is the median over the rounds. A family that keeps the defaults times
// them against themselves: one round records how far they are from the bandwidth kernel.
constexpr int kEvidenceRounds = 3;

struct Contender {
  Kernel* kernel;
  Workload* work;
};

// One point's timing: each contender's median (µs) and, for the second against the
// first, the median over reps of the ratio of their calls in the same rep.
struct PointTimes {
  std::vector<double> median_us;
  double paired = 1;
};

// Interleaved calls at one size and regime, in a fresh random order every rep (seeded:
// reproducible): a fixed rotation let a neighbour that wakes every third call hit one
// contender every time (a tune run once recorded 49x and 0.21x at one idle point). The
// paired ratio compares calls made moments apart, so load that comes and goes between
// reps cancels out of it.
PointTimes time_point(const std::vector<Contender>& cs, bool idle, const TuneOptions& o) {
  set_regime(Regime{idle, o.idle_gap_us});
  double once = 1e-7;
  for (const auto& c : cs) time_call(*c.kernel, *c.work);  // warm: pages, the pool
  for (const auto& c : cs) once = std::max(once, time_call(*c.kernel, *c.work));
  const int64_t reps =
      std::clamp<int64_t>(static_cast<int64_t>(o.point_seconds / once), 5, idle ? 25 : 401);
  std::vector<std::vector<double>> t(cs.size());
  std::vector<size_t> order(cs.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(12345);
  for (int64_t r = 0; r < reps; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t k : order) t[k].push_back(time_call(*cs[k].kernel, *cs[k].work));
  }
  PointTimes p;
  for (auto& v : t) p.median_us.push_back(median(v) * 1e6);
  if (cs.size() > 1) p.paired = median(paired_ratios(t[1], t[0]));
  return p;
}

// One family member the search times: its workloads at each size (two for the op, so the best
// and the candidate run on their own buffers, one for the bandwidth kernel) and its kernels.
struct Subject {
  registry::Descriptor d;
  Kernel* bandwidth = nullptr;
  Kernel* defaults = nullptr;  // the recipe defaults, as a preview
  Kernel* best = nullptr;
  Kernel* candidate = nullptr;
  struct Sized {
    std::unique_ptr<Workload> best, candidate, bandwidth;
  };
  std::map<int64_t, Sized> work;
};

using Point = TunePoint;

// Every size, regime and thread count; one thread is timed in the first regime only: its
// parallel loops run on the calling thread, so there is no pool to wake, and the idle points
// would only add time to the search.
std::vector<Point> points(const TuneOptions& o) {
  std::vector<Point> p;
  for (int64_t n : o.sizes) {
    for (bool idle : o.idle_regimes) {
      for (int threads : o.threads) {
        if (threads > 1 || idle == o.idle_regimes.front()) p.push_back({n, idle, threads});
      }
    }
  }
  return p;
}

// One subject at one point: the first's, the second's and the bandwidth kernel's times and
// the paired ratio. `swap`: the two kernels on each other's buffers. Buffers matter at DRAM
// sizes: at 1e7 on AVX2, whichever kernel ran on the candidate's buffers measured 3-4%
// faster, so every candidate "won" there in turn; a candidate is confirmed on swapped buffers.
PointTimes time_subject(Registry& reg, Subject& s, Kernel* Subject::*first,
                        Kernel* Subject::*second, const TuneOptions& o, const Point& p, bool swap) {
  Subject::Sized& w = s.work.at(p.n);
  Workload* a = swap ? w.candidate.get() : w.best.get();
  Workload* b = swap ? w.best.get() : w.candidate.get();
  reg.set_num_threads(p.threads);
  return time_point({{s.*first, a}, {s.*second, b}, {s.bandwidth, w.bandwidth.get()}}, p.idle, o);
}

// Every subject at every point, subject by subject.
std::vector<PointTimes> time_all(Registry& reg, std::vector<Subject>& subjects,
                                 Kernel* Subject::*first, Kernel* Subject::*second,
                                 const TuneOptions& o, const std::vector<Point>& at,
                                 bool swap = false) {
  std::vector<PointTimes> out;
  for (Subject& s : subjects) {
    for (const Point& p : at) out.push_back(time_subject(reg, s, first, second, o, p, swap));
  }
  return out;
}

int natural_vector(const registry::Descriptor& d) {
  return Halide::Target(d.target.halide_target).natural_vector_size(Halide::Float(32));
}

bool blockwise(const registry::Descriptor& d) {
  return storage_tag(d).find("q8") != std::string::npos;
}

// The registered variant's schedule params that `searched` does not name (nor a size bucket
// of one), where they differ from the recipe's defaults for its target.
std::map<std::string, int64_t> unsearched_params(const registry::Descriptor& d,
                                                 const std::vector<std::string>& searched) {
  const std::map<std::string, int64_t> defaults =
      dsl::ElementwiseSchedule::resolve({}, Halide::Target(d.target.halide_target));
  std::map<std::string, int64_t> out;
  for (const auto& [key, text] : d.schedule.params) {
    const std::string name = key.substr(0, key.find('@'));
    if (std::count(searched.begin(), searched.end(), name) || !defaults.count(name)) continue;
    const int64_t v = std::stoll(text);
    if (key != name || v != defaults.at(name)) out[key] = v;
  }
  return out;
}

}  // namespace

std::vector<int64_t> candidate_values(const std::string& param, int natural) {
  if (param == "serial_below") return {0, 4096, 16384, 65536, 262144};
  if (param == "tasks") return {2, 4, 8, 16, 32};
  if (param == "unroll") return {1, 2, 4};
  if (param == "vector") return {natural, 2 * natural};
  if (param == "chunk") return {0, 16384, 65536, 262144};
  if (param == "divide") return {0, 1};
  if (param == "divide_below") return {0, 65536, 262144, 1048576, 4194304};
  if (param == "double_buffer") return {0, 1};
  if (param == "db_grain") return {2048, 8192, 65536};
  throw UsageError("--params: unknown schedule param '" + param + "' (" +
                   dsl::ElementwiseSchedule::param_names() + ")");
}

std::vector<TuneFamily> tune_families(Registry& reg, const TuneOptions& o) {
  std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
  const std::vector<generators::VariantSpec> rows = builder::table_with_rules(o.rules, keep);
  std::set<std::string> indexed, known_ops;
  for (const auto& e : reg.index().variants) indexed.insert(e.variant);
  std::vector<TuneFamily> out;
  std::set<size_t> wanted;
  for (const auto& row : rows) {
    const dsl::ResolvedOp op = row.resolve();
    const std::string family = builder::tuning_family(op);
    if (family.empty()) continue;
    known_ops.insert(op.name());
    const bool asked = o.ops.empty() || std::count(o.ops.begin(), o.ops.end(), op.name());
    for (const auto& isa : row.isas) {
      if (!std::count(o.isas.begin(), o.isas.end(), isa)) continue;
      const std::string id = op.variant_id(isa);
      if (!indexed.count(id)) continue;
      auto it = std::find_if(out.begin(), out.end(), [&](const TuneFamily& f) {
        return f.family == family && f.isa == isa;
      });
      if (it == out.end())
        it = out.insert(out.end(),
                        TuneFamily{family, isa, {}, {}, !dsl::reduction_reads(op).empty()});
      it->variants.push_back(id);
      if (asked) wanted.insert(static_cast<size_t>(it - out.begin()));
      if (asked && !o.ops.empty()) it->asked.push_back(id);
    }
  }
  for (const auto& op : o.ops) {
    if (!known_ops.count(op)) {
      throw UsageError("--ops: '" + op +
                       "' is not a dense optimizer op of the op table (NN, sparse and "
                       "multi-tensor ops have no elementwise recipe to tune)");
    }
  }
  std::vector<TuneFamily> chosen;
  for (size_t i = 0; i < out.size(); ++i) {
    if (wanted.count(i)) chosen.push_back(out[i]);
  }
  std::sort(chosen.begin(), chosen.end(), [](const TuneFamily& a, const TuneFamily& b) {
    return std::tie(a.family, a.isa) < std::tie(b.family, b.isa);
  });
  return chosen;
}

TuneResult tune_family(Registry& reg, const TuneFamily& f, const TuneOptions& o) {
  const auto t0 = Clock::now();
  TuneResult r;
  r.family = f;
  const int most_threads = *std::max_element(o.threads.begin(), o.threads.end());
  reg.set_num_threads(most_threads);
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };

  // The members furthest from and closest to their bandwidth kernels (registered schedules,
  // awake): the params must suit the family's heaviest and lightest compute. With --ops, among
  // the named ops' members only.
  std::vector<std::pair<double, registry::Descriptor>> ranked;
  for (const auto& id : f.asked.empty() ? f.variants : f.asked) {
    const registry::Descriptor d = reg.descriptor(id);
    Kernel& k = reg.load(d.variant);
    Kernel* bw = bandwidth_kernel(reg, d);
    if (!bw) continue;
    Workload wo(d, kPickSize, {}), wb(bw->descriptor(), kPickSize, {});
    TuneOptions quick = o;
    quick.point_seconds = o.point_seconds / 2;
    const std::vector<double> m = time_point({{&k, &wo}, {bw, &wb}}, false, quick).median_us;
    ranked.emplace_back(m[0] / m[1], d);
  }
  if (ranked.empty())
    throw Error("family " + f.family + " (" + f.isa + ") has no bandwidth kernel");
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<Subject> subjects(ranked.size() > 1 ? 2 : 1);
  subjects.front().d = ranked.front().second;
  if (ranked.size() > 1) subjects.back().d = ranked.back().second;

  const registry::Descriptor& heaviest = subjects.front().d;
  const int natural = natural_vector(heaviest);
  // The searched params at the recipe defaults (vector: the ISA's natural width).
  std::map<std::string, int64_t> best;
  for (const auto& p : dsl::ElementwiseSchedule::params()) {
    if (!std::count(o.params.begin(), o.params.end(), p.name)) continue;
    // Unused by the 8-bit recipe, or refused by it (double buffering).
    if (blockwise(heaviest) &&
        (p.name == "unroll" || p.name == "chunk" || p.name == "double_buffer" ||
         p.name == "db_grain" || p.name == "divide_below"))
      continue;
    best[p.name] = p.name == "vector" && p.default_value == 0 ? natural : p.default_value;
  }
  r.defaults = best;
  // The params not searched keep the registered variant's values (a tuning applied by the last
  // build included): the previews start from them, and the file must say what was measured.
  // Without this, `tune --params tasks` after a full run dropped the family's divide=1.
  const std::map<std::string, int64_t> kept = unsearched_params(heaviest, o.params);
  auto load = [&](const Subject& s, const std::map<std::string, int64_t>& set) {
    const LoadedPreview p = load_preview(reg, s.d, set, o.cache_dir, o.rules);
    r.compiled += !p.hit;
    return p.kernel;
  };
  for (Subject& s : subjects) {
    r.tuned.measured_variants.push_back(s.d.variant);
    s.bandwidth = bandwidth_kernel(reg, s.d);
    s.defaults = s.best = load(s, best);
    for (int64_t n : o.sizes) {
      const std::map<std::string, double> none;
      s.work[n] = {std::make_unique<Workload>(s.d, n, none),
                   std::make_unique<Workload>(s.d, n, none),
                   std::make_unique<Workload>(s.bandwidth->descriptor(), n, none)};
    }
    say(f.family + " " + f.isa + ": timing " + s.d.variant);
  }

  // The paths of the candidates timed against the current best (one per size of `at`), and
  // their labels: a candidate that runs as one of them at every size is not timed again
  // (divide_below 1048576 and 4194304 both leave only 1e7 to the estimate at the default sizes).
  std::map<std::vector<std::map<std::string, int64_t>>, std::string> timed_paths;
  const PathContext context{natural, f.reduction, heaviest.shape.block};
  auto paths_of = [&](const std::map<std::string, int64_t>& set, const std::vector<Point>& at) {
    const std::map<std::string, int64_t> all = over_kept(set, kept);
    std::vector<std::map<std::string, int64_t>> out;
    for (const Point& p : at) {
      out.push_back(path_at(all, p.n, context));
      out.back()["n"] = p.n;  // a bucket's candidates at another size are others
    }
    return out;
  };

  // Tries `cand` against the best so far at the points of `all` where the two run different
  // loops (points_changed); keeps it when it wins twice. The score is over those points alone:
  // over every point, a serial threshold's effect at the one size it moves was averaged with
  // the noise of a dozen points where both kernels run the same loops.
  auto attempt = [&](const std::map<std::string, int64_t>& cand, const std::string& label,
                     const std::vector<Point>& all) {
    const std::vector<Point> at = points_changed(all, best, cand, kept, context);
    if (at.empty()) {
      ++r.skipped;
      say("  " + label + ": the loops of the best so far at every point, not timed");
      return;
    }
    const auto paths = paths_of(cand, all);
    if (const auto seen = timed_paths.find(paths); seen != timed_paths.end()) {
      ++r.skipped;
      say("  " + label + ": the loops of " + seen->second + " at every point, not timed");
      return;
    }
    timed_paths[paths] = label;
    // The heaviest member screens the candidate alone (judge_candidate); the others' previews
    // are loaded, and compiled if need be, only for a candidate that passes it.
    std::vector<bool> loaded(subjects.size(), false);
    auto subject = [&](size_t k) -> Subject& {
      if (!loaded[k]) subjects[k].candidate = load(subjects[k], cand);
      loaded[k] = true;
      return subjects[k];
    };
    ++r.candidates;
    r.points_timed += static_cast<int>(at.size());
    auto time_at = [&](size_t k, size_t point, bool swap) {
      return time_subject(reg, subject(k), &Subject::best, &Subject::candidate, o, at[point], swap)
          .paired;
    };
    const Verdict v = judge_candidate(
        subjects.size(), KeepRule{},
        [&](size_t k, bool swap) {
          std::vector<double> paired;
          for (size_t i = 0; i < at.size(); ++i) paired.push_back(time_at(k, i, swap));
          return paired;
        },
        time_at);
    r.member_rounds += v.member_rounds;
    char line[256];
    std::snprintf(line, sizeof line,
                  "  %s: %.3fx of the best so far at %zu of %zu points (worst point %.3fx)%s",
                  label.c_str(), v.screen.mean, at.size(), all.size(), v.screen.worst,
                  subjects.size() > 1 ? " on the heaviest member" : "");
    std::string text = line;
    if (v.first) {
      std::snprintf(line, sizeof line, ", both members %.3fx (worst point %.3fx)", v.first->mean,
                    v.first->worst);
      text += line;
    }
    if (v.confirm) {
      std::snprintf(line, sizeof line, ", confirm %.3fx (worst point %.3fx)", v.confirm->mean,
                    v.confirm->worst);
      text += line;
    }
    if (v.rechecked) text += ", " + std::to_string(v.rechecked) + " re-measures of vetoing points";
    say(text + (v.keep ? ": kept" : ""));
    if (!v.keep) return;
    best = cand;
    timed_paths.clear();
    for (Subject& s : subjects) s.best = s.candidate;
  };

  // A param's candidates compiled before any is timed, on every core (the timing needs them to
  // itself): those that differ from the best so far somewhere in `at`, for the heaviest member
  // (the others' only once a candidate passes its screen). One at a time, a whole library's
  // tune spent some 16 of its 44 minutes compiling on one core of two.
  auto precompile = [&](const std::vector<TuneCandidate>& cands, const std::vector<Point>& at) {
    std::vector<std::map<std::string, int64_t>> todo;
    for (const TuneCandidate& c : cands) {
      if (!points_changed(at, best, c.params, kept, context).empty()) todo.push_back(c.params);
    }
    if (todo.empty()) return;
    r.compiled += builder::compile_previews(subjects.front().d, todo, o.cache_dir, o.rules, o.jobs);
  };

  // One set for every size first.
  for (const std::string& param : o.params) {
    if (!best.count(param)) continue;
    const std::vector<TuneCandidate> cands =
        param_candidates(param, candidate_values(param, natural), best, kept);
    // With reductions or results the update keeps one form of 1/x (exact_divides): the first
    // threshold's preview says so, and no threshold changes the kernel.
    if (param == "divide_below" && !cands.empty() &&
        dsl::ElementwiseSchedule::says_divide_below_declined(
            load(subjects.front(), cands.front().params)->descriptor().schedule.summary)) {
      say("  divide_below: not applied to this family (one form of 1/x), not searched");
      continue;
    }
    precompile(cands, points(o));
    for (const TuneCandidate& c : cands) attempt(c.params, c.label, points(o));
  }
  // Then size buckets: at each size on the parallel path, the bucketable params again, timed
  // at that size only; a value kept there holds from the bucket's lower bound (the geometric
  // midpoint to the next smaller size) up to the next bucket. 8-bit states have one schedule.
  // The serial threshold in force: searched, else the registered variant's.
  const int64_t serial_below = best.count("serial_below")
                                   ? best.at("serial_below")
                                   : std::stoll(heaviest.schedule.params.at("serial_below"));
  if (o.size_buckets && !blockwise(heaviest)) {
    std::vector<int64_t> sizes = o.sizes;
    std::sort(sizes.begin(), sizes.end());
    for (size_t k = 1; k < sizes.size(); ++k) {
      const int64_t n = sizes[k];
      if (n < serial_below) continue;
      const auto bound = static_cast<int64_t>(
          std::llround(std::sqrt(static_cast<double>(sizes[k - 1]) * static_cast<double>(n))));
      std::vector<Point> at;
      for (const Point& p : points(o)) {
        if (p.n == n) at.push_back(p);
      }
      for (const std::string& param : o.params) {
        if (!best.count(param) || !dsl::ElementwiseSchedule::bucketable(param)) continue;
        std::vector<TuneCandidate> cands;
        for (int64_t value : candidate_values(param, natural)) {
          if (value == dsl::ElementwiseSchedule::params_at(best, n).at(param)) continue;
          std::map<std::string, int64_t> cand = best;
          const std::string key = param + "@" + std::to_string(bound);
          cand[key] = value;
          cands.push_back(
              {cand, key + "=" + std::to_string(value) + " (N " + std::to_string(n) + ")"});
        }
        precompile(cands, at);
        for (const TuneCandidate& c : cands) attempt(c.params, c.label, at);
      }
    }
  }

  // The evidence: defaults against the result at every point, kEvidenceRounds more rounds
  // (buffers swapped every other round), each column's median over the rounds: one round
  // that a neighbour hit does not make the record of a change.
  std::vector<std::vector<PointTimes>> rounds;
  const int evidence_rounds = best == r.defaults ? 1 : kEvidenceRounds;
  for (int k = 0; k < evidence_rounds; ++k) {
    rounds.push_back(
        time_all(reg, subjects, &Subject::defaults, &Subject::best, o, points(o), k % 2 == 1));
  }
  auto median_of = [&](size_t point, size_t column) {
    std::vector<double> v;
    for (const auto& round : rounds) v.push_back(round[point].median_us[column]);
    return median(v);
  };
  size_t i = 0;
  for (const Subject& s : subjects) {
    for (const Point& p : points(o)) {
      r.tuned.buckets.push_back({s.d.variant, p.n, p.idle ? "idle" : "awake", p.threads,
                                 median_of(i, 0), median_of(i, 1), median_of(i, 2)});
      ++i;
    }
  }
  r.tuned.params = kept;
  for (const auto& [k, v] : best) {
    if (!r.defaults.count(k) || v != r.defaults.at(k)) r.tuned.params[k] = v;
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace opforge::cli
