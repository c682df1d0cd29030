// Distance in units in the last place between two floats: how kernels are compared with their
// fp64 goldens (opforge check) and how the DSL's fast math is bounded (its tests).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace opforge::dsl {

// Steps between a and b along the ordered fp32 values (+0 and -0 are 0 apart); the sign-magnitude
// bits are mapped onto one monotonic integer line first.
inline int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = std::numeric_limits<int32_t>::min() - ia;
  if (ib < 0) ib = std::numeric_limits<int32_t>::min() - ib;
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

}  // namespace opforge::dsl
