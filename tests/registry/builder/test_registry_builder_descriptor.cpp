// make_descriptor: shape.splittable is written from the planned pipeline, true exactly for
// dense ops without a whole-tensor reduction; max_elements is 2^30. Every optimizer op of the
// table declares a typical value for each scalar, inside its domain, and the descriptor
// carries it.
#include <doctest/doctest.h>

#include <map>

#include "generators/op_table.h"
#include "generators/ops.h"
#include "opforge/descriptor.h"
#include "opforge/scalar_domain.h"
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

TEST_CASE("every optimizer op declares a typical value for each scalar, inside its domain") {
  int scalars = 0;
  for (const auto& row : generators::op_table()) {
    const auto* decl = dynamic_cast<const dsl::OptimizerDecl*>(row.decl);
    if (!decl || decl->name().rfind("bandwidth_", 0) == 0) continue;  // no scalars to pick
    for (const auto& a : decl->args()) {
      if (a.role != registry::Input::Role::scalar) continue;
      CAPTURE(decl->name());
      CAPTURE(a.name);
      ++scalars;
      REQUIRE(a.typical);
      CHECK(registry::ScalarDomain::parse(a.domain).contains(*a.typical));
    }
  }
  CHECK(scalars > 100);
  // The descriptor carries it, with the domain (FTRL's lr_power: TF's "must be <= 0").
  const auto plan = plan_variants(generators::op_table(), {"apply_ftrl"}, kHalide);
  REQUIRE(!plan.empty());
  const registry::Descriptor d = make_descriptor(plan.front(), kHalide.version);
  const registry::Input* lr_power = d.find_input("lr_power");
  REQUIRE(lr_power);
  REQUIRE(lr_power->typical);
  CHECK(*lr_power->typical == -0.5);
  CHECK(lr_power->domain == "(-inf, 0]");
}

}  // namespace
}  // namespace opforge::builder
