#include "registry/builder/schedule_description.h"

#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace opforge::builder {

namespace {

using nlohmann::json;
namespace I = Halide::Internal;

std::string text_of(const Halide::Expr& e) {
  std::ostringstream s;
  s << e;
  return s.str();
}

std::string tail_name(Halide::TailStrategy t) {
  switch (t) {
    case Halide::TailStrategy::RoundUp:
      return "RoundUp";
    case Halide::TailStrategy::GuardWithIf:
      return "GuardWithIf";
    case Halide::TailStrategy::Predicate:
      return "Predicate";
    case Halide::TailStrategy::PredicateLoads:
      return "PredicateLoads";
    case Halide::TailStrategy::PredicateStores:
      return "PredicateStores";
    case Halide::TailStrategy::ShiftInwards:
      return "ShiftInwards";
    case Halide::TailStrategy::Auto:
      return "Auto";
  }
  return "unknown";
}

std::string loop_kind(I::ForType t) {
  switch (t) {
    case I::ForType::Serial:
      return "serial";
    case I::ForType::Parallel:
      return "parallel";
    case I::ForType::Vectorized:
      return "vectorized";
    case I::ForType::Unrolled:
      return "unrolled";
    case I::ForType::Extern:
      return "extern";
    case I::ForType::GPUBlock:
      return "gpu_block";
    case I::ForType::GPUThread:
      return "gpu_thread";
    case I::ForType::GPULane:
      return "gpu_lane";
  }
  return "unknown";
}

std::string split_kind(const I::Split& s) {
  if (s.is_rename()) return "rename";
  if (s.is_fuse()) return "fuse";
  if (s.is_purify()) return "purify";
  return "split";
}

// Halide names the vector/unroll splits it makes with process-wide counters (x.v84) and
// uniquifies Func names with $N: both are renamed canonically, by order of appearance.
class Canonical {
 public:
  std::string var(const std::string& name) {
    static const std::regex counter("^v[0-9]+$");
    std::string out, part;
    std::istringstream in(name);
    while (std::getline(in, part, '.')) {
      if (std::regex_match(part, counter)) {
        auto [it, fresh] = counters_.emplace(part, counters_.size());
        part = "v" + std::to_string(it->second);
      }
      out += (out.empty() ? "" : ".") + part;
    }
    return out;
  }
  static std::string func(const std::string& name) {
    return std::regex_replace(name, std::regex("\\$[0-9]+"), "");
  }

 private:
  std::map<std::string, size_t> counters_;
};

// Constant extents of loop variables that no split sizes: a pure var made from an rvar by
// rfactor (`lane`) has that rvar's extent, in every stage of its Func.
using VarWidths = std::map<std::string, int64_t>;

json describe_case(const I::Definition& def, const json& condition, const std::string& cond_text,
                   const VarWidths& var_widths, Canonical& canon) {
  const I::StageSchedule& s = def.schedule();
  json splits = json::array();
  std::map<std::string, const I::Split*> made_by;  // inner var -> the split that made it
  for (const auto& sp : s.splits()) {
    json j = {
        {"kind", split_kind(sp)}, {"old", canon.var(sp.old_var)}, {"outer", canon.var(sp.outer)}};
    if (sp.is_split()) {
      j["inner"] = canon.var(sp.inner);
      j["factor"] = expr_to_json(sp.factor);
      j["factor_text"] = text_of(sp.factor);
      j["tail"] = tail_name(sp.tail);
      made_by[sp.inner] = &sp;
    } else if (sp.is_fuse()) {
      j["inner"] = canon.var(sp.inner);
    }
    splits.push_back(j);
  }
  // dims() lists loops innermost first; describe them outermost first.
  json loops = json::array();
  const auto& dims = s.dims();
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    if (it->var == Halide::Var::outermost().name()) continue;
    json l = {{"var", canon.var(it->var)}, {"kind", loop_kind(it->for_type)}};
    if (it->dim_type == I::DimType::PureRVar || it->dim_type == I::DimType::ImpureRVar) {
      l["rvar"] = true;
    }
    auto m = made_by.find(it->var);
    if (m != made_by.end()) {
      if (const int64_t* w = Halide::Internal::as_const_int(m->second->factor)) l["width"] = *w;
    } else if (var_widths.count(it->var)) {
      l["width"] = var_widths.at(it->var);
    }
    loops.push_back(l);
  }
  json prefetches = json::array();
  for (const auto& p : s.prefetches()) {
    prefetches.push_back({{"name", Canonical::func(p.name)},
                          {"at", canon.var(p.at)},
                          {"from", canon.var(p.from)},
                          {"offset", text_of(p.offset)}});
  }
  json c = {{"splits", splits}, {"loops", loops}};
  if (!prefetches.empty()) c["prefetches"] = prefetches;
  if (!condition.is_null()) {
    c["condition"] = condition;
    c["condition_text"] = cond_text;
  }
  return c;
}

