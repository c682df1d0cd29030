#include "opforge/scalar_domain.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace opforge::registry {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  const size_t b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

double bound(const std::string& text, const std::string& whole) {
  const std::string t = trim(text);
  if (t == "inf" || t == "+inf") return kInf;
  if (t == "-inf") return -kInf;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end || !std::isfinite(v))
    throw std::invalid_argument("scalar domain '" + whole + "': bad bound '" + t + "'");
  return v;
}

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

ScalarDomain ScalarDomain::parse(const std::string& text) {
  const std::string t = trim(text);
  ScalarDomain d;
  if (t == "any") return d;
  d.any = false;
  if (t == "finite") {
    d.lo = -kInf, d.hi = kInf, d.lo_closed = false, d.hi_closed = false;
    return d;
  }
  const size_t comma = t.find(',');
  if (t.size() < 5 || (t.front() != '[' && t.front() != '(') ||
      (t.back() != ']' && t.back() != ')') || comma == std::string::npos) {
    throw std::invalid_argument("scalar domain '" + text +
                                "': expected any, finite or an interval like [0, 1)");
  }
  d.lo_closed = t.front() == '[';
  d.hi_closed = t.back() == ']';
  d.lo = bound(t.substr(1, comma - 1), text);
  d.hi = bound(t.substr(comma + 1, t.size() - comma - 2), text);
  if (!(d.lo <= d.hi)) throw std::invalid_argument("scalar domain '" + text + "': empty");
  return d;
}

bool ScalarDomain::contains(double v) const {
  if (any) return true;
  if (std::isnan(v)) return false;
  const bool above = lo_closed ? v >= lo : v > lo;
  const bool below = hi_closed ? v <= hi : v < hi;
  return above && below;
}

std::string ScalarDomain::text() const {
  if (any) return "any";
  if (lo == -kInf && hi == kInf && !lo_closed && !hi_closed) return "finite";
  return std::string(lo_closed ? "[" : "(") + number(lo) + ", " + number(hi) +
         (hi_closed ? "]" : ")");
}

}  // namespace opforge::registry
