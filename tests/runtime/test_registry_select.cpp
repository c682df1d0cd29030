// Registry::select keeps the hand-scheduled variant when an autoscheduled twin ("__auto",
// same op, attrs and ISA, lower priority) exists, with or without a forced ISA;
// Registry::load picks any variant by id.
#include <doctest/doctest.h>

#include <cmath>

#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

const std::string kHand = "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx512";
const std::string kAuto = kHand + "__auto";

TEST_CASE("select keeps the hand schedule; load(id) gives the autoscheduled twin") {
  Registry& reg = shared_registry();
  const registry::Descriptor twin = reg.descriptor(kAuto);
  if (!runs_here(twin)) {
    // The twin is still described, and loading it names the feature this host lacks.
    CHECK(twin.target.isa == "avx512");
    CHECK(contains(error_of([&] { reg.load(kAuto); }),
                   "needs CPU feature " + first_missing(twin.target.cpu_features)));
    return;
  }
  const registry::Descriptor hand = reg.select("apply_adam").descriptor();
  CHECK(hand.variant == kHand);
  CHECK(reg.select("apply_adam", {}, "avx512").descriptor().variant == kHand);
  CHECK(reg.select("apply_adam", {{"use_nesterov", "false"}}, "avx512").descriptor().variant ==
        kHand);

  Kernel& k = reg.load(kAuto);
  const registry::Descriptor& d = k.descriptor();
  CHECK(d.variant == kAuto);
  CHECK(d.op == "apply_adam");
  CHECK(d.schedule.recipe == "adams2019");
  CHECK(d.target.isa == "avx512");
  CHECK(d.attr_values() == hand.attr_values());
  CHECK(d.target.priority < hand.target.priority);
  CHECK(&reg.load(kAuto) == &k);  // loaded once

  // It runs and computes what the hand variant computes.
  AdamData a(1001), b(1001);
  k.call(a.tensors({1001}), adam_scalars());
  reg.select("apply_adam", {}, "avx512").call(b.tensors({1001}), adam_scalars());
  for (size_t i = 0; i < a.var.size(); ++i) {
    CHECK(std::fabs(a.var[i] - b.var[i]) <= 1e-6f * std::fabs(b.var[i]) + 1e-7f);
    CHECK(std::fabs(a.m[i] - b.m[i]) <= 1e-6f * std::fabs(b.m[i]) + 1e-7f);
  }
}

TEST_CASE("load: an unknown variant id is named, with a suggestion") {
  const std::string msg = error_of(
      [] { shared_registry().load("apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx2_"); });
  CHECK(contains(msg, "no variant 'apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx2_'"));
  CHECK(contains(msg, "did you mean"));
  CHECK(contains(error_of([] { shared_registry().load("../etc/passwd"); }), "no variant"));
}

}  // namespace
}  // namespace opforge::testing
