// A schedule recipe's tunables, declared once with default, range and description (like
// Halide GeneratorParams): the descriptor's schedule params, `--set` previews and tuning
// files all go through the declaration.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace opforge::dsl {

struct ScheduleParamDecl {
  std::string name;
  int64_t default_value;  // where it depends on the target, the recipe fills it (see resolve)
  int64_t min, max;
  std::string description;
};

// `value` of `d` given as `key` (its name, or a size-bucket key name@N), range-checked: throws
// std::invalid_argument "schedule param 'key' = value is outside [min, max]".
int64_t checked_param(const ScheduleParamDecl& d, const std::string& key, int64_t value);

// `given` (possibly partial) over `decls`: every declared param, given or default (`defaults`
// first replaces declared defaults, e.g. by the target's vector width), range-checked.
// Throws std::invalid_argument naming `recipe` and the param for an unknown name or a value
// out of range.
std::map<std::string, int64_t> resolve_params(const std::vector<ScheduleParamDecl>& decls,
                                              const std::map<std::string, int64_t>& given,
                                              const std::string& recipe,
                                              const std::map<std::string, int64_t>& defaults = {});

// resolve_params over the names of `given` that `decls` declare, the others left to the
// caller: an NN algorithm whose other params are fixed per target resolves its settable ones
// (build_nn_pipeline rejects a given value it does not apply).
std::map<std::string, int64_t> resolve_declared(const std::vector<ScheduleParamDecl>& decls,
                                                const std::map<std::string, int64_t>& given,
                                                const std::string& recipe);

}  // namespace opforge::dsl
