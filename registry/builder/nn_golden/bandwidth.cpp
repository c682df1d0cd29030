// bandwidth_copy's reference, y = x, on sizes 1, 17, 8193 and 65543.
#include "registry/builder/nn_golden/add_references.h"

namespace opforge::nn_golden {
namespace {}  // namespace

void add_bandwidth(NnReferences& r) {
  r["bandwidth_copy"] = NnReference{
      {{{{"x", {1}}}, {}}, {{{"x", {17}}}, {}}, {{{"x", {8193}}}, {}}, {{{"x", {65543}}}, {}}},
      [](const NnShapes&, const NnTensors& in, const NnScalars&, const NnAttrs&) {
        return NnTensors{{"y", in.at("x")}};
      }};
}

}  // namespace opforge::nn_golden
