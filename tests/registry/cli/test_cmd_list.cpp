// opforge list: every op and variant, as a table and as JSON.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

TEST_CASE("list: every op, as a table and as JSON") {
  const Result r = opforge_reg({"list"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  for (const char* op : {"apply_adam", "apply_gradient_descent", "apply_momentum"}) {
    CHECK(contains(r.out, op));
  }
  CHECK(contains(r.out, test_registry_dir()));

  const Result j = opforge_reg({"list", "--json"});
  REQUIRE_MESSAGE(j.rc == 0, j.all());
  const json v = parse_json(j);
  REQUIRE(v.is_array());
  int adam = 0;
  for (const auto& e : v) {
    if (e.at("op") == "apply_adam") {
      ++adam;
      CHECK(e.at("variant").get<std::string>().rfind("apply_adam__", 0) == 0);
      CHECK(e.at("attrs").contains("use_nesterov"));
    }
  }
  // use_nesterov false/true x epsilon_mode tf/torch x avx512/avx2, the autoscheduled
  // avx512 twin of the default attrs, bf16m/f16m of use_nesterov false/true x avx512/avx2,
  // bf16s/bf16ms (bf16 states) of the default attrs x avx512/avx2, and loss scaling
  // (unscale+skip in f32, bf16m, f16m, bf16ms; unscale, skip alone in bf16m) x avx512/avx2,
  // 8-bit states (q8s, q8ls, unscale+skip q8s, bf16mq8s) x avx512/avx2, and FP8 gradients
  // (e4m3g, e5m2g) x avx512/avx2.
  CHECK(adam == 45);
}

}  // namespace
}  // namespace opforge::testing
