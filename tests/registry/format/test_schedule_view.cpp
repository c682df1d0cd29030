// The schedule view's evaluator and case choice (no libHalide): Halide's integer semantics,
// three-valued logic for values only known at run time, and the rendered marks.
#include <doctest/doctest.h>

#include "registry/format/schedule_view.h"

namespace opforge::registry {
namespace {

using nlohmann::json;

TEST_CASE("evaluate: arithmetic with Halide's integer division") {
  ScheduleEnv env;
  env.n = 10000000;
  // The elementwise recipe's run-time chunk: ((N + 127) / 128) * 16.
  const json chunk =
      json::parse(R"(["*", ["/", ["+", {"var": "updated.0.extent.0"}, 127], 128], 16])");
  CHECK(evaluate(chunk, env) == std::optional<double>(1250000));
  auto eval = [&](const char* text) { return evaluate(json::parse(text), env); };
  CHECK(eval("[\"/\", -7, 2]") == std::optional<double>(-4));  // rounds toward -inf
  CHECK(eval("[\"%\", -7, 2]") == std::optional<double>(1));
  CHECK(eval("[\"/\", 5, 0]") == std::optional<double>(0));  // Halide: x / 0 == 0
  CHECK(eval("[\"max\", 3, [\"min\", 9, 4]]") == std::optional<double>(4));
  CHECK(eval("[\"int\", 2.7]") == std::optional<double>(2));
  CHECK(eval("[\"?\", \"some_call(x)\"]") == std::nullopt);
  CHECK(eval("{\"var\": \"lr\"}") == std::nullopt);
}

TEST_CASE("evaluate: && and || with unknown operands") {
  ScheduleEnv env;
  const json unknown = {{"var", "lr"}};
  CHECK(evaluate(json::array({"&&", false, unknown}), env) == std::optional<double>(0));
  CHECK(evaluate(json::array({"&&", true, unknown}), env) == std::nullopt);
  CHECK(evaluate(json::array({"||", unknown, true}), env) == std::optional<double>(1));
  CHECK(evaluate(json::array({"||", unknown, false}), env) == std::nullopt);
  env.values["lr"] = 0;
  CHECK(evaluate(json::array({"!", unknown}), env) == std::optional<double>(1));
}

json stage_with_fast_path() {
  // What the elementwise recipe makes for a fast path (lr == 0) and a size threshold.
  return json::parse(R"json({"name": "updated", "cases": [
    {"condition": ["&&", ["==", {"var": "lr"}, 0], [">=", {"var": "updated.0.extent.0"}, 16384]],
     "condition_text": "(lr == 0.0f) && (updated.0.extent.0 >= 16384)", "splits": [], "loops": []},
    {"condition": [">=", {"var": "updated.0.extent.0"}, 16384],
     "condition_text": "(updated.0.extent.0 >= 16384)", "splits": [],
     "loops": [{"var": "i.io1", "kind": "parallel"}]},
    {"splits": [], "loops": [{"var": "i.v0", "kind": "vectorized", "width": 16}]}]})json");
}

TEST_CASE("choose_case: the first true condition, unless an unknown one comes before it") {
  const json stage = stage_with_fast_path();
  ScheduleEnv env;
  env.n = 100;  // the fast path needs N >= 16384 too: known false whatever lr is
  CHECK(choose_case(stage, env).index == std::optional<size_t>(2));
  env.n = 1 << 20;  // depends on lr
  const CaseChoice c = choose_case(stage, env);
  CHECK_FALSE(c.index.has_value());
  CHECK(c.depends_on == "lr");
  env.values["lr"] = 0.001;
  CHECK(choose_case(stage, env).index == std::optional<size_t>(1));
  env.values["lr"] = 0;
  CHECK(choose_case(stage, env).index == std::optional<size_t>(0));
}

TEST_CASE("render: kinds, widths, the taken case; loop nests for diff") {
  const json schedule = {{"format", "opforge.schedule/1"},
                         {"funcs", json::array({{{"name", "updated"},
                                                 {"output", true},
                                                 {"args", {"i"}},
                                                 {"types", {"float32"}},
                                                 {"compute_at", "root"},
                                                 {"store_at", "root"},
                                                 {"stages", {stage_with_fast_path()}}}})}};
  check_schedule(schedule, "test");
  ScheduleEnv env;
  env.n = 1 << 20;
  env.values["lr"] = 0.5;
  const std::string text = render_schedule(schedule, &env);
  CHECK(text.find("3 cases (2 specializations)") != std::string::npos);
  CHECK(text.find("case 2: if (updated.0.extent.0 >= 16384)   <== taken") != std::string::npos);
  CHECK(text.find("vectorized i.v0  (16 lanes)") != std::string::npos);
  const std::string nests = render_loop_nests(schedule);
  CHECK(nests.find("updated case 3: otherwise") != std::string::npos);
  CHECK(nests.find("<== taken") == std::string::npos);
  CHECK_THROWS_WITH_AS(check_schedule(json::object(), "x.json"),
                       "x.json: not an opforge.schedule/1 description", std::runtime_error);
}

}  // namespace
}  // namespace opforge::registry
