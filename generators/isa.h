// The ISAs kernels are compiled for. Targets are pinned: `host` resolves to the build
// machine's exact features (AVX-512 Sapphire Rapids here), which must not leak into what is
// cached or shipped.
#pragma once

#include <string>
#include <vector>

namespace opforge::generators {

struct Isa {
  std::string name;                       // "avx512", "avx2", "avx512_bf16"
  std::string halide_target;              // without no_runtime (the builder adds it)
  std::vector<std::string> cpu_features;  // all must be present to run it
  int priority;                           // the runtime prefers higher
  // Every op-table row is built for it (true), or only the rows that name it (a tier that
  // pays for a few variants only, beside a full ISA of lower priority).
  bool every_op = true;
};

const std::vector<Isa>& isas();
const Isa& isa(const std::string& name);  // throws std::invalid_argument for unknown names

}  // namespace opforge::generators
