// The oneDNN (Debian libdnnl-dev, 2.6) equivalents of the NN ops, for `opforge bench`'s
// same-run peer column. Benchmark-only: built when CMake finds oneDNN; nothing else links it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "opforge/runtime.hpp"

namespace opforge::peers {

// One prepared oneDNN primitive on the caller's tensors (created once, run many times).
struct PeerRun {
  virtual ~PeerRun() = default;
  virtual void run() = 0;  // one execution, waited for
  std::string name;        // e.g. "oneDNN layer_normalization"
};

// Whether this build has oneDNN.
bool onednn_available();

// The oneDNN run of `op` on the tensors opforge's kernel is called with (inputs and outputs
// by their descriptor names, NCHW / row-major as the descriptor says), or nullptr when oneDNN
// has no equivalent. Throws std::runtime_error when oneDNN rejects the problem.
std::unique_ptr<PeerRun> onednn_peer(const std::string& op,
                                     const std::map<std::string, std::string>& attrs,
                                     const std::vector<Tensor>& tensors,
                                     const std::map<std::string, double>& scalars);

// Per family (registry/cli/peers/onednn_<family>.cpp); nullptr when `op` is not theirs.
std::unique_ptr<PeerRun> onednn_norm_peer(const std::string& op,
                                          const std::map<std::string, std::string>& attrs,
                                          const std::vector<Tensor>& tensors,
                                          const std::map<std::string, double>& scalars);
std::unique_ptr<PeerRun> onednn_matmul_peer(const std::string& op,
                                            const std::map<std::string, std::string>& attrs,
                                            const std::vector<Tensor>& tensors,
                                            const std::map<std::string, double>& scalars);
std::unique_ptr<PeerRun> onednn_attention_peer(const std::string& op,
                                               const std::map<std::string, std::string>& attrs,
                                               const std::vector<Tensor>& tensors,
                                               const std::map<std::string, double>& scalars);
std::unique_ptr<PeerRun> onednn_conv_peer(const std::string& op,
                                          const std::map<std::string, std::string>& attrs,
                                          const std::vector<Tensor>& tensors,
                                          const std::map<std::string, double>& scalars);

}  // namespace opforge::peers
