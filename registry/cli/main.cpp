// opforge: regenerate, list, describe, inspect, run and benchmark the op library.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "opforge/opforge.h"
#include "opforge/runtime.hpp"
#include "opforge/suggest.hpp"
#include "registry/cli/commands.h"

namespace {

void print_usage() {
  std::cout << "usage: opforge COMMAND [options]   (opforge COMMAND --help for details)\n"
            << "       opforge --version\n\n";
  size_t width = 12;  // the longest command name, two spaces either side
  for (const auto& c : opforge::cli::commands()) width = std::max(width, c.spec.name.size() + 4);
  for (const auto& c : opforge::cli::commands()) {
    std::string left = "  " + c.spec.name;
    left.resize(width, ' ');
    std::cout << left << c.spec.summary << "\n";
  }
  std::cout
      << "\nenvironment:\n"
         "  OPFORGE_REGISTRY      the registry (as --registry)\n"
         "  OPFORGE_CACHE_DIR     the compile cache (as --cache-dir)\n"
         "  OPFORGE_ISA           force an ISA variant (as --isa)\n"
         "  OPFORGE_CPU_FEATURES  hide CPU features from variant selection: a level (avx2,\n"
         "                        avx512, avx512_bf16, none), features (avx2,fma,...),\n"
         "                        -FEATURE removals;\n"
         "                        e.g. avx2 runs an AVX-512 host as an AVX2 one (opforge list\n"
         "                        shows what the runtime sees)\n";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace opforge::cli;
  // libgomp reads its wait policy when it loads, so `bench` restarts itself once with the
  // policy its regime means and the bench's thread count. idle: passive (every call wakes
  // sleeping workers). awake: active, the workers spin between the back-to-back calls; with
  // the default openmp pool they are the same libgomp workers oneDNN (the peer) runs on. Under
  // passive, "awake" calls paid a wake each (silu at 81920 elements 58 us, 18 us active; AMD
  // EPYC 2 vCPUs). With Halide's pool (OPFORGE_THREAD_POOL=halide) awake stays passive: spinning
  // libgomp workers (~10 ms after each oneDNN region) would steal the cores Halide's runs on.
  if (argc > 1 && std::string(argv[1]) == "bench" && !std::getenv("OMP_WAIT_POLICY")) {
    std::string threads = "2", regime = "awake";
    for (int i = 2; i < argc; ++i) {  // --name value or --name=value, as the options parse
      const std::string arg = argv[i];
      for (auto [name, value] : {std::pair{"--threads", &threads}, {"--regime", &regime}}) {
        const std::string eq = std::string(name) + "=";
        if (arg == name && i + 1 < argc) *value = argv[i + 1];
        if (arg.rfind(eq, 0) == 0) *value = arg.substr(eq.size());
      }
    }
    const char* pool = std::getenv("OPFORGE_THREAD_POOL");
    const bool halide_pool = pool && std::string(pool) == "halide";
    setenv("OMP_WAIT_POLICY", regime == "awake" && !halide_pool ? "active" : "passive", 1);
    // Only a valid count: libgomp warns about OMP_NUM_THREADS=0 before --threads' own error.
    const bool count = !threads.empty() && threads.size() < 5 &&
                       threads.find_first_not_of("0123456789") == std::string::npos &&
                       std::stoi(threads) >= 1;
    if (count && !std::getenv("OMP_NUM_THREADS")) setenv("OMP_NUM_THREADS", threads.c_str(), 1);
    execv("/proc/self/exe", argv);  // on failure, run as we are
  }
  if (argc == 2 && std::string(argv[1]) == "--version") {
    // The CLI's own version, then the runtime library's it loaded (they differ only when a
    // stale libopforge_runtime is found first), Halide's, and the default registry.
    std::cout << "opforge " << OPFORGE_VERSION_STRING << "\n"
              << "runtime library " << opforge_version() << "\n"
              << "Halide " << OPFORGE_HALIDE_VERSION << "\n"
              << "registry " << opforge::Registry::default_dir() << "\n";
    return 0;
  }
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  std::vector<std::string> names;
  for (const auto& c : commands()) {
    names.push_back(c.spec.name);
    if (c.spec.name != name) continue;
    try {
      Args a = parse(c.spec, argc, argv, 2);
      if (a.has("help")) {
        std::cout << help_text(c.spec);
        // `opforge run apply_adam --help`: the op's own arguments and attrs, from its descriptor.
        if (c.spec.positional.rfind("OP", 0) == 0 && a.positional.size() == 1 &&
            a.positional[0] != "all") {
          std::cout << "\n" << op_help(a, a.positional[0]);
        }
        return 0;
      }
      return c.run(a);
    } catch (const UsageError& e) {
      std::cerr << "opforge " << name << ": " << e.what() << "\n";
      return 2;
    } catch (const std::exception& e) {
      std::cerr << "opforge " << name << ": error: " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "opforge: unknown command '" << name << "'" << opforge::did_you_mean(name, names)
            << "\n";
  return 2;
}
