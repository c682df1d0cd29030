// Shape expressions: parsing, Halide's integer semantics, three-valued logic, errors.
#include <doctest/doctest.h>

#include "registry/format/shape_expr.h"

using opforge::registry::ShapeExpr;
using opforge::registry::ShapeExprError;

namespace {

int64_t eval(const std::string& text, const std::map<std::string, int64_t>& env = {}) {
  auto v = ShapeExpr::parse(text).evaluate(env);
  REQUIRE(v.has_value());
  return *v;
}

}  // namespace

TEST_CASE("precedence and associativity follow C") {
  CHECK(eval("1 + 2 * 3") == 7);
  CHECK(eval("(1 + 2) * 3") == 9);
  CHECK(eval("10 - 4 - 3") == 3);
  CHECK(eval("24 / 4 / 3") == 2);
  CHECK(eval("-2 * -3") == 6);
  CHECK(eval("1 + 2 == 3 && 4 > 3 || 0") == 1);
  CHECK(eval("!0 && !(2 < 1)") == 1);
  CHECK(eval("min(3, 7) + max(3, 7)") == 10);
  CHECK(eval("true + true") == 2);
}

TEST_CASE("division and modulo round toward minus infinity, as in Halide") {
  CHECK(eval("7 / 2") == 3);
  CHECK(eval("-7 / 2") == -4);
  CHECK(eval("7 / -2") == -4);
  CHECK(eval("-7 % 2") == 1);
  CHECK(eval("7 % -2") == -1);
  // The conv output rule at its edges: 1 output for a kernel exactly the padded size, 0 for
  // one larger (a call the runtime rejects by its check, not by a crash).
  const std::string oh = "(H + 2*pad - dil*(K - 1) - 1) / stride + 1";
  CHECK(eval(oh, {{"H", 5}, {"pad", 1}, {"dil", 1}, {"K", 7}, {"stride", 2}}) == 1);
  CHECK(eval(oh, {{"H", 6}, {"pad", 0}, {"dil", 1}, {"K", 7}, {"stride", 1}}) == 0);
  CHECK(eval(oh, {{"H", 5}, {"pad", 0}, {"dil", 1}, {"K", 7}, {"stride", 1}}) == -1);
  CHECK(eval(oh, {{"H", 64}, {"pad", 1}, {"dil", 1}, {"K", 3}, {"stride", 1}}) == 64);
  CHECK(eval(oh, {{"H", 65}, {"pad", 1}, {"dil", 2}, {"K", 3}, {"stride", 2}}) == 32);
}

TEST_CASE("names bind from the environment; unbound ones make the value unknown") {
  const ShapeExpr e = ShapeExpr::parse("KH == 3 && stride_h == 1");
  CHECK(e.names() == std::set<std::string>{"KH", "stride_h"});
  CHECK(e.evaluate({{"KH", 3}, {"stride_h", 1}}) == 1);
  CHECK(e.evaluate({{"KH", 3}, {"stride_h", 2}}) == 0);
  CHECK_FALSE(e.evaluate({{"KH", 3}}).has_value());
  // false && unknown is false; true || unknown is true.
  CHECK(e.evaluate({{"KH", 5}}) == 0);
  CHECK(ShapeExpr::parse("a || b").evaluate({{"b", 1}}) == 1);
  CHECK_FALSE(ShapeExpr::parse("a + 1").evaluate({}).has_value());
}

TEST_CASE("malformed text is rejected with the column") {
  for (const char* bad : {"", "1 +", "(1", "1 = 2", "a & b", "min(1)", "max 1, 2", "3 $ 4", "1 2",
                          "99999999999999999999", "!= 1"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(ShapeExpr::parse(bad), ShapeExprError);
  }
  try {
    ShapeExpr::parse("KH == 3 && ) ");
    FAIL("no throw");
  } catch (const ShapeExprError& e) {
    CHECK(std::string(e.what()).find("col 12") != std::string::npos);
  }
}

TEST_CASE("division by zero and overflow are errors naming the expression") {
  CHECK_THROWS_WITH_AS(ShapeExpr::parse("H / stride").evaluate({{"H", 4}, {"stride", 0}}),
                       doctest::Contains("H / stride"), ShapeExprError);
  CHECK_THROWS_AS(ShapeExpr::parse("x % 0").evaluate({{"x", 4}}), ShapeExprError);
  CHECK_THROWS_AS(ShapeExpr::parse("x * x").evaluate({{"x", int64_t(1) << 40}}), ShapeExprError);
  CHECK_THROWS_AS(ShapeExpr::parse("-x - x").evaluate({{"x", INT64_MAX}}), ShapeExprError);
}

// Found by fuzz_shape_expr: C's INT64_MIN / -1, INT64_MIN % -1 and -INT64_MIN are undefined
// (UBSan), and a % b as a - (a / b) * b overflowed for a near INT64_MIN.
TEST_CASE("arithmetic at the int64 limits: exact values or an overflow error, never UB") {
  const std::map<std::string, int64_t> lo{{"x", INT64_MIN}};
  CHECK(eval("x % -1", lo) == 0);
  CHECK(eval("x % 3", lo) == 1);  // -2^63 = 3 * (-3074457345618258603) + 1
  CHECK(eval("x % -3", lo) == -2);
  CHECK(eval("x / 3", lo) == -3074457345618258603);
  CHECK(eval("x % 2", lo) == 0);
  CHECK(eval("x / -2", lo) == int64_t{1} << 62);
  CHECK(eval("7 / -1") == -7);
  CHECK(eval("-7 % -1") == 0);
  CHECK_THROWS_WITH_AS(ShapeExpr::parse("x / -1").evaluate(lo), doctest::Contains("overflows"),
                       ShapeExprError);
  CHECK_THROWS_WITH_AS(ShapeExpr::parse("-x").evaluate(lo), doctest::Contains("overflows"),
                       ShapeExprError);
  CHECK(eval("-x", {{"x", INT64_MAX}}) == -INT64_MAX);
}

// Found by fuzz_shape_expr: 50000 '(' (or '-', or "1+" repeated) overflowed the stack while
// parsing, evaluating or destroying the tree. At most 100 levels are accepted.
TEST_CASE("nesting deeper than 100 levels is rejected at the level that exceeds it") {
  auto rejected_at = [](const std::string& text) {
    try {
      ShapeExpr::parse(text);
    } catch (const ShapeExprError& e) {
      const std::string what = e.what();
      REQUIRE_MESSAGE(what.find("nested too deeply (more than 100 levels)") != std::string::npos,
                      what);
      const size_t col = what.find(": col ");
      return std::stoi(what.substr(col + 6));
    }
    return 0;
  };
  const auto times = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  CHECK(eval(times("(", 100) + "1" + times(")", 100)) == 1);
  CHECK(rejected_at(times("(", 101) + "1" + times(")", 101)) == 101);
  CHECK(eval(times("-", 100) + "1") == 1);
  CHECK(rejected_at(times("-", 101) + "1") == 101);
  CHECK(eval(times("!", 100) + "0") == 0);
  CHECK(eval(times("1+", 100) + "1") == 101);
  CHECK(rejected_at(times("1+", 101) + "1") == 202);  // the 101st '+'
  CHECK(eval(times("min(1, ", 100) + "2" + times(")", 100)) == 1);
  CHECK(rejected_at(times("max(1, ", 101) + "2" + times(")", 101)) == 701);
  CHECK(rejected_at(times("(", 50000) + "1" + times(")", 50000)) == 101);
  CHECK(rejected_at(times("1+", 50000) + "1") == 202);
}
