// Reference: bandwidth_copy, y = x.
#include "generators/nn_reference.h"

namespace opforge::testing {
namespace {

const RegisterNnReference reg(
    "bandwidth_copy",
    {{{{{"x", {1}}}, {}}, {{{"x", {17}}}, {}}, {{{"x", {8193}}}, {}}, {{{"x", {65543}}}, {}}},
     [](const NnShapes&, const NnTensors& in, const NnScalars&, const NnAttrs&) {
       return NnTensors{{"y", in.at("x")}};
     }});

}  // namespace
}  // namespace opforge::testing
