#include "dsl/optimizer_pipeline.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "dsl/elementwise_schedule.h"
#include "dsl/fp8.h"
#include "dsl/math.h"
#include "dsl/output_prefetch.h"
#include "dsl/quant8.h"

namespace opforge::dsl {

using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::Var;
using registry::Input;
using registry::KernelArg;

namespace {
[[noreturn]] void fail(const std::string& op, const std::string& msg) {
  throw std::invalid_argument("op '" + op + "': " + msg);
}
}  // namespace

// The states in the order of the output Tuple: declaration order, except that a write-only
// state (the master-weights model copy) comes FIRST. Halide stores the Tuple's elements one
// after another within each vector, and every element recomputes what it needs from the
// inputs: the copy reads the old var, m, v, so it must be stored before any of them is
// overwritten in place (last, it would read the new var and apply the step twice unless LLVM
// happened to forward the earlier loads).
std::vector<std::string> output_order(const ResolvedOp& op) {
  std::vector<std::string> states = op.states;
  if (op.as_optimizer().storage().model) {
    auto it = std::find(states.begin(), states.end(), kModelArg);
    if (it != states.end()) std::rotate(states.begin(), it, it + 1);
  }
  return states;
}

std::vector<ArgLayout> argument_layout(const ResolvedOp& op) {
  const OptimizerDecl& decl = op.as_optimizer();
  std::vector<ArgLayout> out;
  for (const auto& a : op.args) {
    int dims = a.role == Input::Role::scalar ? 0 : 1;
    if (decl.sparse() && a.role != Input::Role::scalar && a.name != "indices") dims = 2;
    // Multi-tensor form: (C, K) chunks; the segment table and results stay 1-D.
    if (decl.is_multi_tensor() && a.role != Input::Role::scalar && a.role != Input::Role::result &&
        a.name != kSegmentsArg)
      dims = 2;
    out.push_back({a, dims});
  }
  return out;
}

namespace {

// The new value of each state, in output_order, and of each result, in declaration order, as
// fp32: simultaneous assignment, every update Expr reads the old values. `fast_paths` receives
// the conditions the update asked to be specialized on. fp32 math is resolved here, every Expr
// the update hands out included (dsl/math.h lower_fp32_math, `divide` the schedule's param).
struct NewValues {
  std::vector<Expr> states, results;
  Expr skip;  // where every state keeps its value (UpdateContext::skip_when); may be undefined
};
// `exact` (ElementwiseSchedule::exact_divides): where defined, each Expr holding a
// reciprocal becomes select(exact, its exact-divide form, the `divide` form); the schedule's
// copies specialized on `exact` keep one form each.
NewValues state_updates(const ResolvedOp& op, const std::map<std::string, Expr>& values,
                        Reducer reducer, std::vector<Expr>* fast_paths = nullptr,
                        Halide::Type compute = Halide::Float(32), Fp32Math how = {},
                        const Expr& exact = Expr()) {
  const OptimizerDecl& decl = op.as_optimizer();
  const bool fp32 = compute == Halide::Float(32);
  auto lower = [&](const Expr& e) {
    if (!fp32) return e;
    const Expr chosen = lower_fp32_math(e, how);
    if (!exact.defined() || !chosen.defined()) return chosen;
    const Expr divided = lower_fp32_math(e, Fp32Math{true, false});
    return Halide::Internal::equal(divided, chosen) ? chosen
                                                    : Halide::select(exact, divided, chosen);
  };
  Reducer lowered_reducer;
  if (reducer) {
    lowered_reducer = [&lower, reducer = std::move(reducer)](const Expr& e, bool squares,
                                                             bool whole_call) {
      return reducer(lower(e), squares, whole_call);
    };
  }
  UpdateContext ctx(values, op.attrs, decl.name(), lowered_reducer);
  Updates updates = decl.update_fn()(ctx);
  if (fast_paths) {
    *fast_paths = ctx.fast_paths();
    for (Expr& e : *fast_paths) e = lower(e);
  }
  std::map<std::string, Expr> by_state;
  const std::vector<std::string> states = output_order(op);
  const std::vector<std::string>& results = op.results;
  for (const auto& [name, e] : updates) {
    if (std::find(states.begin(), states.end(), name) == states.end() &&
        std::find(results.begin(), results.end(), name) == results.end()) {
      fail(decl.name(), "update assigns '" + name + "', which is not a state or a result");
    }
    if (!by_state.emplace(name, e).second) fail(decl.name(), "'" + name + "' assigned twice");
  }
  std::map<std::string, registry::DType> dtypes;
  for (const auto& a : op.args) dtypes[a.name] = a.dtype;
  auto value_of = [&](const std::string& s, const char* kind) {
    auto it = by_state.find(s);
    if (it == by_state.end()) fail(decl.name(), kind + (" '" + s + "' is never updated"));
    // fp32 kernels store a narrow state (the master-weights model copy) in its own type; the
    // update already converted it (dsl/math.h to_storage). The fp64 golden keeps fp64.
    const Halide::Type stored = halide_type(dtypes.at(s));
    // Raw byte states (bandwidth kernels) too; 8-bit quantized states stay fp32 here: the
    // blockwise pass encodes them.
    const bool quantized = decl.storage().quant && stored == Halide::UInt(8);
    const bool narrow = compute == Halide::Float(32) &&
                        (stored.bits() == 16 || (stored == Halide::UInt(8) && !quantized));
    return Halide::cast(narrow ? stored : compute, lower(it->second));
  };
  NewValues out;
  out.skip = lower(ctx.skip_condition());
  for (const auto& s : states) out.states.push_back(value_of(s, "state"));
  for (const auto& r : results) out.results.push_back(value_of(r, "result"));
  return out;
}

// Names of the Funcs an Expr calls.
class CallNames : public Halide::Internal::IRGraphVisitor {
 public:
  std::set<std::string> names;

