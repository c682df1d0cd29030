#include "generators/isa.h"

#include <stdexcept>

namespace opforge::generators {

const std::vector<Isa>& isas() {
  // avx512: Skylake-server level AVX-512, the subset every AVX-512 x86 server has.
  // avx2: the Haswell-level baseline.
  static const std::vector<Isa> table = {
      {"avx512",
       "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41",
       {"sse4.1", "avx", "avx2", "fma", "f16c", "avx512f", "avx512cd", "avx512vl", "avx512bw",
        "avx512dq"},
       2},
      {"avx2", "x86-64-linux-avx-avx2-f16c-fma-sse41", {"sse4.1", "avx", "avx2", "fma", "f16c"}, 1},
  };
  return table;
}

const Isa& isa(const std::string& name) {
  for (const auto& i : isas()) {
    if (i.name == name) return i;
  }
  throw std::invalid_argument("unknown ISA '" + name + "'");
}

}  // namespace opforge::generators
