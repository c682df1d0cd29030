#include "dsl/schedule_params.h"

#include <stdexcept>

namespace opforge::dsl {

int64_t checked_param(const ScheduleParamDecl& d, const std::string& key, int64_t value) {
  if (value < d.min || value > d.max) {
    throw std::invalid_argument("schedule param '" + key + "' = " + std::to_string(value) +
                                " is outside [" + std::to_string(d.min) + ", " +
                                std::to_string(d.max) + "]");
  }
  return value;
}

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
    out[d.name] = checked_param(d, d.name,
                                g != given.end()      ? g->second
                                : f != defaults.end() ? f->second
                                                      : d.default_value);
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
