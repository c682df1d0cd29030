#include "dsl/rules/rule_decl.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "dsl/rules/rule_parser.h"
#include "registry/format/bounded_read.h"

namespace opforge::dsl::rules {

namespace {

using HExpr = Halide::Expr;

struct Builder {
  const UpdateContext& c;
  Halide::Type compute;  // fp32 in kernels, fp64 in the golden: the states' type
  std::map<std::string, HExpr> lets;

  HExpr operator()(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::number:
        return Halide::Internal::make_const(compute, e.number);
      case Expr::Kind::name:
        return name(e);
      case Expr::Kind::unary: {
        HExpr x = (*this)(*e.args[0]);
        return e.unary_op == UnaryOp::neg ? -x : !x;
      }
      case Expr::Kind::binary:
        if (e.args[0]->type == ValueType::choice) return choice_comparison(e);
        return binary(e.binary_op, (*this)(*e.args[0]), (*this)(*e.args[1]));
      case Expr::Kind::text:
        break;  // only inside a choice comparison
      case Expr::Kind::call:
        return call(e);
    }
    throw std::logic_error("rule expression of unknown kind");
  }

  // `mode == "torch"`: a constant of the variant being compiled.
  HExpr choice_comparison(const Expr& e) {
    const Expr& a = *e.args[0];
    const Expr& b = *e.args[1];
    const Expr& attr = a.kind == Expr::Kind::name ? a : b;
    const Expr& text = a.kind == Expr::Kind::text ? a : b;
    const bool equal = c.attr_string(attr.name) == text.name;
    return Halide::Internal::make_bool(e.binary_op == BinaryOp::eq ? equal : !equal);
  }

  HExpr name(const Expr& e) {
    switch (e.name_kind) {
      case NameKind::state:
      case NameKind::input:
      case NameKind::hyper:
        return c[e.name];
      case NameKind::let:
        return lets.at(e.name);
      case NameKind::attr: {
        const std::string& v = c.attr_string(e.name);
        if (v == "true" || v == "false") return Halide::Internal::make_bool(v == "true");
        return Halide::Internal::make_const(compute, c.attr_float(e.name));
      }
    }
    throw std::logic_error("rule name of unknown kind");
  }

  static HExpr binary(BinaryOp op, const HExpr& a, const HExpr& b) {
    switch (op) {
      case BinaryOp::add:
        return a + b;
      case BinaryOp::sub:
        return a - b;
      case BinaryOp::mul:
        return a * b;
      case BinaryOp::div:
        return a / b;
      case BinaryOp::lt:
        return a < b;
      case BinaryOp::le:
        return a <= b;
      case BinaryOp::gt:
        return a > b;
      case BinaryOp::ge:
        return a >= b;
      case BinaryOp::eq:
        return a == b;
      case BinaryOp::ne:
        return a != b;
      case BinaryOp::logical_and:
        return a && b;
      case BinaryOp::logical_or:
        return a || b;
    }
    throw std::logic_error("rule operator of unknown kind");
  }

  HExpr call(const Expr& e) {
    std::vector<HExpr> a;
    for (const auto& arg : e.args) a.push_back((*this)(*arg));
    switch (e.fn) {
      case Builtin::select:
        return dsl::select(a[0], a[1], a[2]);
      case Builtin::min:
        return Halide::min(a[0], a[1]);
      case Builtin::max:
        return Halide::max(a[0], a[1]);
      case Builtin::abs:
        return Halide::abs(a[0]);
      case Builtin::sign:
        return dsl::sign(a[0]);
      case Builtin::sqrt:
        return Halide::sqrt(a[0]);
      case Builtin::rsqrt:
        return 1.0f / Halide::sqrt(a[0]);
      case Builtin::exp:
        return dsl::exp(a[0]);
      case Builtin::log:
        return dsl::log(a[0]);
      case Builtin::pow:
        return dsl::pow(a[0], a[1]);
      case Builtin::clamp:
        return Halide::clamp(a[0], a[1], a[2]);
      case Builtin::norm2:
        return c.norm2(a[0]);
      case Builtin::sum:
        return c.sum(a[0]);
    }
    throw std::logic_error("rule function of unknown kind");
  }
};

// The lets and updates of the canonical text, one clause each: "let g = ...; m = ...".
std::string formula_of(const Rule& rule) {
  std::istringstream lines(canonical_rule_text(rule));
  std::string line, out;
  while (std::getline(lines, line)) {
    bool declaration = false;
    for (const char* prefix : {"optimizer ", "state ", "input ", "hyper ", "attr ", "storage ",
                               "quantizable ", "loss_scaling", "sparse", "autoschedule"}) {
      declaration = declaration || line.rfind(prefix, 0) == 0;
    }
    if (!declaration && !line.empty()) out += (out.empty() ? "" : "; ") + line;
  }
  return out;
}

std::string with_default(const Hyper& h) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", h.default_value);
  return (h.description.empty() ? h.name : h.description) + " (rule default " + buf + ")";
}

}  // namespace

