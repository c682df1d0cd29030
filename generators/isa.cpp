#include "generators/isa.h"

#include <stdexcept>

namespace opforge::generators {

const std::vector<Isa>& isas() {
  // avx512: Skylake-server level AVX-512, the subset every AVX-512 x86 server has.
  // avx2: the Haswell-level baseline.
  // avx512_bf16: avx512 plus what Halide 14's Sapphire Rapids target lets LLVM use
  // (avx512_cannonlake's ifma and vbmi, vnni, bf16; AMX only through intrinsics no kernel
  // calls), for its vcvtneps2bf16: one instruction rounds 16 fp32 values to bf16 where the
  // avx512 target spends six integer ops (and two more keep a NaN a NaN). Zen 4 and 5,
  // Sapphire Rapids and later run it; only the bf16 activation variants of the memory-bound NN
  // ops (and their yardsticks) are built for it (op_table.cpp: what it measured).
  static const std::vector<std::string> avx512 = {"sse4.1",   "avx",     "avx2",     "fma",
                                                  "f16c",     "avx512f", "avx512cd", "avx512vl",
                                                  "avx512bw", "avx512dq"};
  static const std::vector<std::string> avx512_bf16 = [] {
    std::vector<std::string> f = avx512;
    for (const char* more : {"avx512ifma", "avx512vbmi", "avx512vnni", "avx512bf16"})
      f.push_back(more);
    return f;
  }();
  static const std::vector<Isa> table = {
      {"avx512", "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41", avx512, 2},
      {"avx2", "x86-64-linux-avx-avx2-f16c-fma-sse41", {"sse4.1", "avx", "avx2", "fma", "f16c"}, 1},
      {"avx512_bf16",
       "x86-64-linux-avx-avx2-avx512-avx512_cannonlake-avx512_sapphirerapids-avx512_skylake-f16c-"
       "fma-sse41",
       avx512_bf16, 3, /*every_op=*/false},
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
