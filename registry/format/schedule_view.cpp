#include "registry/format/schedule_view.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <stdexcept>

namespace opforge::registry {

namespace {

using nlohmann::json;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::optional<double> lookup(const std::string& name, const ScheduleEnv& env) {
  auto it = env.values.find(name);
  if (it != env.values.end()) return it->second;
  if (env.n && ends_with(name, ".extent.0")) return static_cast<double>(*env.n);
  if (env.n && ends_with(name, ".min.0")) return 0.0;
  return std::nullopt;
}

// Variables of `expr` the env cannot bind.
void unknown_vars(const json& expr, const ScheduleEnv& env, std::set<std::string>& out) {
  if (expr.is_object() && expr.contains("var")) {
    const std::string name = expr["var"].get<std::string>();
    if (!lookup(name, env)) out.insert(name);
  } else if (expr.is_array() && !expr.empty()) {
    if (expr[0] == "?") {
      out.insert(expr.size() > 1 ? expr[1].get<std::string>() : "?");
      return;
    }
    for (size_t k = 1; k < expr.size(); ++k) unknown_vars(expr[k], env, out);
  }
}

std::string format_number(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e18) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
}

std::string indent(int depth) {
  return std::string(2 * depth, ' ');
}

std::string loop_line(const json& l) {
  std::string kind = l.value("kind", "?");
  std::string s = kind;
  s.resize(std::max<size_t>(s.size(), 11), ' ');
  s += l.value("var", "?");
  if (l.contains("width")) {
    const int64_t w = l["width"].get<int64_t>();
    if (kind == "vectorized") s += "  (" + std::to_string(w) + " lanes)";
    if (kind == "unrolled") s += "  (x" + std::to_string(w) + ")";
  }
  if (l.value("rvar", false)) s += "  [reduction]";
  return s;
}

void render_case(std::ostringstream& o, const json& c, const ScheduleEnv* env, int depth) {
  for (const auto& sp : c.value("splits", json::array())) {
    const std::string kind = sp.value("kind", "split");
    o << indent(depth);
    if (kind == "split") {
      o << "split " << sp.value("old", "?") << " -> " << sp.value("outer", "?") << " x "
        << sp.value("inner", "?") << " by " << sp.value("factor_text", "?");
      if (env && sp.contains("factor") && !sp["factor"].is_number()) {
        if (auto v = evaluate(sp["factor"], *env)) o << " (= " << format_number(*v) << ")";
      }
      o << ", tail " << sp.value("tail", "?") << "\n";
    } else if (kind == "fuse") {
      o << "fuse " << sp.value("inner", "?") << ", " << sp.value("outer", "?") << " -> "
        << sp.value("old", "?") << "\n";
    } else {
      o << kind << " " << sp.value("old", "?") << " -> " << sp.value("outer", "?") << "\n";
    }
  }
  int d = depth;
  for (const auto& l : c.value("loops", json::array())) o << indent(d++) << loop_line(l) << "\n";
  for (const auto& p : c.value("prefetches", json::array())) {
    o << indent(depth) << "prefetch " << p.value("name", "?") << " at " << p.value("at", "?")
      << " offset " << p.value("offset", "?") << "\n";
  }
}

std::string func_header(const json& f) {
  std::string s = "func " + f.value("name", "?") + "(";
  const json args = f.value("args", json::array());
  for (size_t k = 0; k < args.size(); ++k) s += (k ? ", " : "") + args[k].get<std::string>();
  s += ")";
  const json types = f.value("types", json::array());
  if (types.size() == 1) {
    s += ": " + types[0].get<std::string>();
  } else {
    s += ": Tuple(";
    for (size_t k = 0; k < types.size(); ++k) s += (k ? ", " : "") + types[k].get<std::string>();
    s += ")";
  }
  if (f.value("output", false)) s += ", output";
  const std::string compute = f.value("compute_at", "?"), store = f.value("store_at", "?");
  if (compute == "inline") return s + ", inlined into its consumers";
  s += ", compute " + compute;
  if (store != compute) s += ", store " + store;
  if (f.value("async", false)) s += ", async (producer runs as its own task: double buffering)";
  if (f.value("memoized", false)) s += ", memoized";
  return s;
}

std::string case_title(const json& c, size_t k) {
  return "case " + std::to_string(k + 1) + ": " +
         (c.contains("condition") ? "if " + c.value("condition_text", "?") : "otherwise");
}

}  // namespace