// Cases in the order Halide tests them: each specialization, then the default.
json describe_stage(const I::Definition& def, const VarWidths& var_widths, Canonical& canon) {
  json cases = json::array();
  for (const auto& sp : def.specializations()) {
    std::string cond = text_of(sp.condition);
    cases.push_back(describe_case(sp.definition, expr_to_json(sp.condition), Canonical::func(cond),
                                  var_widths, canon));
  }
  cases.push_back(describe_case(def, nullptr, "", var_widths, canon));
  json st = {{"cases", cases}};
  json rvars = json::array();
  for (const auto& rv : def.schedule().rvars()) {
    rvars.push_back({{"var", rv.var},
                     {"min", text_of(rv.min)},
                     {"extent", Canonical::func(text_of(rv.extent))}});
  }
  if (!rvars.empty()) st["rvars"] = rvars;
  return st;
}

// LoopLevels are readable once locked; lowering locks them all, as this does for a
// pipeline described before it is compiled.
std::string level_text(Halide::LoopLevel l, bool output) {
  if (output) return "root";
  l.lock();
  if (l.is_root()) return "root";
  if (l.is_inlined()) return "inline";
  return Canonical::func(l.to_string());
}

std::string type_text(const Halide::Type& t) {
  std::ostringstream s;
  s << t;
  return s.str();
}

}  // namespace

json expr_to_json(const Halide::Expr& e) {
  if (!e.defined()) return nullptr;
  if (const auto* v = e.as<I::IntImm>()) return v->value;
  if (const auto* v = e.as<I::UIntImm>()) return v->value;
  if (const auto* v = e.as<I::FloatImm>()) return v->value;
  if (const auto* v = e.as<I::Variable>()) return {{"var", Canonical::func(v->name)}};
  auto bin = [](const char* op, const Halide::Expr& a, const Halide::Expr& b) {
    return json::array({op, expr_to_json(a), expr_to_json(b)});
  };
#define OPFORGE_BINARY(Node, op) \
  if (const auto* n = e.as<I::Node>()) return bin(op, n->a, n->b);
  OPFORGE_BINARY(Add, "+")
  OPFORGE_BINARY(Sub, "-")
  OPFORGE_BINARY(Mul, "*")
  OPFORGE_BINARY(Div, "/")
  OPFORGE_BINARY(Mod, "%")
  OPFORGE_BINARY(Min, "min")
  OPFORGE_BINARY(Max, "max")
  OPFORGE_BINARY(EQ, "==")
  OPFORGE_BINARY(NE, "!=")
  OPFORGE_BINARY(LT, "<")
  OPFORGE_BINARY(LE, "<=")
  OPFORGE_BINARY(GT, ">")
  OPFORGE_BINARY(GE, ">=")
  OPFORGE_BINARY(And, "&&")
  OPFORGE_BINARY(Or, "||")
#undef OPFORGE_BINARY
  if (const auto* n = e.as<I::Not>()) return json::array({"!", expr_to_json(n->a)});
  if (const auto* n = e.as<I::Select>()) {
    return json::array({"select", expr_to_json(n->condition), expr_to_json(n->true_value),
                        expr_to_json(n->false_value)});
  }
  if (const auto* n = e.as<I::Cast>()) {
    // Integer casts truncate; float casts keep the value (the evaluator works in doubles).
    return json::array({n->type.is_float() ? "float" : "int", expr_to_json(n->value)});
  }
  if (const auto* n = e.as<I::Call>()) {
    if (n->is_intrinsic(I::Call::likely) || n->is_intrinsic(I::Call::likely_if_innermost)) {
      return expr_to_json(n->args[0]);
    }
  }
  return json::array({"?", Canonical::func(text_of(e))});
}

