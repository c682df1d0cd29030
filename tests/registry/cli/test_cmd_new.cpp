// opforge new: a starter rule that builds, describes, checks and runs.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

TEST_CASE("new writes a starter rule that builds, describes and runs") {
  TempDir dir;
  const Result made = opforge({"new", "my_rule", "--dir", dir.path().string()});
  REQUIRE_MESSAGE(made.rc == 0, made.all());
  CHECK(fs::exists(dir / "my_rule.rule"));
  CHECK(opforge({"new", "my_rule", "--dir", dir.path().string()}).rc == 1);  // no overwrite
  CHECK(opforge({"new", "../escape", "--dir", dir.path().string()}).rc == 2);
  const Result built = opforge({"build", "--registry", dir / "reg", "--cache-dir", test_cache_dir(),
                                "--rules", dir / "my_rule.rule", "--only", "my_rule"});
  REQUIRE_MESSAGE(built.rc == 0, built.all());
  const Result d = opforge({"describe", "my_rule", "--registry", dir / "reg"});
  CHECK(contains(d.out, "sign(grad)"));
  CHECK(contains(d.out, "nesterov"));
  // The fp64 golden of the rule, with the rule's hyper defaults.
  const Result c = opforge({"check", "my_rule", "--registry", dir / "reg", "--rules",
                            dir / "my_rule.rule", "--n", "5000"});
  CHECK_MESSAGE(c.rc == 0, c.all());
  CHECK(contains(c.out, "ok: within tolerance"));
}

}  // namespace
}  // namespace opforge::testing
