#include "registry/cli/commands.h"

#include "opforge/runtime.hpp"
#include "registry/cache/compile_cache.h"

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

const std::vector<Command>& commands() {
  static const OptionSpec json{"json", "", "machine-readable output"};
  static const OptionSpec attr{"attr", "NAME=VALUE", "select the variant with this attr", true};
  static const OptionSpec isa{"isa", "ISA", "force an ISA variant (avx512, avx2); default: best"};
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
         json}},
       cmd_build},
      {{"list",
        "",
        "List the registry's ops and variants",
        {registry_option(), json, {"markdown", "", "the README's op table"}}},
       cmd_list},
      {{"describe",
        "OP",
        "Show an op's declaration: formula, arguments, attrs, variants, tolerance",
        {registry_option(), json}},
       cmd_describe},
      {{"inspect",
        "OP",
        "Show a registered kernel's schedule: loop nest, or its stmt / HTML / assembly",
        {registry_option(),
         cache_option(),
         attr,
         isa,
         {"stmt", "", "print the lowered Halide IR (stmt)"},
         {"html", "FILE", "write Halide's stmt_html view to FILE"},
         {"asm", "", "print the assembly"},
         {"header", "", "print the kernel's C header"}}},
       cmd_inspect},
      {{"run",
        "OP",
        "Run an op on .npy inputs and write every updated state to DIR/NAME.npy",
        {registry_option(),
         {"in", "NAME=FILE.npy", "a tensor argument (float32, C order)", true},
         {"scalar", "NAME=VALUE", "a run-time scalar argument", true},
         attr,
         isa,
         {"out", "DIR", "where outputs go (created if missing)"},
         {"threads", "N", "Halide thread pool size (default: all cores)"}}},
       cmd_run},
      {{"bench",
        "OP|all",
        "Time an op (or every op: all) against the bandwidth kernel with the same traffic",
        {registry_option(),
         {"n", "N", "elements per tensor (default 1e6; accepts 1e7)"},
         {"rows", "R", "sparse ops: rows of the states (default 1e5)"},
         {"cols", "C", "sparse ops: columns (default 128)"},
         {"indices", "K", "sparse ops: indexed rows per call (default: rows)"},
         attr,
         isa,
         {"threads", "N", "threads for the op (default 2)"},
         {"reps", "N", "timed calls per kernel (default: about 1 s of work)"},
         {"scalar", "NAME=VALUE", "a scalar argument (default 0.5; 1 for integer scalars)", true},
         json}},
       cmd_bench},
      {{"check",
        "OP",
        "Compare a registered kernel with the fp64 golden of its declaration on random data",
        {registry_option(),
         attr,
         isa,
         {"n", "N", "elements per tensor (default 1e5)"},
         {"rows", "R", "sparse ops: rows of the states (default 1000)"},
         {"cols", "C", "sparse ops: columns (default 17)"},
         {"indices", "K", "sparse ops: indexed rows (default 500)"},
         {"seed", "S", "random seed (default 1)"},
         {"scalar", "NAME=VALUE", "a scalar (default: the rule's, else 0.1; integers 1)", true},
         {"rules", "PATH", "rule files the op may come from", true},
         json}},
       cmd_check},
      {{"new",
        "NAME",
        "Write a commented starter rule NAME.rule",
        {{"dir", "DIR", "where to write it (default: the current directory)"}}},
       cmd_new},
      {{"cache",
        "stats|verify|prune|clear",
        "Manage the compile cache",
        {cache_option(),
         {"max-size", "BYTES", "prune: keep at most this much (K/M/G suffixes)"},
         {"max-age", "DAYS", "prune: drop entries unused for longer"},
         json}},
       cmd_cache},
  };
  return table;
}

}  // namespace opforge::cli
