// What `opforge check OP` (seeded data, cmd_check.cpp) and `opforge check --replay DIR` (a
// dumped call, replay.cpp) share: an optimizer op's declarations, one call's data (the
// kernel's buffers after the call and the golden's fp64 copies of its inputs), the fp64 golden
// of the declaration and the comparison of every output with the descriptor's tolerance.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dsl/op_decl.h"
#include "opforge/runtime.hpp"
#include "registry/builder/golden.h"
#include "registry/cli/args.h"

namespace opforge::cli::check {

bool narrow(registry::DType t);  // f16 or bf16
uint16_t to_bits(registry::DType t, float x);
float widen(registry::DType t, uint16_t h);

// The declarations of `op` (a C++ op or a rule), one per storage (f32, bf16m, bf16s, ...);
// rule declarations are owned by `keep`. Throws UsageError for an unknown op (naming the
// nearest among `names`) or an NN op.
std::vector<const dsl::OptimizerDecl*> declarations_of(
    const std::string& op, const std::vector<std::string>& rules,
    std::vector<std::unique_ptr<dsl::OptimizerDecl>>& keep, std::vector<std::string> names);
// A rule op's declaration is its rule file: --rules, else the file its descriptor names when
// it still exists (the user registry keeps the sources of rules given as text).
std::vector<std::string> rule_files(const Args& a, const registry::Descriptor& d);
std::vector<std::string> rule_files(const Args& a, Registry& reg, const std::string& op);

// The 256 values of a descriptor's quant_map ("dynamic_signed", ...), as the kernels decode.
std::array<float, 256> quant_table(const std::string& name);
// An 8-bit state's values: each code's map value times its block's absmax.
std::vector<double> decoded_states(const std::string& quant_map, const std::vector<uint8_t>& codes,
                                   const std::vector<float>& absmax, int64_t block);

// One check's data: the kernel's buffers (fp32, or narrow bits) and the golden's fp64 copies
// of the same values.
struct CheckData {
  builder::GoldenData golden;
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<uint16_t>> half;
  std::map<std::string, std::vector<uint8_t>> bytes;  // FP8 gradients' bits, 8-bit codes
  std::vector<int32_t> idx32;
  std::vector<int32_t> segments;  // multi-tensor ops: the chunk table the kernel reads
  std::map<std::string, std::vector<int64_t>> shapes;
  std::vector<Tensor> tensors;
  std::map<std::string, double> scalars;
  // The unit of Tolerance::conditioning by state and element (builder::fp32_spread): the same
  // declaration evaluated in fp32, its distance from the golden plus its sensitivity.
  std::map<std::string, std::vector<double>> fp32_spread;
};

// Goldens already computed, by declaration (op, storage, attrs) and seeded inputs.
using Goldens = std::map<std::string, std::map<std::string, std::vector<double>>>;

// Runs the fp64 golden of `d`'s declaration on c.golden's inputs (updated in place; with
// `goldens`, computed once per declaration and reused, for the same seeded inputs on other
// ISAs) and judges the kernel's outputs in `c` against it: the report (op, variant, scalars,
// tolerance, per-output errors, ok).
nlohmann::json judge(const std::vector<const dsl::OptimizerDecl*>& decls,
                     const registry::Descriptor& d, CheckData& c, Goldens* goldens);

// One output's errors as JSON (max_abs_error, max_rel_error, max_ulp, exceeding, elements).
nlohmann::json errors_json(const builder::GoldenErrors& e);
void print_report(const registry::Descriptor& d, const nlohmann::json& report);
// The per-output rows of a report ("state" or "output" heads the name column).
void print_errors_table(const char* what, const nlohmann::json& states);

// Why check does not check a variant of this op (a bandwidth kernel), or "".
std::string not_checked(const registry::Descriptor& d);

}  // namespace opforge::cli::check
