#include "registry/builder/nn_golden/nn_reference.h"

#include "registry/builder/nn_golden/add_references.h"

namespace opforge::nn_golden {

const NnReferences& nn_references() {
  static const NnReferences r = [] {
    NnReferences all;
    for (auto add : {add_attention, add_bandwidth, add_conv2d, add_group_norm, add_matmul,
                     add_norms, add_onebit, add_silu})
      add(all);
    return all;
  }();
  return r;
}

const NnReference* find_nn_reference(const std::string& op) {
  auto it = nn_references().find(op);
  return it == nn_references().end() ? nullptr : &it->second;
}

}  // namespace opforge::nn_golden
