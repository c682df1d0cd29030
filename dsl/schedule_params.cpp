#include "dsl/schedule_params.h"

#include <stdexcept>

namespace opforge::dsl {

std::map<std::string, int64_t> resolve_params(const std::vector<ScheduleParamDecl>& decls,
                                              const std::map<std::string, int64_t>& given,
                                              const std::string& recipe,
                                              const std::map<std::string, int64_t>& defaults) {
  std::string names;
  for (const auto& d : decls) names += (names.empty() ? "" : ", ") + d.name;
  for (const auto& [k, v] : given) {
    bool known = false;
    for (const auto& d : decls) known = known || d.name == k;
    if (!known) {
      throw std::invalid_argument("unknown schedule param '" + k + "' for " + recipe +
                                  " (its params: " + names + ")");
    }
  }
  std::map<std::string, int64_t> out;
  for (const auto& d : decls) {
    auto g = given.find(d.name);
    auto f = defaults.find(d.name);
    const int64_t v = g != given.end()      ? g->second
                      : f != defaults.end() ? f->second
                                            : d.default_value;
    if (v < d.min || v > d.max) {
      throw std::invalid_argument("schedule param '" + d.name + "' = " + std::to_string(v) +
                                  " is outside [" + std::to_string(d.min) + ", " +
                                  std::to_string(d.max) + "] (" + recipe + ")");
    }
    out[d.name] = v;
  }
  return out;
}

std::map<std::string, int64_t> resolve_declared(const std::vector<ScheduleParamDecl>& decls,
                                                const std::map<std::string, int64_t>& given,
                                                const std::string& recipe) {
  std::map<std::string, int64_t> mine;
  for (const auto& d : decls) {
    auto it = given.find(d.name);
    if (it != given.end()) mine.insert(*it);
  }
  return resolve_params(decls, mine, recipe);
}

}  // namespace opforge::dsl
