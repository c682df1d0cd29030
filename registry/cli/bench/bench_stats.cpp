#include "registry/cli/bench/bench_stats.h"

#include <algorithm>

namespace opforge::cli {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Quartiles quartiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return {v[n / 4], v[n / 2], v[std::min(n - 1, (3 * n) / 4)]};
}

std::vector<double> paired_ratios(const std::vector<double>& num, const std::vector<double>& den) {
  std::vector<double> r;
  for (size_t i = 0; i < num.size() && i < den.size(); ++i) r.push_back(num[i] / den[i]);
  return r;
}

std::vector<double> recheck_vetoes(std::vector<double> paired, double veto, int rounds,
                                   const std::function<double(size_t, int)>& retime) {
  for (size_t i = 0; i < paired.size(); ++i) {
    if (paired[i] < veto) continue;
    std::vector<double> readings = {paired[i]};
    for (int k = 0; k < rounds; ++k) readings.push_back(retime(i, k));
    paired[i] = median(readings);
  }
  return paired;
}

}  // namespace opforge::cli
