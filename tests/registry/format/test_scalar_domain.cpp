// ScalarDomain: the texts a descriptor's scalar "domain" takes, membership at the bounds, NaN
// and infinities, canonical text, and the texts refused.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "opforge/scalar_domain.h"

namespace opforge::registry {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::nan("");

TEST_CASE("scalar domain: half-open unit interval, as Adam's betas") {
  const ScalarDomain d = ScalarDomain::parse("[0, 1)");
  CHECK(d.contains(0.0));
  CHECK(d.contains(0.999));
  CHECK_FALSE(d.contains(1.0));
  CHECK_FALSE(d.contains(-1e-300));
  CHECK_FALSE(d.contains(1.5));
  CHECK_FALSE(d.contains(kNaN));
  CHECK(d.text() == "[0, 1)");
}

TEST_CASE("scalar domain: finite, any, and bounds at infinity") {
  const ScalarDomain finite = ScalarDomain::parse("finite");
  CHECK(finite.contains(-1e308));
  CHECK_FALSE(finite.contains(kInf));
  CHECK_FALSE(finite.contains(-kInf));
  CHECK_FALSE(finite.contains(kNaN));
  CHECK(finite.text() == "finite");
  const ScalarDomain any = ScalarDomain::parse(" any ");
  CHECK(any.contains(kNaN));
  CHECK(any.text() == "any");
  const ScalarDomain up_to_inf = ScalarDomain::parse("[0, inf]");  // clip_norm: inf = no clip
  CHECK(up_to_inf.contains(kInf));
  CHECK_FALSE(up_to_inf.contains(-1.0));
  const ScalarDomain below_inf = ScalarDomain::parse("[0,inf)");
  CHECK_FALSE(below_inf.contains(kInf));
  CHECK(below_inf.text() == "[0, inf)");
  CHECK(ScalarDomain::parse("(-inf, inf)").text() == "finite");
  CHECK(ScalarDomain::parse("(0.5, 2.5]").contains(2.5));
  CHECK_FALSE(ScalarDomain::parse("(0.5, 2.5]").contains(0.5));
}

TEST_CASE("scalar domain: malformed texts are refused, naming the text") {
  for (const char* bad : {"", "0, 1", "[0 1)", "[a, 1)", "[1, 0)", "[0, nan)", "{0, 1}", "fin"}) {
    CAPTURE(bad);
    const std::string named = "scalar domain '" + std::string(bad) + "'";
    CHECK_THROWS_WITH_AS(ScalarDomain::parse(bad), doctest::Contains(named.c_str()),
                         std::invalid_argument);
  }
}

}  // namespace
}  // namespace opforge::registry
