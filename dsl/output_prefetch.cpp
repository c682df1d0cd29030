#include "dsl/output_prefetch.h"

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

bool is_marker(const Call* op) {
  return op->call_type == Call::PureExtern && op->name.rfind(kMarker, 0) == 0;
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
    for (auto l = lets_.rbegin(); l != lets_.rend(); ++l) {
      if (Halide::Internal::expr_uses_var(offset, l->first))
        offset = Let::make(l->first, l->second, offset);
    }
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
      throw std::invalid_argument("with_output_prefetch: a marker of '" +
                                  op->name.substr(sizeof(kMarker) - 1) +
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

void add_output_prefetch_pass(Halide::Pipeline& p, const std::vector<Halide::Func>& outputs,
                              const std::string& algorithm) {
  if (algorithm.find(kMarker) == std::string::npos) return;
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
