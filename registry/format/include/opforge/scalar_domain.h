// The values a run-time scalar argument may take, as a descriptor declares them ("domain" of a
// scalar input) and the runtime checks before a call: "any", "finite", or an interval such as
// "[0, 1)", "[0, inf)" or "[0, inf]" (a bound of inf admits +inf itself only with "]"). NaN is
// never inside an interval.
#pragma once

#include <string>

namespace opforge::registry {

struct ScalarDomain {
  bool any = true;  // no check at all
  double lo = 0, hi = 0;
  bool lo_closed = true, hi_closed = true;

  // Parses the text above; throws std::invalid_argument naming the text.
  static ScalarDomain parse(const std::string& text);
  bool contains(double v) const;
  std::string text() const;  // canonical: "any", "finite" or "[lo, hi)" with %.17g bounds
};

}  // namespace opforge::registry
