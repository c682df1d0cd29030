#include "dsl/optimizer_pipeline.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "dsl/elementwise_schedule.h"

namespace opforge::dsl {

using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::Var;
using registry::Input;
using registry::KernelArg;

namespace {

// Prints Exprs canonically: floats in hex (every bit counts), and let-bound names (Halide's
// CSE numbers them from a process-wide counter) renamed L0, L1, ... in order of binding.
class ExactPrinter : public Halide::Internal::IRPrinter {
 public:
  using IRPrinter::IRPrinter;

 protected:
  void visit(const Halide::Internal::FloatImm* op) override {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", op->value);
    stream << "(" << op->type << ")" << buf;
  }
  void visit(const Halide::Internal::Let* op) override {
    const std::string canon = "L" + std::to_string(lets_++);
    stream << "(let " << canon << " = ";
    print(op->value);
    auto saved = renamed_.find(op->name) == renamed_.end()
                     ? std::nullopt
                     : std::optional<std::string>(renamed_[op->name]);
    renamed_[op->name] = canon;
    stream << " in ";
    print(op->body);
    stream << ")";
    if (saved) {
      renamed_[op->name] = *saved;
    } else {
      renamed_.erase(op->name);
    }
  }
  void visit(const Halide::Internal::Variable* op) override {
    auto it = renamed_.find(op->name);
    stream << (it == renamed_.end() ? op->name : it->second);
  }

 private:
  int lets_ = 0;
  std::map<std::string, std::string> renamed_;
};

[[noreturn]] void fail(const std::string& op, const std::string& msg) {
  throw std::invalid_argument("op '" + op + "': " + msg);
}

// Halide makes names unique per process (ImageParam "var" gets a wrapper Func "var_im", then
// "var_im$1" in the next pipeline): the suffix says nothing about the computation, so it is
// dropped, and the per-Function blocks are sorted so their order does not depend on it.
std::string without_unique_suffixes(const std::string& s) {
  std::string out;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '$' && k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k + 1]))) {
      while (k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k + 1]))) ++k;
      continue;
    }
    out += s[k];
  }
  return out;
}

// The exact text of every Function the output depends on.
std::string algorithm_text(const Func& out) {
  std::vector<std::string> blocks;
  for (const auto& [name, f] : Halide::Internal::find_transitive_calls(out.function())) {
    std::ostringstream s;
    ExactPrinter p(s);
    s << "func " << name << "(";
    for (const auto& a : f.args()) s << a << ",";
    s << ") =";
    for (const auto& v : f.values()) {
      s << " ";
      p.print(v);
    }
    for (const auto& u : f.updates()) {
      s << "\nupdate (";
      for (const auto& a : u.args()) p.print(a), s << ",";
      s << ") where ";
      p.print(u.predicate());
      for (const auto& rv : u.schedule().rvars()) {
        s << " rvar " << rv.var << "[";
        p.print(rv.min);
        s << ", ";
        p.print(rv.extent);
        s << "]";
      }
      s << " =";
      for (const auto& v : u.values()) {
        s << " ";
        p.print(v);
      }
    }
    blocks.push_back(without_unique_suffixes(s.str()) + "\n");
  }
  std::sort(blocks.begin(), blocks.end());
  std::string text;
  for (const auto& b : blocks) text += b;
  return text;
}

}  // namespace

std::string exact_text(const Expr& e) {
  std::ostringstream s;
  ExactPrinter p(s);
  p.print(e);
  return s.str();
}

std::vector<Expr> state_updates(const OptimizerDecl& decl, const AttrValues& attrs,
                                const std::map<std::string, Expr>& values) {
  // Simultaneous assignment: every update Expr is built from the old values.
  Updates updates = decl.update_fn()(UpdateContext(values, attrs, decl.name()));
  std::map<std::string, Expr> by_state;
  const std::vector<std::string> states = decl.states();
  for (const auto& [name, e] : updates) {
    if (std::find(states.begin(), states.end(), name) == states.end()) {
      fail(decl.name(), "update assigns '" + name + "', which is not a state");
    }
    if (!by_state.emplace(name, e).second) fail(decl.name(), "'" + name + "' assigned twice");
  }
  std::vector<Expr> new_values;
  for (const auto& s : states) {
    auto it = by_state.find(s);
    if (it == by_state.end()) fail(decl.name(), "state '" + s + "' is never updated");
    new_values.push_back(Halide::cast(Halide::Float(32), it->second));
  }
  return new_values;
}

OptimizerPipeline build_optimizer_pipeline(const OptimizerDecl& decl, const AttrValues& given,
                                           const std::map<std::string, int64_t>& schedule,
                                           const Halide::Target& target) {
  decl.validate();
  OptimizerPipeline r;
  AttrValues attrs = decl.resolve_attrs(given);
  r.schedule_params = ElementwiseSchedule::resolve(schedule, target);
  r.schedule_summary = ElementwiseSchedule::summary(r.schedule_params);

  // Arguments in declaration order: fp32 1-D buffers for tensors, fp32 params for scalars.
  Var i("i");
  std::map<std::string, Expr> values;
  for (const auto& a : decl.args()) {
    if (a.role == Input::Role::scalar) {
      Halide::Param<float> p(a.name);
      values[a.name] = p;
      r.arguments.push_back(p);
      r.kernel_args.push_back({a.name, KernelArg::Kind::input_scalar, registry::DType::f32, 0});
      r.inputs.push_back({a.name, a.role, registry::DType::f32, 0, a.description});
    } else {
      ImageParam im(Halide::Float(32), 1, a.name);
      im.dim(0).set_estimate(0, 1 << 20);
      values[a.name] = im(i);
      r.arguments.push_back(im);
      r.kernel_args.push_back({a.name, KernelArg::Kind::input_buffer, registry::DType::f32, 1});
      r.inputs.push_back({a.name, a.role, registry::DType::f32, -1, a.description});
    }
  }
  for (const auto& a : decl.attrs()) {
    r.attrs.push_back(
        {a.name, a.type, a.default_value, attrs.at(a.name), a.description, a.choices});
  }

  const std::vector<std::string> states = decl.states();
  const std::vector<Expr> new_values = state_updates(decl, attrs, values);

  // One Tuple-valued output: each element overwrites its state in place. Separate Outputs
  // moved 44 B/element for Adam instead of 28 and were correct in one order only.
  // Built from a Function so the name is exactly "updated": Func("updated") would pass
  // through unique_name() and become "updated$1" in the second pipeline of a process,
  // making argument names and cache keys depend on build order.
  Func out{Halide::Internal::Function("updated")};
  if (new_values.size() == 1) {
    out(i) = new_values[0];
  } else {
    out(i) = Halide::Tuple(new_values);
  }
  ElementwiseSchedule::apply(out, i, r.schedule_params);
  const auto buffers = out.output_buffers();
  for (size_t k = 0; k < buffers.size(); ++k) {
    Halide::OutputImageParam ob = buffers[k];
    ob.dim(0).set_estimate(0, 1 << 20);
    r.kernel_args.push_back({ob.name(), KernelArg::Kind::output_buffer, registry::DType::f32, 1});
    r.outputs.push_back({states[k], ob.name(), states[k], registry::DType::f32, -1});
  }
  r.algorithm = algorithm_text(out);
  r.pipeline = Halide::Pipeline(out);
  return r;
}

}  // namespace opforge::dsl
