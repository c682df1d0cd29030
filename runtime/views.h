// Allocation-free views of owning call arguments (Tensor, scalar map), valid while those live:
// the one conversion the owning-argument overloads of the runtime share.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "opforge/runtime.hpp"

namespace opforge {

struct Views {
  std::vector<TensorView> tensors;
  std::vector<ScalarView> scalars;
  Views(const std::vector<Tensor>& t, const std::map<std::string, double>& s) {
    tensors.reserve(t.size());
    for (const auto& x : t) {
      tensors.push_back(
          {x.name.c_str(), x.data, x.dtype, x.shape.data(), static_cast<int>(x.shape.size())});
    }
    scalars.reserve(s.size());
    for (const auto& [name, v] : s) scalars.push_back({name.c_str(), v});
  }
};

}  // namespace opforge
