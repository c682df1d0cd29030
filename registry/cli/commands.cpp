#include "registry/cli/commands.h"

#include <algorithm>
#include <fstream>

#include "opforge/runtime.hpp"
#include "registry/cache/compile_cache.h"
#include "registry/cli/bench_model.h"

namespace opforge::cli {

OptionSpec registry_option() {
  return {"registry", "DIR",
          "op registry (default: $OPFORGE_REGISTRY or " + Registry::default_dir() + ")"};
}
OptionSpec cache_option() {
  return {"cache-dir", "DIR",
          "compile cache (default: $OPFORGE_CACHE_DIR, $XDG_CACHE_HOME/opforge, ~/.cache/opforge)"};
}
std::string registry_dir(const Args& a) {
  return a.get("registry", Registry::default_dir());
}
std::string cache_dir(const Args& a) {
  return a.has("cache-dir") ? a.get("cache-dir") : cache::CompileCache::default_root();
}

OptionSpec variant_option() {
  return {"variant", "ID",
          "this variant by id (e.g. an autoscheduled ..._avx512__auto) instead of --attr/--isa"};
}

Kernel& op_kernel(Registry& reg, const Args& a, const std::string& op) {
  if (!a.has("variant")) return reg.select(op, attr_options(a), a.get("isa"));
  if (a.has("attr") || a.has("isa"))
    throw UsageError("--variant picks attrs and ISA: drop --attr/--isa");
  // The op first, from the index: naming another op's variant is a usage error even where
  // that variant cannot load (an avx512 variant on an AVX2 host).
  for (const auto& e : reg.index().variants) {
    if (e.variant == a.get("variant") && e.op != op) {
      throw UsageError("variant " + e.variant + " is a variant of " + e.op + ", not of " + op);
    }
  }
  return reg.load(a.get("variant"));
}

std::string host_summary() {
  std::string model = "unknown CPU";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (line.rfind("model name", 0) == 0 && colon != std::string::npos) {
      model = line.substr(colon + 2);
      break;
    }
  }
  const CpuFeatures& c = cpu_features();
  std::string s = "host: " + model + ", CPU features:";
  for (const auto& f : c.visible) s += " " + f;
  if (c.visible.empty()) s += " none";
  if (!c.mask.empty()) {
    std::string hidden;
    for (const auto& f : c.host) {
      if (std::find(c.visible.begin(), c.visible.end(), f) == c.visible.end()) hidden += " " + f;
    }
    s += ", masked by OPFORGE_CPU_FEATURES=" + c.mask +
         (hidden.empty() ? " (hides nothing)" : " (hides" + hidden + ")");
  }
  return s;
}

