// JIT-compiling a Func whose Exprs call the table lookups (dsl/table_lookup.h): through a
// module that links their bitcode, as the kernels are built, for each permute level this host
// runs.
#pragma once

#include <Halide.h>
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "dsl/table_lookup.h"

namespace opforge::dsl::testing {

// The permutes this host runs, each with a JIT target that has them.
inline std::vector<std::pair<Permutes, Halide::Target>> host_permutes() {
  const Halide::Target host = Halide::get_host_target();
  const bool x86 = host.arch == Halide::Target::X86;
  const Halide::Target avx2 =
      Halide::Target("x86-64-linux-sse41-avx-f16c-fma-avx2").with_feature(Halide::Target::JIT);
  std::vector<std::pair<Permutes, Halide::Target>> out;
  if (x86 && host.has_feature(Halide::Target::AVX2)) {
    out.push_back({Permutes::avx2, avx2});
  } else {
    MESSAGE("skipped: the AVX2 table lookups, the host lacks AVX2");
  }
  if (x86 && host.has_feature(Halide::Target::AVX512_Skylake)) {
    out.push_back({Permutes::avx512, avx2.with_feature(Halide::Target::AVX512_Skylake)});
  } else {
    MESSAGE("skipped: the AVX-512 table lookups, the host lacks AVX-512 (Skylake's set)");
  }
  return out;
}

// Realizes out (one output, the inputs bound in `args` order) into `result` for `target`.
inline void realize_linked(Halide::Func out, const std::vector<Halide::Argument>& args,
                           const std::vector<const halide_buffer_t*>& inputs,
                           halide_buffer_t* result, const Halide::Target& target) {
  Halide::Module m = out.compile_to_module(args, "linked", target);
  link_table_lookups(m);
  Halide::Internal::JITModule jit(m, m.get_function_by_name("linked"), {});
  std::vector<const void*> argv(inputs.begin(), inputs.end());
  argv.push_back(result);
  REQUIRE(jit.argv_function()(argv.data()) == 0);
}

}  // namespace opforge::dsl::testing