json describe_schedule(const Halide::Pipeline& pipeline) {
  // Producers before consumers (depth-first over calls), outputs last.
  std::vector<I::Function> order;
  std::set<std::string> seen, outputs;
  std::function<void(const I::Function&)> visit = [&](const I::Function& f) {
    if (!seen.insert(f.name()).second) return;
    for (const auto& [name, callee] : I::find_direct_calls(f)) visit(callee);
    order.push_back(f);
    // Func::in() wrappers replace calls to f when the pipeline lowers: not in the call graph
    // yet, they are f's consumers (a double buffer's staged input, say).
    for (const auto& [consumer, wrapper] : f.schedule().wrappers()) visit(I::Function(wrapper));
  };
  for (const Halide::Func& f : pipeline.outputs()) outputs.insert(f.name());
  for (const Halide::Func& f : pipeline.outputs()) visit(f.function());

  std::map<std::string, int64_t> rvar_extents;
  for (const I::Function& f : order) {
    for (const auto& u : f.updates()) {
      for (const auto& rv : u.schedule().rvars()) {
        if (const int64_t* e = I::as_const_int(I::simplify(rv.extent))) {
          rvar_extents[rv.var] = *e;
        }
      }
    }
  }
  auto widths_of = [&](const I::Function& f) {
    VarWidths w;
    auto scan = [&](const I::Definition& d) {
      for (const auto& sp : d.schedule().splits()) {
        auto r = rvar_extents.find(sp.old_var);
        if (sp.is_purify() && r != rvar_extents.end()) w[sp.outer] = r->second;
      }
    };
    scan(f.definition());
    for (const auto& u : f.updates()) scan(u);
    return w;
  };
  json funcs = json::array();
  for (const I::Function& f : order) {
    Canonical canon;
    const VarWidths var_widths = widths_of(f);
    const bool is_output = outputs.count(f.name()) > 0;
    const I::FuncSchedule& fs = f.schedule();
    json types = json::array();
    for (const auto& t : f.output_types()) types.push_back(type_text(t));
    json storage = json::array();
    for (const auto& sd : fs.storage_dims()) {
      if (!sd.fold_factor.defined()) continue;
      storage.push_back({{"var", sd.var},
                         {"fold_factor", expr_to_json(sd.fold_factor)},
                         {"fold_factor_text", text_of(sd.fold_factor)},
                         {"fold_forward", sd.fold_forward}});
    }
    json stages = json::array();
    json pure = describe_stage(f.definition(), var_widths, canon);
    pure["name"] = Canonical::func(f.name());
    stages.push_back(pure);
    for (size_t u = 0; u < f.updates().size(); ++u) {
      json st = describe_stage(f.updates()[u], var_widths, canon);
      st["name"] = Canonical::func(f.name()) + ".update(" + std::to_string(u) + ")";
      stages.push_back(st);
    }
    funcs.push_back({{"name", Canonical::func(f.name())},
                     {"output", is_output},
                     {"args", f.args()},
                     {"types", types},
                     {"compute_at", level_text(fs.compute_level(), is_output)},
                     {"store_at", level_text(fs.store_level(), is_output) == "inline"
                                      ? level_text(fs.compute_level(), is_output)
                                      : level_text(fs.store_level(), is_output)},
                     {"async", fs.async()},
                     {"memoized", fs.memoized()},
                     {"folds", storage},
                     {"stages", stages}});
  }
  return {{"format", "opforge.schedule/1"}, {"funcs", funcs}};
}

}  // namespace opforge::builder
