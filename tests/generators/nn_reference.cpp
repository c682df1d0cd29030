#include "generators/nn_reference.h"

namespace opforge::testing {

std::map<std::string, NnReference>& nn_references() {
  static std::map<std::string, NnReference> r;
  return r;
}

const NnReference* find_nn_reference(const std::string& op) {
  auto it = nn_references().find(op);
  return it == nn_references().end() ? nullptr : &it->second;
}

}  // namespace opforge::testing
