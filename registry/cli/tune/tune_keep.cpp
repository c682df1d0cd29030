#include "registry/cli/tune/tune_keep.h"

#include <algorithm>
#include <cmath>

#include "registry/cli/bench/bench_stats.h"

namespace opforge::cli {

Score score(const std::vector<double>& paired) {
  double log_sum = 0, worst = 0;
  for (double r : paired) {
    log_sum += std::log(r);
    worst = std::max(worst, r);
  }
  return {std::exp(log_sum / static_cast<double>(paired.size())), worst};
}

namespace {

bool passes(const Score& s, double below, const KeepRule& rule) {
  return s.mean < below && s.worst < rule.worst_point;
}

}  // namespace

Verdict judge_candidate(size_t subjects, const KeepRule& rule,
                        const std::function<std::vector<double>(size_t, bool)>& round,
                        const std::function<double(size_t, size_t, bool)>& retime) {
  Verdict v;
  // The score over every subject's ratios; when the mean is under `below`, a point that alone
  // vetoes is timed again (on the other buffers first) and reads the median of its readings.
  auto vetted = [&](std::vector<std::vector<double>>& per_subject, bool swap, double below) {
    auto all = [&] {
      std::vector<double> out;
      for (const auto& s : per_subject) out.insert(out.end(), s.begin(), s.end());
      return score(out);
    };
    if (all().mean >= below) return all();
    for (size_t s = 0; s < per_subject.size(); ++s) {
      per_subject[s] = recheck_vetoes(per_subject[s], rule.worst_point, rule.veto_rechecks,
                                      [&](size_t point, int k) {
                                        ++v.rechecked;
                                        return retime(s, point, swap != (k % 2 == 0));
                                      });
    }
    return all();
  };

  std::vector<std::vector<double>> first = {round(0, false)};
  v.member_rounds = 1;
  v.screen = vetted(first, false, rule.keep_below);
  if (!passes(v.screen, rule.keep_below, rule)) return v;
  if (subjects > 1) {
    for (size_t s = 1; s < subjects; ++s) first.push_back(round(s, false));
    v.member_rounds += static_cast<int>(subjects - 1);
    v.first = vetted(first, false, rule.keep_below);
    if (!passes(*v.first, rule.keep_below, rule)) return v;
  }
  std::vector<std::vector<double>> confirm;
  for (size_t s = 0; s < subjects; ++s) confirm.push_back(round(s, true));
  v.member_rounds += static_cast<int>(subjects);
  v.confirm = vetted(confirm, true, rule.confirm_below);
  v.keep = passes(*v.confirm, rule.confirm_below, rule);
  return v;
}

}  // namespace opforge::cli