 protected:
  using IRGraphVisitor::visit;
  void visit(const Halide::Internal::Call* op) override {
    names.insert(op->name);
    IRGraphVisitor::visit(op);
  }
  void visit(const Halide::Internal::Variable* op) override { names.insert(op->name); }
};

void define_values(Func out, const std::vector<Halide::Expr>& args, const std::vector<Expr>& v) {
  if (v.size() == 1) {
    out(args) = v[0];
  } else {
    out(args) = Halide::Tuple(v);
  }
}

// The fp32 (golden: fp64) value of a stored element: narrow floats widened by an exact cast,
// FP8 gradients decoded from their bits (dsl/fp8.h), anything else as it is.
Expr widened(const ArgDecl* a, const Expr& v, const Halide::Type& compute) {
  if (a && v.type() == Halide::UInt(8)) {  // the golden reads decoded fp64 values instead
    if (auto f = fp8_format(a->dtype)) return decode_fp8(*f, v, compute);
  }
  return v.type().is_float() && v.type().bits() == 16 ? from_storage(v, compute) : v;
}

// Built from a Function so the name is exactly `name`: Func(name) would pass through
// unique_name() and become "name$1" in the second pipeline of a process.
Func exact_func(const std::string& name) {
  return Func{Halide::Internal::Function(name)};
}

// Binds every tensor argument's value at `at` into `values` (narrow storage read with an
// exact cast: arithmetic stays fp32); results are read at their one element, where they are
// used, and the multi-tensor chunk table is left out. Returns the first elementwise tensor:
// every one has the same extent (the runtime checks it), its extents give the element count.
std::string bind_tensors(const ResolvedOp& op, const Bindings& in, const std::vector<Expr>& at,
                         std::map<std::string, Expr>& values) {
  const OptimizerDecl& decl = op.as_optimizer();
  const std::vector<std::string>& results = op.results;
  std::map<std::string, const ArgDecl*> args;
  for (const auto& a : op.args) args[a.name] = &a;
  std::string first;
  for (const auto& [name, f] : in.tensors) {
    if (name == kSegmentsArg && decl.is_multi_tensor()) continue;
    if (std::find(results.begin(), results.end(), name) != results.end()) {
      values[name] = f(0);
      continue;
    }
    const ArgDecl* a = args.count(name) ? args.at(name) : nullptr;
    if (a && a->role == Input::Role::block_scale) continue;  // read with its state's codes
    if (first.empty()) first = name;
    Expr v = f(at);
    if (a && a->quant) {
      // An 8-bit state: its code's map value times its block's absmax.
      const Expr block = at[0] / decl.storage().block;
      values[name] =
          decode8(*a->quant, v, in.compute, in.permutes) * in.tensors.at(absmax_arg(name))(block);
      continue;
    }
    values[name] = widened(a, v, in.compute);
  }
  if (first.empty()) fail(decl.name(), "has no elementwise tensor");
  return first;
}

// The reduced terms of one evaluation of the update: each reduction's per-element Expr (fp64)
// and whether it is over the whole call.
struct Reductions {
  std::vector<Expr> terms;
  std::vector<bool> whole_call;
  Reducer collector() {
    return [this](const Expr& e, bool squares, bool whole) {
      Expr d = Halide::cast(Halide::Float(64), e);
      terms.push_back(squares ? d * d : d);
      whole_call.push_back(whole);
      return Halide::cast(Halide::Float(64), 0);
    };
  }
  bool per_tensor() const {
    return std::find(whole_call.begin(), whole_call.end(), false) != whole_call.end();
  }
  // Element j of `f` (a Tuple when there are several terms) at `args`.
  Expr element(const Func& f, size_t j, const std::vector<Expr>& args) const {
    return terms.size() == 1 ? Expr(f(args)) : Expr(f(args)[static_cast<int>(j)]);
  }
  // f(lhs) = zeros, then f(lhs_update) += rhs(j) for every term: one Tuple-valued sum.
  void define_sum(Func f, const std::vector<Expr>& lhs, const std::vector<Expr>& lhs_update,
                  const std::function<Expr(size_t)>& rhs) const {
    define_values(f, lhs, std::vector<Expr>(terms.size(), Halide::cast(Halide::Float(64), 0)));
    std::vector<Expr> acc;
    for (size_t j = 0; j < terms.size(); ++j) acc.push_back(element(f, j, lhs_update) + rhs(j));
    define_values(f, lhs_update, acc);
  }
  // The tensors the terms read: the reduction pass's extra traffic.
  std::vector<std::string> reads(const Bindings& in) const {
    CallNames calls;
    for (const auto& t : terms) t.accept(&calls);
    std::vector<std::string> out;
    for (const auto& [name, f] : in.tensors) {
      if (name != kSegmentsArg && calls.names.count(f.name())) out.push_back(name);
    }
    return out;
  }
};

// The results' output Funcs, "result_<name>"(i), one element each: from scalars, reductions and
// their own old value only (a per-element value is refused, naming it).
void define_results(const OptimizerDecl& decl, const std::vector<std::string>& results,
                    const std::vector<Expr>& values, const Bindings& in, Definition& def) {
  std::set<std::string> per_element;
  for (const auto& [name, f] : in.tensors) {
    const bool result = std::find(results.begin(), results.end(), name) != results.end();
    if (!result && name != kSegmentsArg) per_element.insert(f.name());
  }
  for (size_t k = 0; k < results.size(); ++k) {
    CallNames calls;
    values[k].accept(&calls);
    for (const auto& n : calls.names) {
      if (per_element.count(n))
        fail(decl.name(), "result '" + results[k] + "' depends on the per-element values of '" + n +
                              "': a result may read scalars, reductions and results only");
    }
    Func f = exact_func("result_" + results[k]);
    f(Var("i")) = values[k];
    def.results.push_back(f);
    def.algorithm += algorithm_text(f);
  }
}

// An 8-bit state's decoded values, (element, block), and whether its map is the linear one.
struct Decoded {
  Func values;
  bool linear;
};

// The 8-bit storage's binding: element `e` of block `b` (index b*block + e) of every tensor,
// each 8-bit state decoded once into "dequantized_<state>"(e, b) (dequantize8: its map value
// times the block's absmax, which is loop-invariant along e). Two dims, so that the block index is
// a loop variable rather than a division Halide would turn into a gather per vector.
void bind_blocked(const ResolvedOp& op, const Bindings& in, const Var& e, const Var& b,
                  std::map<std::string, Expr>& values, std::vector<Decoded>& dequantized) {
  const int B = op.as_optimizer().storage().block;
  std::map<std::string, const ArgDecl*> args;
  for (const auto& a : op.args) args[a.name] = &a;
  Expr n;  // the element count
  for (const auto& [name, f] : in.tensors) {
    const Input::Role role = args.at(name)->role;
    if (!n.defined() && role != Input::Role::result && role != Input::Role::block_scale)
      n = in.extents.at(name)[0];
  }
  for (const auto& [name, f] : in.tensors) {
    const ArgDecl& a = *args.at(name);
    if (a.role == Input::Role::result) {
      values[name] = f(0);
      continue;
    }
    if (a.role == Input::Role::block_scale) continue;
    // Clamped: bounds inference takes a whole block for the last one (it cannot bound
    // i % block), whose elements past the end are computed and never stored. likely() makes
    // Halide peel the clamp off the steady-state loop (clamped vectors are gathers).
    const Expr v = f(Halide::min(Halide::likely(b * B + e), n - 1));
    if (a.quant) {
      Func deq = exact_func("dequantized_" + name);
      deq(e, b) =
          dequantize8(*a.quant, v, in.tensors.at(absmax_arg(name))(b), in.compute, in.permutes);
      dequantized.push_back({deq, a.quant->map == dsl::QuantMap::linear});
      values[name] = deq(e, b);
      continue;
    }
    values[name] = widened(&a, v, in.compute);
  }
}

// A NaN of type t, from its bits: Halide's simplifier folds float NaN constants.
Expr quiet_nan(const Halide::Type& t) {
  return t.bits() == 64 ? Halide::reinterpret(t, Expr(static_cast<uint64_t>(0x7ff8000000000000ULL)))
                        : Halide::reinterpret(t, Expr(static_cast<uint32_t>(0x7fc00000u)));
}

// The 8-bit states' blockwise requantization (Storage::quant). `states` are the new values in
// output_order (fp32; the golden's fp64), computed once into `new_quantized` (the quantized
// states) and `new_states` (the others); per block b,
// `block_lanes`(l, b) takes the 16-lane maxima of |new value| (NaN counted above inf; as
// the bits of |new value| in fp32 kernels) and
// `block_scale`(b) holds each quantized state's new absmax (NaN when a value in the block is
// not finite) and its reciprocal times encode_gain (0 for an all-zero block; an absmax below
// gain / FLT_MAX, about 4e-37 for the linear maps, overflows it, as 1 / absmax did below 3e-39,
// and its block's codes saturate). `out` stores the codes of the
// quantized states, `absmax_out`(b) the new absmaxes; a skipped step keeps both as they were.
//
// Chunking must not change the 8-bit states: one call over a model's flat buffers and one call
// per tensor give the same codes and absmaxes. A tensor's last, partial block runs other loop
// versions than whole blocks (the clamped reads, the guarded tail vector), which LLVM compiles
// one by one under Halide's fast math, contracting and reassociating each its own way (seen: v's
// absmaxes 1 ulp apart at 32 lanes on AVX2). So the quantized states' new values are computed
// strict, in a Func of their own (`quantized`, which the other states' updates read), and so is
// the encode; the decode is exact anyway. The parameter may still differ in its last bit, as in
// every other kernel. Against the fast-math form, preview / registered per pair (Zen 4 EPYC, 1
// thread, in cache): Adam q8s 1.014-1.015x, q8ls 0.967-1.007x (AVX2 8 lanes, AVX-512 16); in one
// Func with the other states' updates, each update that read them computed its own copy (the
// strict 1 - beta1 was not hoisted with the rest): 1.03-1.13x.
struct Blockwise {
  Func values, lanes, scales, absmax_out;
  Halide::RDom r;
  Func quantized;  // the quantized states' new values, strict
};
Blockwise define_blockwise(const ResolvedOp& op, const Bindings& in, const NewValues& nv,
                           const std::string& first, Func out, const Var& i, const Var& e,
                           const Var& eb, int64_t prefetch, int64_t prefetch_from) {
  const OptimizerDecl& decl = op.as_optimizer();
  const int B = decl.storage().block;
  const Halide::Type t = in.compute;
  const std::vector<std::string> states = output_order(op);
  std::map<std::string, const ArgDecl*> args;
  for (const auto& a : op.args) args[a.name] = &a;
  std::vector<size_t> q;  // positions of the quantized states in `states`
  for (size_t k = 0; k < states.size(); ++k) {
    if (args.at(states[k])->quant) q.push_back(k);
  }
  Blockwise w{exact_func("new_states"),           exact_func("block_lanes"),
              exact_func("block_scale"),          exact_func("updated_absmax"),
              Halide::RDom(0, B / 16, "block_r"), exact_func("new_quantized")};
  const bool fp32 = t == Halide::Float(32);
  std::vector<int> slot(states.size(), -1);  // state k's element of w.quantized or w.values
  std::vector<Expr> quantized, others;
  for (size_t j = 0; j < q.size(); ++j) {
    slot[q[j]] = static_cast<int>(j);
    quantized.push_back(fp32 ? Halide::strict_float(nv.states[q[j]]) : nv.states[q[j]]);
  }
  // The schedule's prefetches ride on the first quantized state's new value, computed per
  // vector of each block (ElementwiseSchedule's prefetch params): a line of each input wider
  // than a byte that the update reads, `prefetch` elements ahead, clamped to the last element,
  // where N >= prefetch_from.
  if (prefetch > 0 && fp32) {
    const Expr last = in.extents.at(first)[0] - 1;
    CallNames reads;  // what the new values read directly (not the 8-bit codes, nor `model`)
    for (const Expr& x : nv.states) x.accept(&reads);
    for (const auto& [name, im] : in.images) {
      if (!reads.names.count(in.tensors.at(name).name()) || im.type().bytes() == 1) continue;
      quantized[0] = with_input_prefetch(quantized[0], im,
                                         Halide::min(eb * B + e + static_cast<int>(prefetch), last),
                                         last >= static_cast<int>(prefetch_from - 1));
    }
  }
  define_values(w.quantized, {e, eb}, quantized);
  auto quantized_at = [&](int j, const Expr& at, const Expr& blk) {
    return q.size() == 1 ? Expr(w.quantized(at, blk)) : Expr(w.quantized(at, blk)[j]);
  };
  for (size_t k = 0; k < states.size(); ++k) {
    if (slot[k] >= 0) continue;
    Expr x = nv.states[k];
    for (size_t j = 0; j < q.size(); ++j) {
      x = Halide::Internal::substitute(nv.states[q[j]], quantized_at(static_cast<int>(j), e, eb),
                                       x);
    }
    slot[k] = static_cast<int>(others.size());
    others.push_back(x);
  }
  if (others.empty()) fail(decl.name(), "8-bit states need a state that is not quantized");
  define_values(w.values, {e, eb}, others);
  // Element `at` of block `blk`.
  auto value = [&](size_t k, const Expr& at, const Expr& blk) {
    if (args.at(states[k])->quant) return quantized_at(slot[k], at, blk);
    return others.size() == 1 ? Expr(w.values(at, blk)) : Expr(w.values(at, blk)[slot[k]]);
  };
  const Expr n = in.extents.at(first)[0];
  Var l("l"), b("b");
  const Expr x = b * B + w.r * 16 + l;
  const Expr inf = Halide::Internal::make_const(t, std::numeric_limits<double>::infinity());
  // fp32 kernels take the maxima over the bits of |v|: for non-negative floats they order as
  // the values do, and a NaN's lie above inf's, so a NaN is the largest as the golden counts
  // it (the block's absmax is then NaN either way, below); and the tail block's lanes past the
  // end read its last element again, a duplicate that cannot raise the maximum. Against the
  // float form (a NaN test and a guard per vector): 8-bit Adam 0.88-0.92x the time with the
  // linear map, 0.97-0.98x with the dynamic one (AVX-512 and AVX2, in cache and at 1e7).
  const bool bits = t == Halide::Float(32);
  std::vector<Expr> zeros, maxima;
  for (size_t k : q) {
    const Expr v = value(k, Halide::min(w.r * 16 + l, n - 1 - b * B), b);
    if (bits) {
      zeros.push_back(Halide::cast<uint32_t>(0));
      maxima.push_back(Halide::reinterpret<uint32_t>(v) & 0x7fffffffu);
      continue;
    }
    // The golden: the tail block's lanes past the end count 0.
    const Expr mag = dsl::select(dsl::is_nan(v), inf, Halide::abs(v));
    zeros.push_back(Halide::cast(t, 0));
    maxima.push_back(dsl::select(x < n, mag, Halide::cast(t, 0)));
  }
  define_values(w.lanes, {l, b}, zeros);
  std::vector<Expr> acc;
  for (size_t j = 0; j < q.size(); ++j) {
    const Expr old = q.size() == 1 ? Expr(w.lanes(l, b)) : Expr(w.lanes(l, b)[static_cast<int>(j)]);
    acc.push_back(Halide::max(old, maxima[j]));
  }
  define_values(w.lanes, {l, b}, acc);
  Halide::RDom rl(0, 16, "lane_r");
  std::vector<Expr> scale, absmax;
  for (size_t j = 0; j < q.size(); ++j) {
    const Expr lane =
        q.size() == 1 ? Expr(w.lanes(rl, b)) : Expr(w.lanes(rl, b)[static_cast<int>(j)]);
    const Expr m =
        bits ? Halide::reinterpret<float>(Halide::maximum(lane)) : Expr(Halide::maximum(lane));
    absmax.push_back(dsl::select(dsl::is_finite(m), m, quiet_nan(t)));
  }
  for (size_t j = 0; j < q.size(); ++j) {
    const double gain = encode_gain(*args.at(states[q[j]])->quant, t);
    scale.push_back(absmax[j]);
    scale.push_back(dsl::select(absmax[j] > 0, Halide::Internal::make_const(t, gain) / absmax[j],
                                Halide::cast(t, 0)));
  }
  define_values(w.scales, {b}, scale);
  auto scale_at = [&](size_t j, int part, const Expr& blk) {
    return Expr(w.scales(blk)[static_cast<int>(2 * j + part)]);
  };
  // Codes for the quantized states, new values for the others.
  std::vector<Expr> stored;
  for (size_t k = 0, j = 0; k < states.size(); ++k) {
    if (j < q.size() && q[j] == k) {
      const ArgDecl& a = *args.at(states[k]);
      Expr code = encode8(*a.quant, value(k, i % B, i / B) * scale_at(j, 1, i / B),
                          in.mask_compares, true, in.permutes);
      // The golden keeps codes as fp64 values, like every tensor it sees.
      code = fp32 ? Halide::strict_float(code) : Halide::cast(t, code);
      if (nv.skip.defined()) code = Halide::select(nv.skip, in.tensors.at(states[k])(i), code);
      stored.push_back(code);
      ++j;
    } else {
      stored.push_back(value(k, i % B, i / B));
    }
  }
  define_values(out, {i}, stored);
  std::vector<Expr> new_absmax;
  for (size_t j = 0; j < q.size(); ++j) {
    Expr a = scale_at(j, 0, b);
    if (nv.skip.defined())
      a = Halide::select(nv.skip, in.tensors.at(absmax_arg(states[q[j]]))(b), a);
    new_absmax.push_back(a);
  }
  define_values(w.absmax_out, {b}, new_absmax);
  return w;
}

// The decoded 8-bit states worth a buffer per block: the dynamic map's (its decode is some 20
// vector ops that, inlined into the update, cost 1.01-1.16x the time: registers spill, AVX2
// most), and any that both the quantized states' update and the other states' read (Lion's var
// reads the old m), each decoding once. The linear map's decode (a conversion and a multiply by
// the block's step; a divide when this was measured) is inlined where it is read: without its
// buffer, a store and a load per vector, 8-bit Adam took 0.89x the time in cache with AVX-512,
// 0.93x with AVX2 (1 thread, 5e4, 2-vCPU Zen 4 EPYC).
std::vector<Func> decoded_per_block(const std::vector<Decoded>& dequantized, const Blockwise& w) {
  std::vector<Func> kept;
  for (const Decoded& d : dequantized) {
    int readers = 0;
    for (const Func& f : {w.quantized, w.values}) {
      readers += static_cast<int>(
          Halide::Internal::find_direct_calls(f.function()).count(d.values.name()));
    }
    if (!d.linear || readers > 1) kept.push_back(d.values);
  }
  return kept;
}

// The schedule's choice for the update's reciprocals (dsl/math.h); absent when unscheduled.
bool divides(const std::map<std::string, int64_t>& sched) {
  auto it = sched.find("divide");
  return it != sched.end() && it->second != 0;
}

// How the update's fp32 math lowers: the schedule's divide param, the target's vrcp14ps.
Fp32Math math_of(const std::map<std::string, int64_t>& sched, const Bindings& in) {
  return Fp32Math{divides(sched), in.rcp14};
}

Definition define_dense(const ResolvedOp& op, const Bindings& in, Func out,
                        const std::map<std::string, int64_t>& sched) {
  const OptimizerDecl& decl = op.as_optimizer();
  Var i("i");
  std::map<std::string, Expr> values = {in.scalars.begin(), in.scalars.end()};
  const std::vector<std::string>& results = op.results;
  const std::string first_tensor = bind_tensors(op, in, {i}, values);
  // 8-bit states: the update runs on (element, block) (bind_blocked); the reduction pass,
  // if any, on i.
  const bool quantized = decl.storage().quant.has_value();
  Var qe("qe"), qb("qb");
  std::vector<Decoded> dequantized;
  std::map<std::string, Expr> update_values = values;
  if (quantized) {
    update_values = {in.scalars.begin(), in.scalars.end()};
    bind_blocked(op, in, qe, qb, update_values, dequantized);
  }

  // Whole-tensor reductions, fused into one pass: the update is evaluated once to collect
  // every reduced term, the terms become one Tuple-valued sum (fp64) computed at root, and
  // the update is evaluated again reading that sum. Reductions may not depend on each other.
  Reductions red;
  std::vector<Expr> fast_paths;
  NewValues new_values =
      state_updates(op, values, red.collector(), &fast_paths, in.compute, math_of(sched, in));
  // The update's two forms (divide_below) where every copy of it is one loop nest that
  // apply() specializes: not the 8-bit blockwise pass, the reduction pass, nor results.
  Expr exact;
  if (in.scheduled && !quantized && red.terms.empty() && results.empty()) {
    exact = ElementwiseSchedule::exact_divides(sched, in.extents.at(first_tensor)[0]);
    if (exact.defined()) {
      fast_paths.clear();
      new_values = state_updates(op, values, red.collector(), &fast_paths, in.compute,
                                 math_of(sched, in), exact);
    }
  }
  // new_values_first(): the new values are computed whole into a buffer before `out`
  // copies them over the states (see OptimizerDecl::new_values_first).
  const bool values_first = decl.computes_new_values_first();
  if (values_first && (!results.empty() || !decl.storage().is_f32()))
    fail(decl.name(), "new_values_first() takes f32 ops without results");
  Definition def;
  def.per_tensor_reductions = red.per_tensor();
  def.divides_by_size = exact.defined();
  Func total = exact_func("reduce");
  Halide::RDom r;
  if (!red.terms.empty()) {
    r = Halide::RDom(0, in.extents.at(first_tensor)[0], "reduce_r");
    Func term = exact_func("reduce_terms");
    define_values(term, {i}, red.terms);
    red.define_sum(total, {}, {}, [&](size_t k) { return red.element(term, k, {r}); });
    size_t next = 0;
    Reducer read = [&](const Expr&, bool, bool) { return red.element(total, next++, {}); };
    new_values = state_updates(op, update_values, read, nullptr, in.compute, math_of(sched, in));
    def.reduction_reads = red.reads(in);
  } else if (quantized) {
    new_values =
        state_updates(op, update_values, red.collector(), nullptr, in.compute, math_of(sched, in));
  }
  Func values_func = exact_func("new_values");
  if (values_first && !new_values.states.empty()) {
    define_values(values_func, {i}, new_values.states);
    for (size_t k = 0; k < new_values.states.size(); ++k) {
      new_values.states[k] = new_values.states.size() == 1
                                 ? Expr(values_func(i))
                                 : Expr(values_func(i)[static_cast<int>(k)]);
    }
  }
  std::optional<Blockwise> blockwise;
  if (decl.storage().quant) {
    if (values_first) fail(decl.name(), "new_values_first() takes f32 ops");
    auto param = [&](const char* name) {
      auto it = sched.find(name);
      return in.scheduled && it != sched.end() ? it->second : int64_t{0};
    };
    blockwise = define_blockwise(op, in, new_values, first_tensor, out, i, qe, qb,
                                 param("prefetch"), param("prefetch_from"));
    def.block_scales = blockwise->absmax_out;
    def.algorithm = algorithm_text(std::vector<Func>{out, blockwise->absmax_out});
  } else if (!new_values.states.empty()) {
    // An op without states (global_norm) only reduces: `out` stays undefined.
    define_values(out, {i}, new_values.states);
    def.algorithm = algorithm_text(out);
  }
  define_results(decl, results, new_values.results, in, def);
  if (!in.scheduled) {
    if (in.root_reductions && !red.terms.empty()) total.compute_root();
    if (blockwise) blockwise->values.compute_root(), blockwise->scales.compute_root();
    return def;
  }
  if (blockwise) {
    std::vector<Func> per_block = decoded_per_block(dequantized, *blockwise);
    // The other states' new values (the param) get a buffer per block where a decoded state
    // has one (the dynamic map); where every decode is inlined (the linear map) they are
    // computed in the store loop beside the light encode. Inlined against buffered (AMD EPYC
    // family 26, 1 thread, 5e4, in cache): linear Adam / AdamW 0.95-0.97x the time with
    // AVX-512, 1.00x AVX2; dynamic Adam / Lion 1.01-1.04x (the heavy encode spills).
    const bool values_inline = per_block.empty();
    per_block.push_back(blockwise->quantized);
    if (!values_inline) per_block.push_back(blockwise->values);
    if (!red.terms.empty()) ElementwiseSchedule::apply_reduction(total, r, sched);
    ElementwiseSchedule::apply_blockwise(out, blockwise->absmax_out, blockwise->lanes,
                                         blockwise->scales, per_block, i, decl.storage().block,
                                         sched);
    return def;
  }
  if (!red.terms.empty()) ElementwiseSchedule::apply_reduction(total, r, sched);
  if (!new_values.states.empty()) {
    // The tensors the update reads, wrapped for double buffering (inlined when it is off).
    Func reader = values_first ? values_func : out;
    std::vector<Func> inputs;
    for (const auto& [name, f] : in.tensors) {
      if (std::find(results.begin(), results.end(), name) == results.end()) inputs.push_back(f);
    }
    const std::vector<Func> stage = ElementwiseSchedule::staged_inputs(inputs, reader, sched);
    if (values_first) {
      const Expr n = out.output_buffers()[0].dim(0).extent();
      values_func.compute_root();
      ElementwiseSchedule::apply(values_func, i, sched, fast_paths, n, stage, exact);
      ElementwiseSchedule::apply(out, i, sched, {}, n);
    } else {
      ElementwiseSchedule::apply(out, i, sched, fast_paths, Expr(), stage, exact);
    }
  }
  return def;
}

Definition define_sparse(const ResolvedOp& op, const Bindings& in, Func out,
                         const std::map<std::string, int64_t>& sched) {
  const OptimizerDecl& decl = op.as_optimizer();
  Var c("c"), row("row");
  const Func& indices = in.tensors.at("indices");
  Halide::RDom k(0, in.extents.at("indices")[0], "k");
  // The runtime rejects out-of-range indices before the call; the clamp bounds the rows
  // Halide's bounds inference sees.
  const Expr rows = in.extents.at(op.states.at(0))[1];
  Expr r = Halide::clamp(Halide::cast(Halide::Int(32), indices(k)), 0, rows - 1);
  const std::vector<std::string>& states = op.states;
  std::map<std::string, Expr> values = {in.scalars.begin(), in.scalars.end()};
  for (const auto& [name, f] : in.tensors) {
    if (name != "indices") values[name] = f(c, k);  // gradients: row k of grad
  }
  // States are read from the output itself: with duplicate indices the second update must see
  // the first one's result, and reads of the (aliased) input buffers could be reordered.
  std::vector<Expr> undef(states.size(), Halide::undef(in.compute));
  define_values(out, {c, row}, undef);
  for (size_t s = 0; s < states.size(); ++s) {
    values[states[s]] = states.size() == 1 ? Expr(out(c, r)) : Expr(out(c, r)[static_cast<int>(s)]);
  }
  std::vector<Expr> fast_paths;
  if (!op.results.empty()) fail(decl.name(), "the sparse form has no results");
  define_values(
      out, {c, r},
      state_updates(op, values, nullptr, &fast_paths, in.compute, math_of(sched, in)).states);
  Definition def;
  def.algorithm = algorithm_text(out);
  if (in.scheduled) ElementwiseSchedule::apply_sparse(out, c, sched, fast_paths);
  return def;
}

// The multi-tensor form: every tensor is (C, K), K chunks of C elements, chunk k belonging to
// model tensor segments(k). Reductions: per chunk, `kLanes` fp64 partial sums (C is a multiple
// of 16), then per model tensor (a serial scatter over the K chunk sums) and over the call.
Definition define_multi_tensor(const ResolvedOp& op, const Bindings& in, Func out,
                               const std::map<std::string, int64_t>& sched) {
  const OptimizerDecl& decl = op.as_optimizer();
  constexpr int kLanes = 16;
  Var c("c"), k("k"), t("t"), lane("lane");
  const std::vector<std::string>& results = op.results;
  const Func& segments = in.tensors.at(kSegmentsArg);
  const Expr K = in.extents.at(kSegmentsArg)[0];
  std::map<std::string, Expr> values = {in.scalars.begin(), in.scalars.end()};
  const Expr C = in.extents.at(bind_tensors(op, in, {c, k}, values))[0];

  Reductions red;
  std::vector<Expr> fast_paths;
  NewValues new_values =
      state_updates(op, values, red.collector(), &fast_paths, in.compute, math_of(sched, in));
  Definition def;
  def.per_tensor_reductions = red.per_tensor();
  Func lanes = exact_func("chunk_lanes"), chunk = exact_func("chunk_sum"),
       per_tensor = exact_func("tensor_sum"), all = exact_func("reduce");
  if (!red.terms.empty()) {
    Func term = exact_func("reduce_terms");
    define_values(term, {c, k}, red.terms);
    Halide::RDom ro(0, C / kLanes, "chunk_r"), rl(0, kLanes, "lane_r"), rk(0, K, "segment_r");
    red.define_sum(lanes, {lane, k}, {lane, k}, [&](size_t j) {
      return red.element(term, j, {ro * kLanes + lane, k});
    });
    red.define_sum(chunk, {k}, {k}, [&](size_t j) { return red.element(lanes, j, {rl, k}); });
    // The runtime checks 0 <= segments(k) < K; the clamp bounds what bounds inference sees.
    const Expr seg_r = Halide::clamp(segments(rk), 0, K - 1);
    red.define_sum(per_tensor, {t}, {seg_r}, [&](size_t j) { return red.element(chunk, j, {rk}); });
    red.define_sum(all, {}, {}, [&](size_t j) { return red.element(chunk, j, {rk}); });
    const Expr seg_k = Halide::clamp(segments(k), 0, K - 1);
    size_t next = 0;
    Reducer read = [&](const Expr&, bool, bool) {
      const size_t j = next++;
      return red.whole_call[j] ? red.element(all, j, {}) : red.element(per_tensor, j, {seg_k});
    };
    new_values = state_updates(op, values, read, nullptr, in.compute, math_of(sched, in));
    def.reduction_reads = red.reads(in);
  }
  define_values(out, {c, k}, new_values.states);
  def.algorithm = algorithm_text(out);
  define_results(decl, results, new_values.results, in, def);
  if (!in.scheduled) {
    if (in.root_reductions && !red.terms.empty()) {
      chunk.compute_root();
      per_tensor.compute_root();
      all.compute_root();
    }
    return def;
  }
  ElementwiseSchedule::apply_multi_tensor(out, c, k, K, sched, fast_paths);
  if (!red.terms.empty()) {
    ElementwiseSchedule::apply_multi_tensor_sums(chunk, lanes, lane, k, K, sched);
    per_tensor.compute_root();
    all.compute_root();
  }
  return def;
}

}  // namespace

std::vector<std::string> reduction_reads(const ResolvedOp& op) {
  if (op.as_optimizer().sparse()) return {};
  std::map<std::string, Expr> values;
  for (const auto& a : op.args) {
    Expr v = Halide::Internal::Variable::make(halide_type(a.dtype), a.name);
    if (a.quant) v = Halide::cast(Halide::Float(32), v);  // 8-bit codes stand for fp32 values
    values[a.name] = widened(&a, v, Halide::Float(32));
  }
  CallNames calls;
  Reducer collect = [&](const Expr& e, bool, bool) {
    e.accept(&calls);
    return Halide::cast(Halide::Float(64), 0);
  };
  state_updates(op, values, collect);
  std::vector<std::string> out;
  for (const auto& a : op.args) {
    if (a.role != Input::Role::scalar && a.name != kSegmentsArg && calls.names.count(a.name))
      out.push_back(a.name);
  }
  return out;
}

Definition define_optimizer(const ResolvedOp& op, const Bindings& in, Func out,
                            const std::map<std::string, int64_t>& schedule) {
  const OptimizerDecl& decl = op.as_optimizer();
  if (decl.sparse()) return define_sparse(op, in, out, schedule);
  if (decl.is_multi_tensor()) return define_multi_tensor(op, in, out, schedule);
  return define_dense(op, in, out, schedule);
}

KernelPipeline build_optimizer_pipeline(const ResolvedOp& op,
                                        const std::map<std::string, int64_t>& schedule,
                                        const Halide::Target& target, bool scheduled) {
  const OptimizerDecl& decl = op.as_optimizer();
  decl.validate();
  KernelPipeline r;
  const AttrValues& attrs = op.attrs;
  // 8-bit states on AVX2: 32 lanes per step by default (four ymm vectors: the map's encode
  // and decode chains are long, and one vector per step leaves the out-of-order window too
  // few independent ones). scripts/BENCHMARKS.md "8-bit states on AVX2: 32 lanes per step".
  std::map<std::string, int64_t> given = schedule;
  if (decl.storage().quant && target.natural_vector_size(Halide::Float(32)) == 8 &&
      !given.count("vector"))
    given["vector"] = 32;
  // 8-bit states: their inputs prefetched 512 elements ahead by default (the param's comment,
  // dsl/elementwise_schedule.cpp); every other recipe has no such prefetch.
  if (decl.storage().quant && !given.count("prefetch")) given["prefetch"] = 512;
  r.schedule_params = ElementwiseSchedule::resolve(given, target);
  if ((decl.sparse() || decl.is_multi_tensor() || decl.storage().quant) &&
      !ElementwiseSchedule::bucket_bounds(r.schedule_params).empty()) {
    throw std::invalid_argument(
        "op '" + op.name() +
        "': size-bucket schedule params (name@N) apply to dense "
        "elementwise ops only, not sparse, multi-tensor or 8-bit-state ones");
  }
  if ((decl.sparse() || decl.is_multi_tensor() || decl.storage().quant) &&
      r.schedule_params.at("double_buffer")) {
    throw std::invalid_argument("op '" + op.name() +
                                "': double_buffer applies to dense elementwise ops only, not "
                                "sparse, multi-tensor or 8-bit-state ones");
  }
  if (!decl.storage().quant && r.schedule_params.at("prefetch")) {
    throw std::invalid_argument("op '" + op.name() +
                                "': prefetch applies to 8-bit-state ops only (storage q8s, "
                                "q8ls, ...), not to this one's " +
                                decl.storage().tag() + " storage");
  }
  r.schedule_recipe = decl.sparse()            ? "sparse_rows"
                      : decl.is_multi_tensor() ? "multi_tensor"
                                               : ElementwiseSchedule::recipe_name();
  r.schedule_summary =
      decl.sparse()            ? ElementwiseSchedule::sparse_summary(r.schedule_params)
      : decl.is_multi_tensor() ? ElementwiseSchedule::multi_tensor_summary(r.schedule_params)
      : decl.storage().quant
          ? ElementwiseSchedule::blockwise_summary(r.schedule_params, decl.storage().block)
          : ElementwiseSchedule::summary(r.schedule_params);
  if (!scheduled) r.schedule_params.clear(), r.schedule_recipe.clear(), r.schedule_summary.clear();

  // Arguments in declaration order, named like the op's arguments.
  Bindings in;
  in.scheduled = scheduled;
  in.mask_compares = target.has_feature(Halide::Target::AVX512);
  in.permutes = permutes_of(target);
  in.rcp14 = has_rcp14(target);
  for (const auto& [a, dims] : argument_layout(op)) {
    const Halide::Type t = halide_type(a.dtype);
    if (a.role == Input::Role::scalar) {
      Halide::Param<> p(t, a.name);  // type chosen at run time: fp32, or int64 (global_step)
      // An autoscheduler wants an estimate on every Param (its value bounds nothing here).
      if (!scheduled)
        Halide::Internal::Parameter(p.parameter()).set_estimate(Halide::Internal::make_one(t));
      in.scalars[a.name] = p;
      r.arguments.push_back(p);
    } else {
      ImageParam im(t, dims, a.name);
      const bool one = a.role == Input::Role::result;  // one element
      const bool multi = decl.is_multi_tensor();       // (C, K) = (2048, 512)
      const bool scales = a.role == Input::Role::block_scale;
      for (int d = 0; d < dims; ++d) {
        im.dim(d).set_estimate(0, one      ? 1
                                  : scales ? (1 << 20) / decl.storage().block
                                  : multi && a.name == kSegmentsArg ? 512
                                  : multi                           ? (d == 0 ? 2048 : 512)
                                  : d == 0 && dims == 2             ? 128
                                                                    : 1 << 20);
        in.extents[a.name].push_back(im.dim(d).extent());
      }
      // 8-bit states: the runtime passes every buffer from element 0; known to Halide, a
      // vector's block index (i / block) folds to one scalar instead of a gather.
      if (decl.storage().quant && scheduled) im.dim(0).set_min(0);
      in.tensors[a.name] = im;
      in.images.emplace(a.name, im);
      r.arguments.push_back(im);
    }
    r.kernel_args.push_back({a.name,
                             a.role == Input::Role::scalar ? KernelArg::Kind::input_scalar
                                                           : KernelArg::Kind::input_buffer,
                             a.dtype, dims});
    const bool scalar = a.role == Input::Role::scalar;
    r.inputs.push_back(
        {a.name, a.role, a.dtype, scalar ? 0 : -1, a.description, {}, scalar ? a.domain : ""});
    if (a.quant) r.inputs.back().quant_map = a.quant->name();
  }
  for (const auto& a : decl.attrs()) {
    r.attrs.push_back(
        {a.name, a.type, a.default_value, attrs.at(a.name), a.description, a.choices});
  }

  // One Tuple-valued output: each element overwrites its state in place. Separate Outputs
  // moved 44 B/element for Adam instead of 28 and were correct in one order only.
  Func out = exact_func("updated");
  Definition def = define_optimizer(op, in, out, r.schedule_params);
  // A divide_below the update could not take (reductions, results, 8-bit states, double
  // buffering) is said, not described as exact divides.
  auto below = r.schedule_params.find("divide_below");
  if (scheduled && below != r.schedule_params.end() && below->second > 0 &&
      !divides(r.schedule_params) && !def.divides_by_size) {
    std::map<std::string, int64_t> shown = r.schedule_params;
    shown["divide_below"] = 0;
    // Only the dense summary describes divide_below.
    const bool dense = !decl.sparse() && !decl.is_multi_tensor() && !decl.storage().quant;
    if (dense) r.schedule_summary = ElementwiseSchedule::summary(shown);
    r.schedule_summary += ElementwiseSchedule::divide_below_declined(below->second);
  }
  r.algorithm = def.algorithm;
  r.reduction_reads = def.reduction_reads;
  r.per_tensor_reductions = def.per_tensor_reductions;
  const std::vector<std::string> states = output_order(op);
  std::map<std::string, registry::DType> dtypes;
  for (const auto& a : op.args) dtypes[a.name] = a.dtype;
  const auto buffers =
      out.defined() ? out.output_buffers() : std::vector<Halide::OutputImageParam>{};
  for (size_t k = 0; k < buffers.size(); ++k) {
    Halide::OutputImageParam ob = buffers[k];
    const int dims = ob.dimensions();
    if (decl.storage().quant && scheduled && k == 0) ob.dim(0).set_min(0);  // the Tuple's
    for (int d = 0; d < dims; ++d) {
      ob.dim(d).set_estimate(0, decl.is_multi_tensor() ? (d == 0 ? 2048 : 512)
                                : d == 0 && dims == 2  ? 128
                                                       : 1 << 20);
    }
    const registry::DType t = dtypes.at(states[k]);
    r.kernel_args.push_back({ob.name(), KernelArg::Kind::output_buffer, t, dims});
    r.outputs.push_back({states[k], ob.name(), states[k], t, -1, {}});
  }
  std::vector<Func> outs;
  if (out.defined()) outs.push_back(out);
  // 8-bit states' absmaxes after the states, overwriting their block_scale arguments.
  if (def.block_scales.defined()) {
    std::vector<std::string> quantized;
    for (const auto& s : states) {
      if (dtypes.at(s) == registry::DType::u8) quantized.push_back(s);
    }
    const auto scale_buffers = def.block_scales.output_buffers();
    for (size_t k = 0; k < scale_buffers.size(); ++k) {
      Halide::OutputImageParam ob = scale_buffers[k];
      ob.dim(0).set_estimate(0, (1 << 20) / decl.storage().block);
      if (scheduled && k == 0) ob.dim(0).set_min(0);
      const std::string arg = absmax_arg(quantized.at(k));
      r.kernel_args.push_back({ob.name(), KernelArg::Kind::output_buffer, registry::DType::f32, 1});
      r.outputs.push_back({arg, ob.name(), arg, registry::DType::f32, -1, {}});
    }
    outs.push_back(def.block_scales);
  }
  // Results after the states, in declaration order: one element each.
  const std::vector<std::string>& results = op.results;
  for (size_t k = 0; k < def.results.size(); ++k) {
    Halide::OutputImageParam ob = def.results[k].output_buffer();
    ob.dim(0).set_estimate(0, 1);
    r.kernel_args.push_back({ob.name(), KernelArg::Kind::output_buffer, registry::DType::f32, 1});
    r.outputs.push_back({results[k], ob.name(), results[k], registry::DType::f32, -1, {}});
    outs.push_back(def.results[k]);
  }
  r.pipeline = Halide::Pipeline(outs);
  add_output_prefetch_pass(r.pipeline, outs, r.algorithm);
  return r;
}

}  // namespace opforge::dsl
