// Whether `opforge tune` keeps a candidate: the rounds of paired ratios (candidate / best so
// far, one per point) it times, in order, and what each must pass. Pure: the timing comes in
// through callbacks, so the rule is unit-tested on made-up ratios.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

namespace opforge::cli {

// The host is shared, and one round's noise (5-10% at small sizes) must not pick a param: a
// candidate must gain 3% in geometric mean with no point 10% worse, then agree on swapped
// buffers. A point that alone vetoes is re-measured first: on a contended host a single point
// read 1.107x for fp32 Adam's divide=1 on AVX-512 (0.953x over 15 points).
struct KeepRule {
  double keep_below = 0.97;
  double confirm_below = 0.99;
  double worst_point = 1.10;
  int veto_rechecks = 2;
};

// Geometric mean and largest of ratios.
struct Score {
  double mean = 1, worst = 1;
};
Score score(const std::vector<double>& paired);

struct Verdict {
  bool keep = false;
  Score screen;                  // the first subject alone
  std::optional<Score> first;    // every subject (when there are several and the screen passed)
  std::optional<Score> confirm;  // every subject on swapped buffers (when the first passed)
  int rechecked = 0;             // re-measures of vetoing points
  int member_rounds = 0;         // rounds timed, one subject's points each
};

// round(subject, swap): subject `subject`'s paired ratios at each of the candidate's points
// (swap: each kernel on the other's buffers); retime(subject, point, swap): that point once more.
// Subject 0 is the family member furthest from its bandwidth kernel, on which the search is
// made: it screens the candidate alone (most lose: a whole library's tune keeps a few percent),
// then every subject must pass the first round's gate together, then the confirm on swapped
// buffers. A loser costs one subject's round instead of all of theirs.
Verdict judge_candidate(size_t subjects, const KeepRule& rule,
                        const std::function<std::vector<double>(size_t, bool)>& round,
                        const std::function<double(size_t, size_t, bool)>& retime);

}  // namespace opforge::cli