std::optional<double> evaluate(const json& e, const ScheduleEnv& env) {
  if (e.is_number()) return e.get<double>();
  if (e.is_boolean()) return e.get<bool>() ? 1.0 : 0.0;
  if (e.is_object() && e.contains("var")) return lookup(e["var"].get<std::string>(), env);
  if (!e.is_array() || e.empty() || !e[0].is_string()) return std::nullopt;
  const std::string op = e[0].get<std::string>();
  auto arg = [&](size_t k) -> std::optional<double> {
    return k < e.size() ? evaluate(e[k], env) : std::nullopt;
  };
  if (op == "&&" || op == "||") {
    auto a = arg(1), b = arg(2);
    const bool absorbing = op == "||";  // true absorbs ||, false absorbs &&
    if ((a && (*a != 0) == absorbing) || (b && (*b != 0) == absorbing)) return absorbing;
    if (a && b) return !absorbing;
    return std::nullopt;
  }
  if (op == "!") {
    auto a = arg(1);
    return a ? std::optional<double>(*a == 0) : std::nullopt;
  }
  if (op == "float") return arg(1);
  if (op == "int") {
    auto a = arg(1);
    return a ? std::optional<double>(std::trunc(*a)) : std::nullopt;
  }
  if (op == "select") {
    auto c = arg(1);
    if (!c) return std::nullopt;
    return *c != 0 ? arg(2) : arg(3);
  }
  auto a = arg(1), b = arg(2);
  if (!a || !b) return std::nullopt;
  const double x = *a, y = *b;
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  // Halide's integer division and modulo round toward negative infinity; the evaluator
  // only sees integers here when both sides are whole numbers.
  const bool ints = x == std::floor(x) && y == std::floor(y);
  if (op == "/") {
    if (y == 0) return 0.0;  // Halide defines x / 0 == 0
    return ints ? std::floor(x / y) : x / y;
  }
  if (op == "%") {
    if (y == 0) return 0.0;
    return ints ? x - std::floor(x / y) * y : std::fmod(x, y);
  }
  if (op == "min") return std::min(x, y);
  if (op == "max") return std::max(x, y);
  if (op == "==") return x == y;
  if (op == "!=") return x != y;
  if (op == "<") return x < y;
  if (op == "<=") return x <= y;
  if (op == ">") return x > y;
  if (op == ">=") return x >= y;
  return std::nullopt;
}

CaseChoice choose_case(const json& stage, const ScheduleEnv& env) {
  CaseChoice out;
  std::set<std::string> unknown;
  const json cases = stage.value("cases", json::array());
  for (size_t k = 0; k < cases.size(); ++k) {
    if (!cases[k].contains("condition")) {
      if (unknown.empty()) out.index = k;
      break;
    }
    auto v = evaluate(cases[k]["condition"], env);
    if (!v) {
      unknown_vars(cases[k]["condition"], env, unknown);
      continue;
    }
    if (*v != 0 && unknown.empty()) {
      out.index = k;
      break;
    }
  }
  for (const auto& u : unknown) out.depends_on += (out.depends_on.empty() ? "" : ", ") + u;
  return out;
}

void check_schedule(const json& s, const std::string& where) {
  if (!s.is_object() || s.value("format", "") != "opforge.schedule/1" || !s.contains("funcs") ||
      !s["funcs"].is_array()) {
    throw std::runtime_error(where + ": not an opforge.schedule/1 description");
  }
}

std::string render_schedule(const json& schedule, const ScheduleEnv* env) {
  std::ostringstream o;
  for (const auto& f : schedule.value("funcs", json::array())) {
    o << func_header(f) << "\n";
    if (f.value("compute_at", "") == "inline") continue;  // no loops of its own
    for (const auto& fold : f.value("folds", json::array())) {
      o << "  storage folded over " << fold.value("var", "?") << " by "
        << fold.value("fold_factor_text", "?")
        << (fold.value("fold_forward", true) ? "" : " (backward)") << "\n";
    }
    for (const auto& st : f.value("stages", json::array())) {
      const json cases = st.value("cases", json::array());
      o << "  stage " << st.value("name", "?");
      if (cases.size() > 1) {
        o << ": " << cases.size() << " cases (" << cases.size() - 1 << " specialization"
          << (cases.size() > 2 ? "s" : "") << "), tested in order";
      }
      o << "\n";
      for (const auto& rv : st.value("rvars", json::array())) {
        const std::string min = rv.value("min", "?");
        o << "    reduction over " << rv.value("var", "?") << " in ["
          << (min == "0" ? "0, " : min + ", " + min + " + ") << rv.value("extent", "?") << ")\n";
      }
      std::optional<size_t> taken;
      if (env && cases.size() > 1) {
        CaseChoice c = choose_case(st, *env);
        taken = c.index;
        o << "    N = " << (env->n ? std::to_string(*env->n) : std::string("?")) << " takes ";
        if (c.index) {
          o << "case " << *c.index + 1 << "\n";
        } else {
          o << "a case that depends on " << c.depends_on << " (give it with --scalar)\n";
        }
      }
      for (size_t k = 0; k < cases.size(); ++k) {
        o << "    " << case_title(cases[k], k);
        if (taken && *taken == k) o << "   <== taken";
        o << "\n";
        render_case(o, cases[k], env, 3);
      }
    }
  }
  return o.str();
}

std::string render_loop_nests(const json& schedule) {
  std::ostringstream o;
  for (const auto& f : schedule.value("funcs", json::array())) {
    o << func_header(f) << "\n";
    if (f.value("compute_at", "") == "inline") continue;
    for (const auto& fold : f.value("folds", json::array())) {
      o << "  fold " << fold.value("var", "?") << " by " << fold.value("fold_factor_text", "?")
        << "\n";
    }
    for (const auto& st : f.value("stages", json::array())) {
      const json cases = st.value("cases", json::array());
      for (size_t k = 0; k < cases.size(); ++k) {
        o << "  " << st.value("name", "?") << " " << case_title(cases[k], k) << "\n";
        render_case(o, cases[k], nullptr, 2);
      }
    }
  }
  return o.str();
}

}  // namespace opforge::registry
