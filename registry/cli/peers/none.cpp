// Built without oneDNN (CMake found no libdnnl-dev): `opforge bench` has no peer column.
#include "registry/cli/peers/onednn.h"

namespace opforge::peers {

bool onednn_available() {
  return false;
}

std::unique_ptr<PeerRun> onednn_peer(const std::string&, const std::map<std::string, std::string>&,
                                     const std::vector<Tensor>&,
                                     const std::map<std::string, double>&) {
  return nullptr;
}

}  // namespace opforge::peers
