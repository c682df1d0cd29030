#include "dsl/output_prefetch.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace opforge::dsl {

using Halide::Expr;
using Halide::Internal::Block;
using Halide::Internal::Call;
using Halide::Internal::Evaluate;
using Halide::Internal::IRMutator;
using Halide::Internal::Let;
using Halide::Internal::LetStmt;
using Halide::Internal::Stmt;
using Halide::Internal::Store;
using Halide::Internal::Variable;

namespace {

// The marker's name: this prefix, then the output's name.
constexpr const char kMarker[] = "opforge_prefetch_output.";
// An input's marker: this prefix, then the input's name; args {value, element offset, a zero of
// the input's type, the condition}.
constexpr const char kInputMarker[] = "opforge_prefetch_input.";

bool is_input_marker(const Call* op) {
  return op->call_type == Call::PureExtern && op->name.rfind(kInputMarker, 0) == 0;
}

bool is_marker(const Call* op) {
  return op->call_type == Call::PureExtern &&
         (op->name.rfind(kMarker, 0) == 0 || is_input_marker(op));
}

// What the pass needs of an output buffer: element type, and per dim (innermost first) the
// min and stride (the buffer's own symbols, which the lowered code binds at its top).
struct OutputGeometry {
  Halide::Type type;
  std::vector<Expr> mins, strides;
};
using Geometries = std::map<std::string, OutputGeometry>;

// Replaces the markers of one Expr by their values and makes a prefetch of each; a marker's
// offset is wrapped in the Let exprs around it, so it may use what they bind.
class TakeMarkers : public IRMutator {
 public:
  explicit TakeMarkers(const Geometries& outputs) : outputs_(outputs) {}
  std::vector<Stmt> prefetches;

 protected:
  using IRMutator::visit;

  Expr visit(const Let* op) override {
    Expr value = mutate(op->value);
    lets_.emplace_back(op->name, value);
    Expr body = mutate(op->body);
    lets_.pop_back();
    return Let::make(op->name, value, body);
  }

  Expr visit(const Call* op) override {
    if (!is_marker(op)) return IRMutator::visit(op);
    if (is_input_marker(op)) {
      const std::string input = op->name.substr(sizeof(kInputMarker) - 1);
      const int bytes = op->args[2].type().bytes();
      const Expr offsets = mutate(op->args[1]);
      Expr when = mutate(op->args[3]);
      if (when.type().is_vector()) when = Halide::Internal::extract_lane(when, 0);
      when = Halide::Internal::simplify(with_lets(when));
      // One prefetch per 64-byte line the vector spans (lanes 0, 64 / bytes, ...).
      const int lanes = offsets.type().lanes(), per_line = std::max(1, 64 / bytes);
      for (int k = 0; k < lanes; k += per_line) {
        const Expr offset = lanes > 1 ? Halide::Internal::extract_lane(offsets, k) : offsets;
        const Stmt fetch = Evaluate::make(Call::make(
            Halide::Int(32), "opforge_prefetch_t0",
            {Variable::make(Halide::Handle(), input),
             Halide::Internal::simplify(with_lets(Halide::cast<int64_t>(offset) * bytes))},
            Call::Extern));
        prefetches.push_back(Halide::Internal::IfThenElse::make(when, fetch, Stmt()));
      }
      return mutate(op->args[0]);
    }
    const std::string output = op->name.substr(sizeof(kMarker) - 1);
    auto it = outputs_.find(output);
    if (it == outputs_.end()) {
      throw std::invalid_argument("with_output_prefetch: '" + output +
                                  "' is not an output of the pipeline");
    }
    const OutputGeometry& g = it->second;
    if (op->args.size() != g.mins.size() + 1) {
      throw std::invalid_argument("with_output_prefetch: output '" + output + "' has " +
                                  std::to_string(g.mins.size()) + " dims, the marker " +
                                  std::to_string(op->args.size() - 1) + " coords");
    }
    // Lane 0 of a vectorized store: one line per vector (AVX-512's 16 floats), or two
    // prefetches of one line (AVX2's 8), which costs a load-port uop.
    Expr offset = 0;
    for (size_t k = 0; k < g.mins.size(); ++k) {
      Expr c = mutate(op->args[k + 1]);
      if (c.type().is_vector()) c = Halide::Internal::extract_lane(c, 0);
      offset = offset + (c - g.mins[k]) * g.strides[k];
    }
    offset = with_lets(offset);
    // Halide's prefetch intrinsic: one line at base + offset elements of g.type (it emits
    // prefetchnta, which also takes the line in for the store that follows: as fast as
    // prefetchw in a C model of softmax's passes, 2026-12-06).
    prefetches.push_back(Evaluate::make(Call::make(
        g.type, Call::prefetch,
        {Variable::make(Halide::Handle(), output), Halide::Internal::simplify(offset), 1, 1},
        Call::Intrinsic)));
    return mutate(op->args[0]);
  }

