// Precision dumps (CANN's dump-and-compare workflow): while a dump directory is set, every
// kernel call in the process writes its inputs before it runs and its outputs after, as .npy,
// and then a call.json naming them, the scalars and the variant's whole descriptor;
// `opforge check --replay DIR` re-runs each call through its fp64 golden. Off by default: the
// cost is one atomic load per call.
//
//   DIR/000012-<variant>/in.<name>.npy     every tensor argument before the call
//   DIR/000012-<variant>/out.<name>.npy    every output after it (in-place states updated)
//   DIR/000012-<variant>/call.json         written last: a call without it did not finish
//
// Calls are numbered in the order they start, continuing after the entries a directory
// already holds (several runs append). bf16 tensors are stored as their raw bits ('<u2'),
// FP8 as '|u1'; call.json says each file's dtype and shape.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "opforge/runtime.hpp"

namespace opforge::dump {

// One call being dumped: its entry directory, call.json so far, and the outputs to write
// after the call (file stem, the tensor the kernel updates).
struct CallRecord {
  std::filesystem::path dir;
  const registry::Descriptor* d = nullptr;
  nlohmann::ordered_json call;
  std::vector<std::pair<std::string, const TensorView*>> outputs;
};
// Whether a dump directory is set (one atomic load).
bool on();
// Null when dumping is off; else writes the call's inputs (t_at: tensors by slot, n_in of them
// before any NN output slots; s_at: scalars by slot). Throws Error naming the file when a write
// fails.
std::unique_ptr<CallRecord> begin(const registry::Descriptor& d,
                                  const std::vector<const registry::Input*>& tensor_slots,
                                  size_t n_in, const TensorView* const* t_at,
                                  const std::vector<const registry::Input*>& scalar_slots,
                                  const double* s_at);
// After the call: its outputs and call.json.
void finish(CallRecord& r);

}  // namespace opforge::dump
