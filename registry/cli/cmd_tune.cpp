// opforge tune: searches the elementwise recipe's params (serial_below, tasks, unroll,
// vector) per op family and ISA on this machine, timed against the bandwidth kernels in this
// process (tune/tune_search.h), and writes the tuning file `opforge build` applies
// (registry/builder/tuning.h): <registry>/tuning/<machine fingerprint>.json.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "generators/isa.h"
#include "opforge/runtime.hpp"
#include "registry/builder/tuning.h"
#include "registry/cli/bench/bench_workload.h"
#include "registry/cli/commands.h"
#include "registry/cli/tune/tune_search.h"
#include "registry/cli/user_rules.h"

namespace opforge::cli {

namespace {

std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string utc_now() {
  char b[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

TuneOptions tune_options(const Args& a) {
  TuneOptions o;
  const bool quick = a.has("quick");
  for (const auto& isa : a.has("isa") ? a.all("isa") : std::vector<std::string>{}) {
    generators::isa(isa);  // an unknown name throws, naming the known ones
    o.isas.push_back(isa);
  }
  if (o.isas.empty()) {
    for (const auto& isa : generators::isas()) {
      bool runs = true;
      for (const auto& f : isa.cpu_features) runs = runs && cpu_supports(f);
      if (runs) o.isas.push_back(isa.name);
    }
  }
  for (const auto& isa : o.isas) {
    for (const auto& f : generators::isa(isa).cpu_features) {
      if (!cpu_supports(f)) throw UsageError("--isa " + isa + ": this CPU lacks " + f);
    }
  }
  o.ops = comma_list(a.get("ops", ""));
  o.params =
      comma_list(a.get("params", quick ? "serial_below,tasks"
                                       : "serial_below,tasks,unroll,vector,divide,divide_below"));
  for (const auto& p : o.params) candidate_values(p, 8);  // names checked before any work
  o.sizes = count_list(a.get("sizes", quick ? "1e4,1e6" : "1e3,1e4,1e5,1e6,1e7"), "--sizes");
  o.size_buckets = !a.has("one-set");
  o.jobs = static_cast<int>(a.get_int("jobs", 0, 1, kMaxThreads));
  const std::string regime = a.get("regime", quick ? "awake" : "both");
  if (regime == "awake" || regime == "both") o.idle_regimes.push_back(false);
  if (regime == "idle" || regime == "both") o.idle_regimes.push_back(true);
  if (o.idle_regimes.empty()) {
    throw UsageError("--regime: awake, idle or both, got '" + regime + "'");
  }
  if (a.has("idle-gap")) {
    o.idle_gap_us = static_cast<double>(a.get_int("idle-gap", 2000, 1, 1000000));
  }
  // One thread and every logical CPU (the OpenMP team's default size): the kernels run at
  // both, and what a param costs differs between them (a divide visible at one thread
  // hides under the traffic of two). --quick: every CPU only.
  const int cpus = std::max(1, builder::this_machine().logical_cpus);
  const std::string all = std::to_string(cpus);
  o.threads.clear();
  for (int64_t t :
       count_list(a.get("threads", quick || cpus == 1 ? all : "1," + all), "--threads")) {
    if (t > 256) throw UsageError("--threads: at most 256, got " + std::to_string(t));
    if (!std::count(o.threads.begin(), o.threads.end(), t))
      o.threads.push_back(static_cast<int>(t));
  }
  o.point_seconds = quick ? 0.01 : 0.02;
  o.cache_dir = cache_dir(a);
  o.rules = a.all("rules");
  return o;
}

void print_result(const TuneResult& r) {
  std::string changed, was;
  for (const auto& [k, v] : r.tuned.params) {
    changed += " " + k + "=" + std::to_string(v);
    const std::string base = k.substr(0, k.find('@'));
    if (r.defaults.count(base)) was += " " + k + "=" + std::to_string(r.defaults.at(base));
  }
  std::printf(
      "%s %s: %s  (%d candidates timed at %d points, %d not timed, %d previews compiled, %.0f "
      "s)\n",
      r.family.family.c_str(), r.family.isa.c_str(),
      changed.empty() ? "the defaults are best" : ("tuned" + changed + ", was" + was).c_str(),
      r.candidates, r.points_timed, r.skipped, r.compiled, r.seconds);
  std::printf(
      "  | variant | N | regime | threads | defaults us | tuned us | bandwidth us | tuned / "
      "defaults |\n");
  for (const auto& b : r.tuned.buckets) {
    std::printf("  | %s | %lld | %s | %d | %.2f | %.2f | %.2f | %.3f |\n", b.variant.c_str(),
                static_cast<long long>(b.n), b.regime.c_str(), b.threads, b.default_us, b.tuned_us,
                b.bandwidth_us, b.tuned_us / b.default_us);
  }
  std::fflush(stdout);
}

}  // namespace

int cmd_tune(const Args& a) {
  const TuneOptions opts = [&] {
    TuneOptions o = tune_options(a);
    if (!a.has("json")) {
      o.progress = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
    }
    return o;
  }();
  auto reg = Registry::open(registry_dir(a));
  const std::vector<TuneFamily> families = tune_families(*reg, opts);
  if (families.empty()) throw Error("no tunable variants in " + reg->dir() + " for these ISAs/ops");
  const builder::Machine here = builder::this_machine();
  const std::string out = a.get("out", builder::tuning_path(reg->dir(), here));
  check_writable_file("--out", out, !a.has("dry-run"));  // before a half-hour search
  if (a.has("dry-run")) {
    if (a.has("json")) {
      nlohmann::json fams = nlohmann::json::array();
      for (const auto& f : families)
        fams.push_back({{"family", f.family}, {"isa", f.isa}, {"variants", f.variants.size()}});
      std::cout << nlohmann::json{{"tuning_file", out},
                                  {"machine", here.fingerprint()},
                                  {"machine_description", here.canonical()},
                                  {"families", fams}}
                       .dump(2)
                << "\n";
      return 0;
    }
    for (const auto& f : families) {
      std::printf("%s %s: %zu variants\n", f.family.c_str(), f.isa.c_str(), f.variants.size());
    }
    std::printf("would write %s (machine %s: %s)\n", out.c_str(), here.fingerprint().c_str(),
                here.canonical().c_str());
    return 0;
  }
  // Families tuned before (another --ops run) stay; the ones tuned now are replaced.
  builder::Tuning t;
  if (FILE* probe = std::fopen(out.c_str(), "r")) {
    std::fclose(probe);
    t = builder::read_tuning(out, here);
  }
  t.machine = here;
  t.created = utc_now();
  t.threads = *std::max_element(opts.threads.begin(), opts.threads.end());
  if (!a.has("json")) {
    std::string counts;
    for (int n : opts.threads) counts += (counts.empty() ? "" : ",") + std::to_string(n);
    std::printf("%s\ntuning %zu families x ISAs at %s threads; sizes", host_summary().c_str(),
                families.size(), counts.c_str());
    for (int64_t n : opts.sizes) std::printf(" %lld", static_cast<long long>(n));
    std::printf("; regimes:");
    for (bool idle : opts.idle_regimes) std::printf(" %s", idle ? "idle" : "awake");
    std::printf("\n");
  }
  nlohmann::json report = nlohmann::json::array();
  for (const auto& f : families) {
    const TuneResult r = tune_family(*reg, f, opts);
    t.families[f.family][f.isa] = r.tuned;
    // Written after every family: an interrupted run keeps what it measured.
    builder::write_tuning(out, t);
    if (a.has("json")) {
      nlohmann::json buckets = nlohmann::json::array();
      for (const auto& b : r.tuned.buckets) {
        buckets.push_back({{"variant", b.variant},
                           {"n", b.n},
                           {"regime", b.regime},
                           {"threads", b.threads},
                           {"default_us", b.default_us},
                           {"tuned_us", b.tuned_us},
                           {"bandwidth_us", b.bandwidth_us}});
      }
      report.push_back({{"family", f.family},
                        {"isa", f.isa},
                        {"params", r.tuned.params},
                        {"defaults", r.defaults},
                        {"measured_variants", r.tuned.measured_variants},
                        {"candidates", r.candidates},
                        {"candidates_not_timed", r.skipped},
                        {"points_timed", r.points_timed},
                        {"member_rounds", r.member_rounds},
                        {"compiled", r.compiled},
                        {"seconds", r.seconds},
                        {"buckets", buckets}});
    } else {
      print_result(r);
    }
  }
  if (a.has("json")) {
    std::cout << nlohmann::json{{"tuning_file", out},
                                {"machine", here.fingerprint()},
                                {"families", report}}
                     .dump(2)
              << "\n";
  } else {
    std::printf(
        "wrote %s (machine %s)\nrun `opforge build` to apply it: variants whose params changed "
        "recompile; `opforge describe` and `inspect` name the tuning each was built with\n",
        out.c_str(), here.fingerprint().c_str());
  }
  return 0;
}

Command tune_command() {
  return {
      {"tune",
       "",
       "Search the elementwise recipe's params (serial_below, tasks, unroll, vector, divide) per "
       "op family and ISA on this machine, timed against the bandwidth kernels, and write the "
       "tuning file `opforge build` applies",
       {registry_option(),
        cache_option(),
        rules_option(),
        {"isa", "ISA", "tune this ISA (default: every ISA this CPU runs)", true},
        {"ops", "OP[,OP...]",
         "only the families of these ops, timed on these ops' variants (default: every "
         "family, timed on its heaviest and lightest members)"},
        {"params", "P[,P...]",
         "params searched, in order (default serial_below,tasks,unroll,vector,divide,divide_below; "
         "also chunk, double_buffer, db_grain)"},
        {"sizes", "N[,N...]",
         "elements per tensor, the size buckets (default 1e3,1e4,1e5,1e6,1e7); after one set "
         "for all sizes, the parallel sizes' vector, unroll, tasks and chunk are searched "
         "again at each size, and a value kept there is written as name@N (from the geometric "
         "midpoint to the next smaller size up)"},
        {"one-set", "", "one set of params for every size: no per-size search"},
        {"regime", "awake|idle|both",
         "time calls back to back, with a sleep before each, or both (default both)"},
        {"idle-gap", "US", "microseconds of sleep before each idle call (default 2000)"},
        {"threads", "N[,N...]",
         "thread counts the kernels are timed at, every point at each (default 1 and the "
         "logical CPUs)"},
        {"quick", "",
         "a short search: sizes 1e4,1e6, awake, the logical CPUs' thread count, params "
         "serial_below,tasks (seconds per family)"},
        {"jobs", "N",
         "previews compiled at a time, before their timing (default: number of cores)"},
        {"out", "FILE", "the tuning file (default: <registry>/tuning/<machine fingerprint>.json)"},
        {"dry-run", "", "list the families and the file, time nothing"},
        json_option()}},
      cmd_tune};
}

}  // namespace opforge::cli
