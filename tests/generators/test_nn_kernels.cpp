// Every NN variant of the registry (each algorithm, each ISA this CPU runs) against its op's
// fp64 reference (registry/builder/nn_golden) on every problem its algorithm applies to: odd
// shapes, batch 1 and > 1, 1x1 spatial, channels off the vector width, each activation dtype
// (registry/cli/check/nn_problem.h says how inputs are drawn and outputs judged). A variant that applies to fewer
// than two problems fails: its algorithm would be untested. `opforge check` runs the same.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

#include "host_isa.h"
#include "opforge/runtime.hpp"
#include "registry/cli/check/nn_problem.h"
#include "test_registry.h"

namespace opforge::testing {
namespace {

using namespace nn_golden;

TEST_CASE("every NN variant matches its fp64 reference on the problems it applies to") {
  auto reg = Registry::open(test_registry_dir());
  int variants = 0;
  for (const auto& op : reg->ops()) {
    const auto vs = reg->variants(op);
    if (!vs.front().shape.named_dims) continue;
    const NnReference* ref = find_nn_reference(op);
    REQUIRE_MESSAGE(ref, op << " has no fp64 reference (registry/builder/nn_golden)");
    for (const auto& d : vs) {
      if (!runs_here(d)) continue;
      CAPTURE(d.variant);
      Kernel& k = reg->load(d.variant);
      int ran = 0;
      double worst = 0;
      std::string worst_at;
      for (size_t i = 0; i < ref->problems.size(); ++i) {
        const NnProblem& p = ref->problems[i];
        if (!attrs_match(d, p.attrs)) continue;
        CAPTURE(shapes_text(p.shapes, p.scalars));
        const NnProblemCheck c = check_problem(k, *ref, p, static_cast<unsigned>(1000 + i));
        ran += c.applied;
        if (!(c.worst <= worst)) worst = c.worst, worst_at = c.worst_at;
      }
      MESSAGE(d.variant << ": " << ran << " problems, worst error " << worst << "x of tolerance at "
                        << worst_at);
      CHECK_MESSAGE(ran >= 2, d.variant << " applies to " << ran << " of the problems");
      CHECK_MESSAGE(worst <= 1.0, d.variant << ": " << worst << "x of tolerance at " << worst_at);
      ++variants;
    }
  }
  CHECK(variants > 0);
}

}  // namespace
}  // namespace opforge::testing
