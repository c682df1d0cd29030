// describe_schedule on pipelines with known schedules: loop kinds, vector and unroll widths,
// split factors and tails, specializations, storage folding and async stages; names must not
// depend on Halide's per-process counters.
#include <doctest/doctest.h>

#include "registry/builder/schedule_description.h"
#include "registry/format/schedule_view.h"

namespace opforge::builder {
namespace {

using nlohmann::json;

const json& func_named(const json& d, const std::string& name) {
  for (const auto& f : d.at("funcs")) {
    if (f.at("name") == name) return f;
  }
  FAIL("no func " << name << " in " << d.dump(1));
  static json none;
  return none;
}

// A 1-D elementwise pipeline: parallel chunks of 64, 8-wide vectors inside.
Halide::Pipeline parallel_vectorized() {
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  Halide::Func out("out");
  Halide::Var x("x"), xo("xo"), xi("xi");
  out(x) = in(x)*2.0f;
  out.split(x, xo, xi, 64, Halide::TailStrategy::GuardWithIf)
      .parallel(xo)
      .vectorize(xi, 8, Halide::TailStrategy::GuardWithIf);
  return Halide::Pipeline(out);
}

TEST_CASE("loop kinds, widths, split factors and tails") {
  const json d = describe_schedule(parallel_vectorized());
  CHECK(d.at("format") == "opforge.schedule/1");
  const json& out = func_named(d, "out");
  CHECK(out.at("output") == true);
  CHECK(out.at("compute_at") == "root");
  const json& c = out.at("stages").at(0).at("cases").at(0);
  REQUIRE(c.at("loops").size() == 3);
  CHECK(c["loops"][0] == json({{"var", "x.xo"}, {"kind", "parallel"}}));
  CHECK(c["loops"][1].at("kind") == "serial");
  CHECK(c["loops"][2].at("kind") == "vectorized");
  CHECK(c["loops"][2].at("width") == 8);
  REQUIRE(c.at("splits").size() == 2);
  CHECK(c["splits"][0].at("factor") == 64);
  CHECK(c["splits"][0].at("tail") == "GuardWithIf");

  const std::string text = registry::render_schedule(d);
  CHECK(text.find("parallel   x.xo") != std::string::npos);
  CHECK(text.find("(8 lanes)") != std::string::npos);
  CHECK(text.find("by 64, tail GuardWithIf") != std::string::npos);
}

TEST_CASE("the same schedule describes identically in one process (counters renamed)") {
  // Each vectorize() names its inner loop with a process-wide counter (x.xi.v12, x.xi.v13).
  CHECK(describe_schedule(parallel_vectorized()) == describe_schedule(parallel_vectorized()));
}

TEST_CASE("unrolled loops, specializations and the case a size takes") {
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  Halide::Func out("out");
  Halide::Var x("x");
  out(x) = in(x) + 1.0f;
  Halide::Expr n = out.output_buffer().dim(0).extent();
  out.specialize(n >= 1000).vectorize(x, 16).unroll(x, 4);
  out.vectorize(x, 4);
  const json d = describe_schedule(Halide::Pipeline(out));
  const json& stage = func_named(d, "out").at("stages").at(0);
  REQUIRE(stage.at("cases").size() == 2);
  const json& big = stage["cases"][0];
  CHECK(big.at("condition_text") == "(out.extent.0 >= 1000)");
  bool unrolled = false, vec16 = false;
  for (const auto& l : big.at("loops")) {
    unrolled = unrolled || (l.at("kind") == "unrolled" && l.value("width", 0) == 4);
    vec16 = vec16 || (l.at("kind") == "vectorized" && l.value("width", 0) == 16);
  }
  CHECK(unrolled);
  CHECK(vec16);
  CHECK(stage["cases"][1].at("loops").back().at("width") == 4);

  registry::ScheduleEnv env;
  env.n = 999;
  CHECK(registry::choose_case(stage, env).index == std::optional<size_t>(1));
  env.n = 1000;
  CHECK(registry::choose_case(stage, env).index == std::optional<size_t>(0));
  const std::string text = registry::render_schedule(d, &env);
  CHECK(text.find("if (out.extent.0 >= 1000)   <== taken") != std::string::npos);
}

TEST_CASE("storage folding and async producers (double buffering)") {
  Halide::Func prod("prod"), cons("cons");
  Halide::Var x("x"), y("y");
  prod(x, y) = x + y;
  cons(x, y) = prod(x, y - 1) + prod(x, y + 1);
  prod.store_root().compute_at(cons, y).fold_storage(y, 4).async();
  const json d = describe_schedule(Halide::Pipeline(cons));
  const json& p = func_named(d, "prod");
  CHECK(p.at("async") == true);
  CHECK(p.at("compute_at") == "cons.y");
  CHECK(p.at("store_at") == "root");
  REQUIRE(p.at("folds").size() == 1);
  CHECK(p["folds"][0].at("var") == "y");
  CHECK(p["folds"][0].at("fold_factor") == 4);
  // Producers come before their consumers.
  CHECK(d["funcs"][0].at("name") == "prod");
  const std::string text = registry::render_schedule(d);
  CHECK(text.find("async (producer runs as its own task") != std::string::npos);
  CHECK(text.find("storage folded over y by 4") != std::string::npos);
  CHECK(text.find("compute cons.y, store root") != std::string::npos);
}

TEST_CASE("rfactor lanes get the width of the reduction they came from") {
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  Halide::Func total("total");
  Halide::RDom r(0, in.dim(0).extent(), "r");
  total() = 0.0f;
  total() += in(r);
  Halide::RVar ro("ro"), ri("ri");
  Halide::Var lane("lane");
  Halide::Func lanes = total.update().split(r.x, ro, ri, 8).rfactor(ri, lane);
  lanes.compute_root().vectorize(lane).update().vectorize(lane);
  const json d = describe_schedule(Halide::Pipeline(total));
  const std::string text = registry::render_schedule(d);
  CHECK(text.find("vectorized lane  (8 lanes)") != std::string::npos);
  CHECK(text.find("[reduction]") != std::string::npos);
}

}  // namespace
}  // namespace opforge::builder