const std::vector<Command>& commands() {
  static const OptionSpec json{"json", "", "machine-readable output"};
  static const OptionSpec attr{"attr", "NAME=VALUE", "select the variant with this attr", true};
  static const OptionSpec isa{"isa", "ISA",
                              "force an ISA variant (avx512, avx2); default: $OPFORGE_ISA, else "
                              "the best one the CPU (as $OPFORGE_CPU_FEATURES masks it) runs"};
  static const std::vector<Command> table = {
      {{"build",
        "",
        "Regenerate the op library from the op table through the compile cache; print what it "
        "built",
        {registry_option(),
         cache_option(),
         {"only", "OP", "build only this op (keeps the registry's other ops)", true},
         {"rules", "PATH", "add the ops of a rule file, or of every *.rule in a directory", true},
         {"jobs", "N", "parallel compiles (default: number of cores)"},
         {"explain", "", "say per variant why it hit or missed the cache"},
         {"quiet", "", "print nothing but errors (no progress, no summary)"},
         {"recache", "",
          "compile every variant and overwrite its cache entry (OPFORGE_CACHE_DISABLE=1: "
          "compile without reading or writing the cache)"},
         json}},
       cmd_build},
      {{"list",
        "",
        "List the registry's ops and variants",
        {registry_option(),
         json,
         {"markdown", "", "the op table of generators/README.md"},
         {"names", "", "op names only, one a line (for shell completion)"}}},
       cmd_list},
      {{"describe",
        "OP",
        "Show an op's declaration: formula, arguments, attrs, variants, tolerance",
        {registry_option(), json}},
       cmd_describe},
      {{"inspect",
        "OP|VARIANT",
        "Show a registered kernel's schedule: loops with kinds and widths, splits and tails, "
        "specializations and which one N takes; or its stmt / HTML / assembly / LLVM IR",
        {registry_option(),
         cache_option(),
         attr,
         isa,
         variant_option(),
         {"n", "N", "mark the case each stage takes for N elements (and evaluate chunk sizes)"},
         {"scalar", "NAME=VALUE", "a scalar's value, for fast-path specializations", true},
         {"set", "NAME=VALUE",
          "preview with this schedule param changed (vector, unroll, tasks, chunk, "
          "serial_below): compiled into the cache, not the registry",
          true},
         {"rules", "PATH", "rule files a previewed op comes from", true},
         {"stmt", "", "print the lowered Halide IR (stmt)"},
         {"html", "FILE", "write Halide's stmt_html view to FILE"},
         {"asm", "", "print the assembly"},
         {"llvm", "", "print the LLVM IR"},
         {"header", "", "print the kernel's C header"},
         {"loop-nest", "", "print Halide's own print_loop_nest output"},
         {"schedule", "", "print the Adams2019 .schedule.h of an autoscheduled variant"},
         json}},
       cmd_inspect},
      {{"diff",
        "A [B]",
        "Compare two variants' schedules (params, target, loop nests); with --set, B is a "
        "preview of A (or of B) under those schedule params",
        {registry_option(),
         cache_option(),
         attr,
         isa,
         {"set", "NAME=VALUE", "preview B with this schedule param changed (cache only)", true},
         {"rules", "PATH", "rule files a previewed op comes from", true},
         {"context", "N", "unchanged lines shown around each change (default 3)"}}},
       cmd_diff},
      {{"report",
        "",
        "Write a static HTML page of the whole op library: descriptors, schedules, links to "
        "stmt_html and assembly, GB/s against N next to the bandwidth kernel",
        {registry_option(),
         cache_option(),
         {"html", "DIR", "where the report goes (replaces an earlier report there)"},
         {"only", "OP", "report only this op (repeatable)", true},
         {"sizes", "LIST", "N values to measure, comma-separated (default 1e3,1e4,1e5,1e6,1e7)"},
         {"budget-ms", "MS", "time per kernel per size (default 40)"},
         {"scalar", "NAME=VALUE",
          "a scalar's value for every op that has it (default: 0.5, integers 1, as bench)", true},
         {"threads", "N", "threads for the kernels (default 2)"},
         {"no-bench", "", "leave out the measurements (descriptors and schedules only)"}}},
       cmd_report},
      {{"run",
        "OP",
        "Run an op on .npy inputs and write every updated state to DIR/NAME.npy",
        {registry_option(),
         {"in", "NAME=FILE.npy",
          "a tensor argument (C order; bf16 as ml_dtypes saves it, descr '<V2')", true},
         {"dtype", "NAME=bf16",
          "the --in file NAME holds raw bf16 bits as uint16 ('<u2'); its outputs, and fresh bf16 "
          "outputs, are written the same way (default '<V2')",
          true},
         {"scalar", "NAME=VALUE", "a run-time scalar argument", true},
         attr,
         isa,
         variant_option(),
         {"out", "DIR", "where outputs go (created if missing)"},
         {"threads", "N", "Halide thread pool size (default: all cores)"}}},
       cmd_run},
      {{"bench",
        "OP|all|nn",
        "Time an op (or every optimizer op: all; every NN op: nn) against the bandwidth kernel "
        "with the same traffic and, for NN ops, every algorithm that applies and oneDNN",
        {registry_option(),
         {"n", "N", "elements per tensor (default 1e6; accepts 1e7)"},
         {"rows", "R", "sparse ops: rows of the states (default 1e5)"},
         {"cols", "C", "sparse ops: columns (default 128)"},
         {"indices", "K", "sparse ops: indexed rows per call (default: rows)"},
         attr,
         isa,
         variant_option(),
         {"threads", "N", "threads for the op (default 2)"},
         {"reps", "N", "timed calls per kernel (default: about 1 s of work)"},
         {"scalar", "NAME=VALUE", "a scalar argument (default 0.5; 1 for integer scalars)", true},
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
         json}},
       cmd_bench},
      {{"profile",
        "FILE.json",
        "Time a step of op calls (a JSON list of ops and shapes): per-op time, GB/s and % of "
        "the same-traffic bandwidth kernel, sorted",
        {registry_option(),
         isa,
         {"steps", "K", "timed steps (default: about 1 s of op time, at least 5)"},
         {"threads", "N", "Halide thread pool size (default 2)"},
         {"by-call", "", "one row per call (label) instead of per op"},
         json}},
       cmd_profile},
      {{"check",
        "OP",
        "Compare a registered kernel with the fp64 golden of its declaration on random data",
        {registry_option(),
         attr,
         isa,
         variant_option(),
         {"n", "N", "elements per tensor (default 1e5)"},
         {"rows", "R", "sparse ops: rows of the states (default 1000)"},
         {"cols", "C", "sparse ops: columns (default 17)"},
         {"indices", "K", "sparse ops: indexed rows (default 500)"},
         {"seed", "S", "random seed (default 1)"},
         {"scalar", "NAME=VALUE", "a scalar (default: the rule's, else 0.1; integers 1)", true},
         {"rules", "PATH", "rule files the op may come from", true},
         json}},
       cmd_check},
      {{"autoschedule",
        "[OP...]",
        "Regenerate the Adams2019 schedule files of the op table's autoscheduled variants "
        "(default: every one)",
        {{"out", "DIR", "where <variant>.schedule.h go (default: " + default_schedules_dir() + ")"},
         {"check", "", "compare a regeneration with the files in DIR; exit 1 if any differs"},
         json}},
       cmd_autoschedule},
      {{"new",
        "NAME",
        "Write a commented starter rule NAME.rule",
        {{"dir", "DIR", "where to write it (default: the current directory)"}}},
       cmd_new},
      {{"cache",
        "stats|verify|prune|clear|config [NAME] [VALUE]",
        "Manage the compile cache; config NAME VALUE sets a persistent setting (max-size: "
        "pruned to it after every build, default 2G; $OPFORGE_CACHE_MAXSIZE overrides), config "
        "alone prints them",
        {cache_option(),
         {"zero", "", "stats: reset the hit/miss statistics"},
         {"max-size", "SIZE", "prune: keep at most this much (K/M/G/T; default: the max-size)"},
         {"max-age", "DAYS", "prune: drop entries unused for longer"},
         json}},
       cmd_cache},
      {{"completion",
        "bash",
        "Print a bash completion script (commands, options, op names): "
        "source <(opforge completion bash)",
        {}},
       cmd_completion},
  };
  return table;
}

}  // namespace opforge::cli
