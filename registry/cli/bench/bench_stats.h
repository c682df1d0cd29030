// Statistics of timed calls that `opforge bench` and `opforge tune` share: medians,
// quartiles, per-pair ratios, and tune's re-measure of a point that alone vetoes a candidate.
// No timing here: pure functions of the samples, unit-tested on their own.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace opforge::cli {

// The upper median of a non-empty sample.
double median(std::vector<double> v);
// The lower quartile, median and upper quartile of a non-empty sample (nearest rank).
struct Quartiles {
  double q1, median, q3;
};
Quartiles quartiles(std::vector<double> v);
// num[i] / den[i] for each pair of calls timed moments apart (the same rep): load that comes
// and goes between pairs cancels out of the ratio.
std::vector<double> paired_ratios(const std::vector<double>& num, const std::vector<double>& den);

// A candidate's veto, re-measured: the points whose paired ratio (candidate / best) reads at
// or above `veto` are timed `rounds` more times (retime(point, round)), and each takes the
// median of its readings, the first included. A point that a neighbour's burst pushed over
// the veto once no longer rejects a candidate that wins everywhere else; one that reads slow
// again keeps its veto. Returns the ratios with the re-measured points replaced.
std::vector<double> recheck_vetoes(std::vector<double> paired, double veto, int rounds,
                                   const std::function<double(size_t, int)>& retime);

}  // namespace opforge::cli
