// The NN ops' bad-input tests: a call that must fail with an Error naming what is wrong.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "opforge/runtime.hpp"

namespace opforge::testing {

// Calls op's AVX2 variant (every host of the registry runs it) on `tensors` and `scalars`;
// passes when it throws an Error whose message contains `what` (the offending argument or
// the broken condition).
inline void check_call_fails(Registry& reg, const std::string& op,
                             const std::vector<Tensor>& tensors,
                             const std::map<std::string, double>& scalars,
                             const std::string& what) {
  Kernel& k = reg.select(op, {}, "avx2");
  try {
    k.call(tensors, scalars);
    FAIL(op << ": no error; expected one naming '" << what << "'");
  } catch (const Error& e) {
    CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, op << ": " << e.what());
  }
}

}  // namespace opforge::testing
