// Small text helpers shared by the CLI's listing commands.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace opforge::cli {

inline std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// "name=value,..." of an attr map, or "-" when empty.
inline std::string attrs_text(const std::map<std::string, std::string>& m) {
  std::vector<std::string> v;
  for (const auto& [k, x] : m) v.push_back(k + "=" + x);
  return v.empty() ? "-" : join(v, ",");
}

}  // namespace opforge::cli
