// The cache key covers everything that determines a kernel's code, and nothing that does not.
#include <doctest/doctest.h>

#include "generators/ops.h"
#include "registry/builder/registry_builder.h"

namespace opforge::builder {
namespace {

const HalideIdentity kHalide{"/usr/lib/libHalide.so", "14.0.0", std::string(64, 'a')};

Halide::Target target(const std::string& isa) {
  return Halide::Target(generators::isa(isa).halide_target).with_feature(Halide::Target::NoRuntime);
}

std::string key(const dsl::OptimizerDecl& d, const dsl::AttrValues& attrs,
                const std::map<std::string, int64_t>& sched, const std::string& isa,
                const HalideIdentity& hid = kHalide) {
  auto p = dsl::build_pipeline(dsl::resolve(d, attrs), sched, target(isa));
  return kernel_key(hid, target(isa), "k", p).hex_digest();
}

TEST_CASE("same declaration, attrs, schedule and target give the same key, every time") {
  const auto& adam = generators::apply_adam();
  const std::string k1 = key(adam, {}, {}, "avx512");
  // Built again in the same process: Halide would rename a second Func("updated").
  CHECK(key(adam, {}, {}, "avx512") == k1);
  CHECK(key(adam, {{"use_nesterov", "false"}}, {}, "avx512") == k1);  // default spelled out
  CHECK(key(adam, {}, {{"vector", 16}}, "avx512") == k1);             // natural width spelled out
}

TEST_CASE("the key changes with the target, the schedule, the attrs and libHalide") {
  const auto& adam = generators::apply_adam();
  const std::string base = key(adam, {}, {}, "avx512");
  CHECK(key(adam, {}, {}, "avx2") != base);
  CHECK(key(adam, {}, {{"vector", 8}}, "avx512") != base);
  CHECK(key(adam, {}, {{"tasks", 16}}, "avx512") != base);
  CHECK(key(adam, {}, {{"serial_below", 4096}}, "avx512") != base);
  CHECK(key(adam, {{"use_nesterov", "true"}}, {}, "avx512") != base);
  HalideIdentity other = kHalide;
  other.sha256 = std::string(64, 'b');
  CHECK(key(adam, {}, {}, "avx512", other) != base);
}

TEST_CASE("a constant that differs in its last bit changes the algorithm text") {
  auto make = [](float c) {
    return dsl::OptimizerDecl("scale_by").state("var", "").update([c](const dsl::UpdateContext& u) {
      return dsl::Updates{{"var", u["var"] * c}};
    });
  };
  const float a = 0.9f, b = std::nextafter(0.9f, 1.0f);
  CHECK(key(make(a), {}, {}, "avx2") != key(make(b), {}, {}, "avx2"));
}

TEST_CASE("declaration errors name the op and the problem") {
  auto bad_state = dsl::OptimizerDecl("bad_op")
                       .state("var", "")
                       .grad("grad", "")
                       .update([](const dsl::UpdateContext& c) {
                         return dsl::Updates{{"grad", c["grad"]}};
                       });
  CHECK_THROWS_WITH_AS(key(bad_state, {}, {}, "avx2"),
                       doctest::Contains("'grad', which is not a state"), std::invalid_argument);
  auto never = dsl::OptimizerDecl("never_op")
                   .state("var", "")
                   .state("m", "")
                   .update([](const dsl::UpdateContext& c) {
                     return dsl::Updates{{"var", c["m"]}};
                   });
  CHECK_THROWS_WITH_AS(key(never, {}, {}, "avx2"), doctest::Contains("state 'm' is never updated"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(key(generators::apply_adam(), {{"use_nesterov", "maybe"}}, {}, "avx2"),
                       doctest::Contains("use_nesterov"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(key(generators::apply_adam(), {{"nesterov", "true"}}, {}, "avx2"),
                       doctest::Contains("unknown attr 'nesterov'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(key(generators::apply_adam(), {}, {{"vector", 65}}, "avx2"),
                       doctest::Contains("'vector' = 65 is outside"), std::invalid_argument);
  CHECK_THROWS_AS(dsl::OptimizerDecl("Bad-Name"), std::invalid_argument);
}

}  // namespace
}  // namespace opforge::builder
