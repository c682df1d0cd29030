// Schedule previews (registry/builder/preview.h): compile_previews puts a batch of previews
// into the compile cache on worker threads, each one compiled once, and preview_variant then
// finds every one of them there.
#include <doctest/doctest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "builder_test_util.h"
#include "generators/op_table.h"
#include "registry/builder/halide_identity.h"
#include "registry/builder/preview.h"

namespace opforge::builder {
namespace {

using testing::TempDir;

// The descriptor a registry would hold for `id`, planned with this process's libHalide.
registry::Descriptor registered(const std::string& op, const std::string& id,
                                const std::string& cache) {
  const HalideIdentity hid = halide_identity(cache);
  for (const PlannedVariant& v : plan_variants(generators::op_table(), {op}, hid)) {
    if (v.id == id) return make_descriptor(v, hid.version);
  }
  FAIL("no variant " << id);
  return {};
}

TEST_CASE(
    "compile_previews: each set compiled once on the workers, then found by preview_variant") {
  TempDir cache;
  const std::string dir = cache.path.string();
  const registry::Descriptor d =
      registered("apply_gradient_descent", "apply_gradient_descent__f32__avx2", dir);
  const std::vector<std::map<std::string, int64_t>> sets = {
      {{"unroll", 2}}, {{"unroll", 4}}, {{"tasks", 2}}, {{"unroll", 2}, {"tasks", 2}}};
  CHECK(compile_previews(d, sets, dir, {}, 2) == 4);
  CHECK(compile_previews(d, sets, dir, {}, 2) == 0);  // all cached now
  for (const auto& set : sets) {
    const PreviewResult p = preview_variant(d, set, dir);
    CHECK(p.hit);
    for (const auto& [name, value] : set)
      CHECK(p.descriptor.schedule.params.at(name) == std::to_string(value));
  }
  // A set the cache has not seen is compiled by the one-at-a-time path as before.
  CHECK_FALSE(preview_variant(d, {{"unroll", 8}}, dir).hit);
}

TEST_CASE("compile_previews: a bad param is refused by name before anything compiles") {
  TempDir cache;
  const std::string dir = cache.path.string();
  const registry::Descriptor d =
      registered("apply_gradient_descent", "apply_gradient_descent__f32__avx2", dir);
  CHECK_THROWS_WITH_AS(compile_previews(d, {{{"unroll", 2}}, {{"unroll", 9}}}, dir),
                       doctest::Contains("unroll"), std::invalid_argument);
  // Nothing was compiled: the good set is still a miss.
  CHECK_FALSE(preview_variant(d, {{"unroll", 2}}, dir).hit);
}

}  // namespace
}  // namespace opforge::builder
