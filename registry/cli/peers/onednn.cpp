// The oneDNN peer, by op family (registry/cli/peers/onednn_<family>.cpp).
#include "registry/cli/peers/onednn.h"

namespace opforge::peers {

bool onednn_available() {
  return true;
}

std::unique_ptr<PeerRun> onednn_peer(const std::string& op,
                                     const std::map<std::string, std::string>& attrs,
                                     const std::vector<Tensor>& tensors,
                                     const std::map<std::string, double>& scalars) {
  // oneDNN's OpenMP pool takes OMP_NUM_THREADS, which `opforge bench` sets before it starts.
  using Maker = std::unique_ptr<PeerRun> (*)(
      const std::string&, const std::map<std::string, std::string>&, const std::vector<Tensor>&,
      const std::map<std::string, double>&);
  // Each family's maker returns nullptr for ops that are not its own.
  static const Maker kFamilies[] = {onednn_conv_peer, onednn_matmul_peer, onednn_norm_peer,
                                    onednn_attention_peer};
  for (Maker m : kFamilies) {
    if (auto p = m(op, attrs, tensors, scalars)) return p;
  }
  return nullptr;
}

}  // namespace opforge::peers
