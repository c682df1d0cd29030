// make_descriptor: shape.splittable is written from the planned pipeline, true exactly for
// dense ops without a whole-tensor reduction; max_elements is 2^30.
#include <doctest/doctest.h>

#include <map>

#include "generators/ops.h"
#include "opforge/descriptor.h"
#include "registry/builder/registry_builder.h"

namespace opforge::builder {
namespace {

const HalideIdentity kHalide{"/usr/lib/libHalide.so", "14.0.0", std::string(64, 'a')};

TEST_CASE("make_descriptor: splittable for dense ops without reductions, round-tripped") {
  const std::map<std::string, bool> expected = {
      {"apply_adam", true},  {"apply_gradient_descent", true},
      {"apply_ftrl", true},  {"apply_lamb", false},
      {"apply_lars", false}, {"sparse_apply_adagrad", false}};
  std::vector<std::string> only;
  for (const auto& [op, _] : expected) only.push_back(op);
  const auto plan = plan_variants(generators::op_table(), only, kHalide);
  std::map<std::string, int> seen;
  for (const auto& v : plan) {
    const registry::Descriptor d = make_descriptor(v, kHalide.version);
    CAPTURE(v.id);
    auto it = expected.find(d.op);
    if (it == expected.end()) continue;  // a bandwidth kernel the ops need
    ++seen[d.op];
    // Loss scaling adds a reduction over the gradients: never splittable.
    const registry::Attr* unscale = d.find_attr("unscale");
    const registry::Attr* skip = d.find_attr("skip_if_nonfinite");
    const bool scaled = (unscale && unscale->value == "true") || (skip && skip->value == "true");
    CHECK(d.shape.splittable == (it->second && !scaled));
    CHECK(d.shape.max_elements == int64_t(1) << 30);  // 32-bit schedules' headroom
    CHECK(d.shape.splittable ==
          (!v.op.as_optimizer().sparse() && v.pipeline.reduction_reads.empty()));
    const registry::Descriptor back = registry::descriptor_from_json(to_json(d), v.id);
    CHECK(back.shape.splittable == d.shape.splittable);
  }
  for (const auto& [op, _] : expected) CHECK_MESSAGE(seen[op] > 0, op);
}

}  // namespace
}  // namespace opforge::builder
