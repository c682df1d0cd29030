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

// Why oneDNN 2.6 has no equivalent of `op` ("" when it has one or the op is unknown): the
// bench tables say so instead of leaving the column empty.
inline std::string onednn_missing(const std::string& op) {
  const std::string no_rms =
      "oneDNN 2.6 has no RMS normalization (layer_normalization "
      "always subtracts the mean)";
  if (op == "rms_norm") return no_rms;
  if (op == "add_rms_norm") return no_rms + ", nor a residual add fused into a normalization";
  if (op == "add_layer_norm")
    return "oneDNN 2.6 layer_normalization has no fused residual add (an add, then "
           "layer_normalization, is not the same op: it moves 1.5x the bytes)";
  if (op == "silu_mul")
    return "oneDNN 2.6 has no eltwise op of two tensors (eltwise_swish with a binary_mul "
           "post-op timed 0.07 ms for 48 MB, not a real pass: left out)";
  if (op == "group_norm") return "oneDNN 2.6 has no group normalization (it came with oneDNN 3.x)";
  return "";
}

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
