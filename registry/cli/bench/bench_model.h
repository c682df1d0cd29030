// opforge bench OP --model PRESET: multi-tensor apply on a model preset's flat buffers, one
// call against one call per tensor and the same-traffic bandwidth kernel.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "registry/cli/args.h"

namespace opforge {
class Kernel;
class Registry;
}  // namespace opforge

namespace opforge::cli {

// Measures `op` (elementwise and splittable, else an Error naming it) on --model's layout.
nlohmann::json bench_model(const Args& a, Registry& reg, Kernel& op,
                           const std::map<std::string, double>& given);
void print_model(const nlohmann::json& j);

// The presets, one per line: name, tensors, elements, summary (`opforge bench --models`).
std::string model_list_text();
nlohmann::json model_list_json();
// "transformer-small, ..." for --help.
std::string model_names();

}  // namespace opforge::cli