OptimizerDecl to_decl(std::shared_ptr<const Rule> rule, const std::string& origin) {
  OptimizerDecl d(rule->name);
  d.summary("user rule " + rule->name + " (" + origin + ")")
      .reference("rule file " + origin)
      .formula(formula_of(*rule));
  for (const auto& s : rule->states) d.state(s.name, "state, updated in place");
  for (const auto& q : rule->quantizable) d.quantizable(q.state, q.is_signed);
  for (const auto& in : rule->inputs) d.grad(in.name, "input tensor");
  for (const auto& h : rule->hypers) {
    // A hyper's default is the value its author expects: its typical value too.
    d.scalar(h.name, with_default(h), {}, h.default_value);
    if (!h.domain.empty()) d.domain(h.name, h.domain);
    d.typical(h.name, h.default_value);
  }
  for (const auto& a : rule->attrs) {
    const std::string desc = a.description.empty() ? a.name : a.description;
    if (a.kind == Attr::Kind::boolean) {
      d.attr_bool(a.name, a.default_value == "true", desc);
    } else if (a.kind == Attr::Kind::choice) {
      d.attr_string(a.name, a.default_value, a.choices, desc);
    } else {
      d.attr_float(a.name, std::stod(a.default_value), desc);
    }
  }
  d.update([rule](const UpdateContext& c) {
    Builder b{c, c[rule->states.at(0).name].type(), {}};
    for (const auto& l : rule->lets) b.lets[l.name] = b(*l.expr);
    Updates u;
    for (const auto& up : rule->updates) u.push_back({up.state, b(*up.expr)});
    return u;
  });
  // After update(): grad_scaling() wraps it (unscaled gradients, found_inf, the skipped step).
  if (rule->loss_scaling()) d.grad_scaling();
  return d;
}

RuleOp load_rule_file(const std::string& path) {
  // A regular file of at most 1 MiB: a FIFO given as a rule file used to hang the build.
  const std::string text = registry::read_regular_file(path, registry::kRuleLimits);
  auto rule = std::make_shared<const Rule>(parse_rule(text, path));
  RuleOp op{to_decl(rule, path), {}, std::nullopt, {}, rule, path, text};
  for (const std::string& tag : rule->storages) op.storages.push_back(Storage::from_tag(tag));
  if (op.storages.empty()) op.storages.push_back(Storage{});
  if (rule->sparse()) {
    // TensorFlow's naming (sparse_apply_adagrad); the same reference, so tests find its file.
    op.sparse = op.decl.renamed("sparse_" + rule->name);
    op.sparse
        ->summary("user rule " + rule->name +
                  ", sparse form: the rows named by indices, in "
                  "index order (" +
                  path + ")")
        .sparse_rows();
  }
  if (rule->autoschedule()) {
    op.autoschedule_isas = rule->autoschedule_isas.empty() ? isa_names() : rule->autoschedule_isas;
  }
  return op;
}

void RuleOp::fail(SourceLoc loc, const std::string& message) const {
  SourceFile(path, text).fail(loc, message);
}

}  // namespace opforge::dsl::rules
