// opforge bench for NN ops: the op on the shapes of its descriptor's example (or --shape /
// --scalar), every other algorithm that applies to those shapes, the same-traffic bandwidth
// kernel (bandwidth_op) and the oneDNN peer, all in one process, interleaved, medians.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "opforge/runtime.hpp"
#include "registry/cli/args.h"

namespace opforge::cli {

nlohmann::json bench_nn(const Args& a, Registry& reg, const std::string& op,
                        const std::map<std::string, double>& given);
void print_nn(const nlohmann::json& j);
// `opforge bench nn`: every NN op of the registry on its example, as a markdown table.
int bench_nn_all(const Args& a, Registry& reg);

}  // namespace opforge::cli