 private:
  // e inside the Let exprs around the marker that it uses.
  Expr with_lets(Expr e) const {
    for (auto l = lets_.rbegin(); l != lets_.rend(); ++l) {
      if (Halide::Internal::expr_uses_var(e, l->first)) e = Let::make(l->first, l->second, e);
    }
    return e;
  }
  const Geometries& outputs_;
  std::vector<std::pair<std::string, Expr>> lets_;
};

// Puts each marked value's prefetch before the statement that holds it (a store, or a let
// that code motion made of the value).
class InjectOutputPrefetches : public IRMutator {
 public:
  explicit InjectOutputPrefetches(Geometries outputs) : outputs_(std::move(outputs)) {}

 protected:
  using IRMutator::visit;

  Stmt visit(const Store* op) override {
    TakeMarkers take(outputs_);
    Expr value = take.mutate(op->value);
    if (take.prefetches.empty()) return IRMutator::visit(op);
    Stmt s = Store::make(op->name, value, mutate(op->index), op->param, mutate(op->predicate),
                         op->alignment);
    return with_prefetches(take.prefetches, s);
  }

  Stmt visit(const LetStmt* op) override {
    TakeMarkers take(outputs_);
    Expr value = take.mutate(op->value);
    Stmt s = LetStmt::make(op->name, value, mutate(op->body));
    return take.prefetches.empty() ? s : with_prefetches(take.prefetches, s);
  }

  Expr visit(const Call* op) override {
    if (is_marker(op)) {
      const bool input = is_input_marker(op);
      throw std::invalid_argument(
          std::string(input ? "with_input_prefetch" : "with_output_prefetch") + ": a marker of '" +
          op->name.substr(input ? sizeof(kInputMarker) - 1 : sizeof(kMarker) - 1) +
          "' outside a store or let (not placed)");
    }
    return IRMutator::visit(op);
  }

 private:
  static Stmt with_prefetches(const std::vector<Stmt>& prefetches, const Stmt& s) {
    std::vector<Stmt> all = prefetches;
    all.push_back(s);
    return Block::make(all);
  }
  Geometries outputs_;
};

}  // namespace

Expr with_output_prefetch(const Expr& value, const std::string& output,
                          const std::vector<Expr>& coords) {
  std::vector<Expr> args = {value};
  args.insert(args.end(), coords.begin(), coords.end());
  return Call::make(value.type(), kMarker + output, args, Call::PureExtern);
}

Expr with_input_prefetch(const Expr& value, const Halide::ImageParam& input, const Expr& element,
                         const Expr& when) {
  return Call::make(value.type(), kInputMarker + input.name(),
                    {value, element, Halide::Internal::make_zero(input.type()), when},
                    Call::PureExtern);
}

void add_output_prefetch_pass(Halide::Pipeline& p, const std::vector<Halide::Func>& outputs,
                              const std::string& algorithm) {
  if (algorithm.find(kMarker) == std::string::npos &&
      algorithm.find(kInputMarker) == std::string::npos)
    return;
  Geometries g;
  for (const Halide::Func& f : outputs) {
    for (const Halide::OutputImageParam& ob : f.output_buffers()) {
      OutputGeometry& o = g[ob.name()];
      o.type = ob.type();
      for (int d = 0; d < ob.dimensions(); ++d) {
        o.mins.push_back(ob.dim(d).min());
        // A constrained stride (dim 0's 1 by default) as its constant: no multiply.
        const Expr stride = ob.dim(d).stride();
        const auto* v = stride.as<Variable>();
        const Expr fixed = v && v->param.defined() ? v->param.stride_constraint(d) : Expr();
        o.strides.push_back(fixed.defined() && Halide::Internal::is_const(fixed) ? fixed : stride);
      }
    }
  }
  p.add_custom_lowering_pass(new InjectOutputPrefetches(std::move(g)));
}

}  // namespace opforge::dsl
