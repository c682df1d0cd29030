// NN ops' shape rules, evaluated from the descriptor (shape.named_dims): binds every dim name
// to its extent across the call's tensors, checks the declared conditions, computes the output
// shapes and decides whether a variant's algorithm applies. Errors name the op, the argument
// and the shapes involved.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "opforge/descriptor.h"
#include "opforge/runtime.hpp"

namespace opforge {

struct BoundShapes {
  // Dim names, int scalars and int/bool attrs -> values: what shape expressions read.
  std::map<std::string, int64_t> env;
  // Where each dim name was bound: "x [2, 3, 8, 8]", for messages.
  std::map<std::string, std::string> origin;
  // Whether any input had the optional leading dim ("B?") of a name.
  std::map<std::string, bool> optional_present;
  // Per output, in descriptor order.
  std::vector<std::vector<int64_t>> output_shapes;
};

// `inputs`: the call's tensor views by input name (outputs are not needed); `scalars` by name.
// Throws Error("op '<op>': ...") for a missing tensor, a wrong rank, conflicting extents, a
// failed check or a negative output dim.
BoundShapes bind_shapes(const registry::Descriptor& d,
                        const std::map<std::string, const TensorView*>& inputs,
                        const std::map<std::string, double>& scalars);

// Whether the variant's algorithm applies ("" when it does; else why not, in the user's terms:
// the condition and the values it read).
std::string why_not_applicable(const registry::Descriptor& d, const BoundShapes& b);

// "[2, 3]".
std::string shape_text(const std::vector<int64_t>& s);

}  // namespace opforge
