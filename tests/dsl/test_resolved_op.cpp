// dsl::resolve: one variant's op, attrs resolved once. Its arguments, states and results
// follow the attrs; variant ids name attrs, algorithm and storage; the kinds are told apart.
#include <doctest/doctest.h>

#include "dsl/resolved_op.h"

namespace opforge::dsl {
namespace {

using registry::DType;

OptimizerDecl amsgrad_like() {
  return OptimizerDecl("amsgrad_like")
      .attr_bool("amsgrad", false, "keep the running maximum")
      .attr_string("epsilon_mode", "tf", {"tf", "torch"}, "where epsilon goes")
      .named_in_id_off_default("epsilon_mode")
      .state("var", "parameter")
      .state("v", "second moment")
      .state("v_max", "running maximum", {"amsgrad", "true"})
      .grad("grad", "gradient")
      .scalar("lr", "learning rate")
      .result("norm", "a whole-call result", {"amsgrad", "true"})
      .update([](const UpdateContext& c) {
        Expr v = c["v"] + c["grad"] * c["grad"];
        Updates u = {{"var", c["var"] - c["lr"] * c["grad"]}, {"v", v}};
        if (c.attr_bool("amsgrad")) {
          u.push_back({"v_max", max(c["v_max"], v)});
          u.push_back({"norm", c.norm2(c["grad"])});
        }
        return u;
      });
}

NnOpDecl two_algorithms() {
  NnBuildFn build = [](const NnArgs& a) {
    Halide::Func y = output_func("y");
    Halide::Var i;
    y(i) = a.tensors.at("x")(i);
    return NnKernel{{y}, "copy", {}};
  };
  return NnOpDecl("two_algos")
      .input("x", {"N"}, "input")
      .output("y", {"N"}, "output")
      .attr_int("block", 8, "a compile-time block")
      .algorithm("small", "N < 64", 1, "for small N", build)
      .algorithm("large", "", 0, "otherwise", build)
      .algorithm_tolerance("small", 1e-3, 1e-4)
      .tolerance(1e-5, 1e-6);
}

TEST_CASE("resolve: arguments, states and results follow the attrs") {
  const OptimizerDecl d = amsgrad_like();
  const ResolvedOp plain = resolve(d);
  CHECK(plain.attrs == AttrValues{{"amsgrad", "false"}, {"epsilon_mode", "tf"}});
  CHECK(plain.states == std::vector<std::string>{"var", "v"});
  CHECK(plain.results.empty());
  CHECK(plain.args.size() == 4);
  const ResolvedOp ams = resolve(d, {{"amsgrad", "1"}});
  CHECK(ams.attrs.at("amsgrad") == "true");  // canonical
  CHECK(ams.states == std::vector<std::string>{"var", "v", "v_max"});
  CHECK(ams.results == std::vector<std::string>{"norm"});
  std::vector<std::string> names;
  for (const auto& a : ams.args) names.push_back(a.name);
  CHECK(names == std::vector<std::string>{"var", "v", "v_max", "grad", "lr", "norm"});
  CHECK(ams.optimizer() == &d);
  CHECK(ams.nn() == nullptr);
  CHECK(ams.tolerance().rtol == d.tolerance().rtol);
}

TEST_CASE("resolve: variant ids name attrs in declaration order, algorithm and storage") {
  const OptimizerDecl d = amsgrad_like();
  CHECK(resolve(d).variant_id("avx2") == "amsgrad_like__amsgrad_0__f32__avx2");
  CHECK(resolve(d, {{"epsilon_mode", "torch"}, {"amsgrad", "true"}}).variant_id("avx512") ==
        "amsgrad_like__amsgrad_1__epsilon_mode_torch__f32__avx512");
  const OptimizerDecl m = d.with_storage(Storage::from_tag("bf16m"));
  CHECK(resolve(m).variant_id("avx2") == "amsgrad_like__amsgrad_0__bf16m__avx2");
  const NnOpDecl nn = two_algorithms();
  CHECK(resolve(nn, {}, "small").variant_id("avx2") == "two_algos__block_8__small__f32__avx2");
  CHECK(resolve(nn, {{"block", "16"}}, "large").variant_id("avx512") ==
        "two_algos__block_16__large__f32__avx512");
}

TEST_CASE("resolve: an NN algorithm's own tolerance, else the op's") {
  const NnOpDecl nn = two_algorithms();
  CHECK(resolve(nn, {}, "small").tolerance().rtol == doctest::Approx(1e-3));
  CHECK(resolve(nn, {}, "large").tolerance().rtol == doctest::Approx(1e-5));
  CHECK(resolve(nn, {}, "small").nn_algorithm().applies_when == "N < 64");
  CHECK(resolve(nn, {}, "large").states.empty());
}

TEST_CASE("resolve: bad attrs, algorithms and kinds are errors naming the op") {
  const OptimizerDecl d = amsgrad_like();
  const NnOpDecl nn = two_algorithms();
  CHECK_THROWS_WITH_AS(resolve(d, {{"amsgrdd", "true"}}),
                       "op 'amsgrad_like': unknown attr 'amsgrdd'", std::invalid_argument);
  CHECK_THROWS_WITH_AS(resolve(d, {{"epsilon_mode", "keras"}}),
                       doctest::Contains("op 'amsgrad_like': attr 'epsilon_mode'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(resolve(d, {}, "winograd"), doctest::Contains("op 'amsgrad_like'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(resolve(nn, {}, "medium"), "op 'two_algos': no algorithm 'medium'",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(resolve(d).as_nn(), "op 'amsgrad_like': is an optimizer op, not an NN op",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(resolve(nn, {}, "small").as_optimizer(),
                       "op 'two_algos': is an NN op, not an optimizer op", std::invalid_argument);
}

}  // namespace
}  // namespace opforge::dsl
