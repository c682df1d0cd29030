// opforge diff A [B] [--set NAME=VALUE]: what differs between two kernels' schedules — the
// schedule params, the target, and the loop nests (every func, stage and specialization, from
// the cache entries' schedule.json, names canonical so only real changes show) as a unified
// diff. With --set, B is a preview of B (or of A when B is omitted): cache only.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "registry/cli/commands.h"
#include "registry/cli/inspected_kernel.h"
#include "registry/format/schedule_view.h"

namespace opforge::cli {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Unified diff of two short texts (loop nests are tens of lines: an O(n*m) LCS is plenty).
std::string unified_diff(const std::vector<std::string>& a, const std::vector<std::string>& b,
                         size_t context) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  struct Line {
    char tag;
    std::string text;
    size_t ai, bi;  // 1-based line numbers in a and b before this line
  };
  std::vector<Line> script;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      script.push_back({' ', a[i], i, j}), ++i, ++j;
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      script.push_back({'-', a[i], i, j}), ++i;  // deletions first, as diff -u prints them
    } else {
      script.push_back({'+', b[j], i, j}), ++j;
    }
  }
  std::string out;
  for (size_t k = 0; k < script.size();) {
    if (script[k].tag == ' ') {
      ++k;
      continue;
    }
    // A hunk: from `context` lines before this change to `context` after the last change
    // that is at most 2*context unchanged lines from the previous one.
    size_t start = k >= context ? k - context : 0, last = k;
    for (size_t e = k + 1; e < script.size(); ++e) {
      if (script[e].tag == ' ') continue;
      if (e - last - 1 > 2 * context) break;
      last = e;
    }
    const size_t end = std::min(script.size(), last + context + 1);
    size_t na = 0, nb = 0;
    for (size_t e = start; e < end; ++e) {
      na += script[e].tag != '+';
      nb += script[e].tag != '-';
    }
    out += "@@ -" + std::to_string(script[start].ai + 1) + "," + std::to_string(na) + " +" +
           std::to_string(script[start].bi + 1) + "," + std::to_string(nb) + " @@\n";
    for (size_t e = start; e < end; ++e) out += script[e].tag + script[e].text + "\n";
    k = end;
  }
  return out;
}

std::string label(const InspectedKernel& k) {
  std::string s = k.descriptor.variant;
  if (!k.changed.empty()) {
    s += " with";
    for (const auto& [name, v] : k.changed) s += " " + name + "=" + std::to_string(v);
  }
  return s + " (" + (k.changed.empty() ? "registry" : "preview") + ")";
}

}  // namespace

int cmd_diff(const Args& a) {
  const std::map<std::string, int64_t> set = set_options(a);
  const std::string first = a.positional.at(0);
  const std::string second = a.positional.size() > 1 ? a.positional[1] : first;
  if (a.positional.size() == 1 && set.empty()) {
    throw UsageError("diff needs two variants, or one and --set NAME=VALUE to preview");
  }
  const int64_t context = a.get_int("context", 3, 0, 1000000);
  if (context < 0) throw UsageError("--context must be >= 0");
  const InspectedKernel ka = inspect_kernel(a, first, {});
  const InspectedKernel kb = inspect_kernel(a, second, set);

  std::cout << "--- " << label(ka) << "\n+++ " << label(kb) << "\n";
  const auto& da = ka.descriptor;
  const auto& db = kb.descriptor;
  bool same = true;
  auto field = [&](const std::string& name, const std::string& x, const std::string& y) {
    if (x == y) return;
    same = false;
    std::cout << name << ": " << x << " -> " << y << "\n";
  };
  field("recipe", da.schedule.recipe, db.schedule.recipe);
  std::map<std::string, std::string> keys;
  for (const auto& [k, v] : da.schedule.params) keys[k];
  for (const auto& [k, v] : db.schedule.params) keys[k];
  for (const auto& [k, unused] : keys) {
    auto x = da.schedule.params.count(k) ? da.schedule.params.at(k) : "(none)";
    auto y = db.schedule.params.count(k) ? db.schedule.params.at(k) : "(none)";
    field("param " + k, x, y);
  }
  field("tuning", tuning_text(da), tuning_text(db));
  field("isa", da.target.isa, db.target.isa);
  field("target", da.target.halide_target, db.target.halide_target);
  field("cache key", da.cache_key.substr(0, 16), db.cache_key.substr(0, 16));
  const std::string nests = unified_diff(lines_of(registry::render_loop_nests(ka.schedule)),
                                         lines_of(registry::render_loop_nests(kb.schedule)),
                                         static_cast<size_t>(context));
  if (!nests.empty()) {
    same = false;
    std::cout << "loop nests:\n" << nests;
  } else {
    std::cout << "loop nests: identical\n";
  }
  if (same) std::cout << "(no difference)\n";
  return 0;
}

Command diff_command() {
  return {{"diff",
           "A [B]",
           "Compare two variants' schedules (params, target, loop nests); with --set, B is a "
           "preview of A (or of B) under those schedule params",
           {registry_option(),
            cache_option(),
            attr_option(),
            isa_option(),
            {"set", "NAME=VALUE", "preview B with this schedule param changed (cache only)", true},
            {"rules", "PATH", "rule files a previewed op comes from", true},
            {"context", "N", "unchanged lines shown around each change (default 3)"}}},
          cmd_diff};
}

}  // namespace opforge::cli
