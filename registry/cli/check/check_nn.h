// opforge check for NN ops: a variant against its op's fp64 reference
// (registry/builder/nn_golden) on every reference problem its algorithm and attrs apply to
// (odd shapes: batch 1 and more, 1x1, channels off the vector width, masked rows, ...), on
// `random_shapes` seeded redraws of those problems' named dims that the op's checks accept
// (a problem the variant's algorithm does not apply to is not counted), and, with
// `with_example`, on the op's example call (the shapes `bench` times). Per output the max
// abs/rel/ulp error and the elements past the bound, over all problems.
#pragma once

#include <nlohmann/json.hpp>

#include "opforge/runtime.hpp"

namespace opforge::cli::check {

// The report: op, variant, problems run (shapes, worst ratio to the bound), outputs, ok.
// Throws Error when the op has no reference.
nlohmann::json check_nn(Kernel& k, bool with_example, int random_shapes, unsigned seed);
void print_nn_report(const nlohmann::json& report);

}  // namespace opforge::cli::check
