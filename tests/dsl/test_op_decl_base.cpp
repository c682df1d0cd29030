// OpDecl and DeclBuilder: the attr declarations, texts and resolution both kinds of op share.
#include <doctest/doctest.h>

#include "dsl/nn_op_decl.h"
#include "dsl/op_decl.h"

namespace opforge::dsl {
namespace {

TEST_CASE("declarations share one attr builder: clashes and duplicates are refused") {
  CHECK_THROWS_WITH_AS(OptimizerDecl("x").state("lr", "s").attr_bool("lr", false, "clash"),
                       "op 'x': attr 'lr' has an argument's name", std::invalid_argument);
  CHECK_THROWS_WITH_AS(NnOpDecl("y").attr_int("k", 1, "a").attr_int("k", 2, "b"),
                       "op 'y': attr 'k' declared twice", std::invalid_argument);
  CHECK_THROWS_AS(NnOpDecl("Bad-Name"), std::invalid_argument);
}

TEST_CASE("resolve_attrs: defaults filled, values canonical, unknown names refused") {
  const OptimizerDecl d = OptimizerDecl("x")
                              .attr_bool("flag", false, "a bool")
                              .attr_int("k", 3, "an int")
                              .attr_float("f", 0.5, "a float")
                              .attr_string("mode", "tf", {"tf", "torch"}, "a choice");
  CHECK(d.resolve_attrs({}) ==
        AttrValues{{"flag", "false"}, {"k", "3"}, {"f", "0.5"}, {"mode", "tf"}});
  CHECK(d.resolve_attrs({{"flag", "1"}, {"k", "+7"}, {"f", "0.25"}, {"mode", "torch"}}) ==
        AttrValues{{"flag", "true"}, {"k", "7"}, {"f", "0.25"}, {"mode", "torch"}});
  CHECK_THROWS_WITH_AS(d.resolve_attrs({{"mode", "keras"}}),
                       doctest::Contains("op 'x': attr 'mode'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(d.resolve_attrs({{"flg", "true"}}), "op 'x': unknown attr 'flg'",
                       std::invalid_argument);
}

TEST_CASE("DeclBuilder: texts, kind, version and tolerance chain on either kind") {
  const NnOpDecl nn =
      NnOpDecl("y").summary("s").formula("f").reference("r").version(3).tolerance(1e-3, 1e-4);
  CHECK(nn.summary() == "s");
  CHECK(nn.formula() == "f");
  CHECK(nn.reference() == "r");
  CHECK(nn.version() == 3);
  CHECK(nn.kind() == "nn");
  CHECK(nn.tolerance().rtol == doctest::Approx(1e-3));
  CHECK(OptimizerDecl("z").kind() == "optimizer");
  CHECK(OptimizerDecl("z").kind("bandwidth").kind() == "bandwidth");
  CHECK_THROWS_WITH_AS(OptimizerDecl("z").named_in_id_off_default("nope"),
                       doctest::Contains("no attr 'nope'"), std::invalid_argument);
}

TEST_CASE("scalar domains: finite by default, declared ones canonical, misuse refused") {
  const OptimizerDecl d = OptimizerDecl("x")
                              .state("var", "v")
                              .scalar("lr", "learning rate")
                              .scalar("beta", "decay")
                              .domain("beta", "[0,1)");
  CHECK(d.args()[1].domain == "finite");
  CHECK(d.args()[2].domain == "[0, 1)");
  CHECK_THROWS_WITH_AS(OptimizerDecl("x").state("var", "v").domain("var", "[0, 1)"),
                       "op 'x': domain: 'var' is not a scalar", std::invalid_argument);
  CHECK_THROWS_WITH_AS(OptimizerDecl("x").domain("lr", "[0, 1)"),
                       "op 'x': domain: no scalar 'lr' (declare it first)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(OptimizerDecl("x").scalar("lr", "l").domain("lr", "[1, 0)"),
                       doctest::Contains("scalar domain '[1, 0)'"), std::invalid_argument);
  // A typical value lies inside the domain, whichever is declared first.
  const OptimizerDecl t =
      OptimizerDecl("x").scalar("beta", "b").typical("beta", 0.9).domain("beta", "[0, 1)");
  REQUIRE(t.args()[0].typical);
  CHECK(*t.args()[0].typical == 0.9);
  CHECK_THROWS_WITH_AS(OptimizerDecl("x").scalar("b", "b").domain("b", "[0, 1)").typical("b", 1),
                       "op 'x': typical: b = 1 is outside its domain [0, 1)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(OptimizerDecl("x").scalar("b", "b").typical("b", 2).domain("b", "[0, 1)"),
                       "op 'x': domain: b's typical value 2 is outside [0, 1)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(OptimizerDecl("x").state("var", "v").typical("var", 1),
                       "op 'x': typical: 'var' is not a scalar", std::invalid_argument);
  CHECK_THROWS_WITH_AS(OptimizerDecl("x").typical("lr", 1),
                       "op 'x': typical: no scalar 'lr' (declare it first)", std::invalid_argument);
  const NnOpDecl nn = NnOpDecl("y").scalar("eps", "e").domain("eps", "[0, inf)");
  CHECK(nn.args()[0].scalar.domain == "[0, inf)");
}

}  // namespace
}  // namespace opforge::dsl
