#include "registry/cli/tune/tune_plan.h"

namespace opforge::cli {

std::vector<TuneCandidate> param_candidates(const std::string& param,
                                            const std::vector<int64_t>& values,
                                            const std::map<std::string, int64_t>& best,
                                            const std::map<std::string, int64_t>& kept) {
  // A param in force: as searched so far, else as the registered variant has it.
  auto on = [&](const std::string& name) {
    const auto b = best.find(name);
    if (b != best.end()) return b->second != 0;
    const auto k = kept.find(name);
    return k != kept.end() && k->second != 0;
  };
  std::vector<TuneCandidate> out;
  // A slot size changes nothing while double buffering is off (identical kernels); nor a
  // divide threshold with double buffering (ElementwiseSchedule::exact_divides ignores it).
  if (param == "db_grain" && !on("double_buffer")) return out;
  if (param == "divide_below" && on("double_buffer")) return out;
  // divide=1 beat the estimate on the mean over every size; the split may still beat it,
  // keeping the divide where it wins (cache sizes) and the estimate where it loses (DRAM
  // sizes: 1.05-1.12x at 1e7 on an AVX-512 core in some hours).
  const bool against_divide = param == "divide_below" && on("divide");
  const int64_t current = best.at(param);
  for (int64_t value : values) {
    // Without a threshold, divide=0 is the estimate everywhere: what divide=1 replaced.
    if (against_divide ? value == 0 : value == current) continue;
    TuneCandidate c{best, param + "=" + std::to_string(value)};
    c.params[param] = value;
    if (against_divide) {
      c.params["divide"] = 0;
      c.label = "divide=0 " + c.label;
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace opforge::cli
