#include "dsl/elementwise_schedule.h"

#include <stdexcept>

namespace opforge::dsl {

using Halide::Expr;
using Halide::TailStrategy;
using Halide::Var;

const std::vector<ScheduleParamDecl>& ElementwiseSchedule::params() {
  static const std::vector<ScheduleParamDecl> p = {
      {"vector", 0, 1, 64,
       "vector width in elements (0: the target's natural fp32 width, 16 on AVX-512, 8 on AVX2)"},
      {"unroll", 1, 1, 8, "vectors per inner loop iteration"},
      // Adam, 2 threads, tasks 2 / 8 / 32: 17.2 / 17.6 / 19.8 us at 1e5, 192 / 225 / 217 us at
      // 1e6, 5.0 / 4.8 / 4.9 ms at 1e7 (noise ~10%); 8 keeps a stolen core from idling half
      // the update, 32 adds dispatch cost at 1e5.
      {"tasks", 8, 1, 1024, "parallel chunks for large N, sized at run time"},
      // A fixed chunk leaves the last task running masked vectors past the data when N is
      // not a multiple (Adam at N = 1e4: 400-600 us); it is here for previews and experiments.
      {"chunk", 0, 0, 1 << 30,
       "elements per parallel task; 0: ceil(N / tasks) rounded up to whole vectors at run time"},
      {"serial_below", 16384, 0, 1 << 30,
       "N below which a serial path runs (a thread-pool dispatch costs 3-8 us)"},
      // Which is faster depends on the CPU's divider, not the ISA (measurements: dsl/math.h).
      {"divide", 0, 0, 1,
       "1/x in the update as an exact divide (1) or the rcp estimate and a Newton step (0)"},
  };
  return p;
}

std::map<std::string, int64_t> ElementwiseSchedule::resolve(
    const std::map<std::string, int64_t>& given, const Halide::Target& target) {
  std::map<std::string, int64_t> out;
  for (const auto& [k, v] : given) {
    bool known = false;
    for (const auto& d : params()) known = known || d.name == k;
    if (!known) throw std::invalid_argument("unknown schedule param '" + k + "'");
  }
  for (const auto& d : params()) {
    auto it = given.find(d.name);
    int64_t v = it == given.end() ? d.default_value : it->second;
    if (d.name == "vector" && v == 0) v = target.natural_vector_size(Halide::Float(32));
    if (v < d.min || v > d.max) {
      throw std::invalid_argument("schedule param '" + d.name + "' = " + std::to_string(v) +
                                  " is outside [" + std::to_string(d.min) + ", " +
                                  std::to_string(d.max) + "]");
    }
    out[d.name] = v;
  }
  return out;
}

void ElementwiseSchedule::apply(Halide::Func out, const Var& i,
                                const std::map<std::string, int64_t>& p,
                                const std::vector<Expr>& fast_paths, Expr n) {
  const int vec = static_cast<int>(p.at("vector"));
  const int unroll = static_cast<int>(p.at("unroll"));
  const int tasks = static_cast<int>(p.at("tasks"));
  const int serial_below = static_cast<int>(p.at("serial_below"));
  const int fixed_chunk = static_cast<int>(p.at("chunk"));
  const int step = vec * unroll;
  if (!n.defined()) n = out.output_buffers()[0].dim(0).extent();

  // Split names must be unique across all copies of the definition: copy k uses suffix k.
  int copy = 0;
  auto vectorize = [&](Halide::Stage s, const Var& v) {
    if (unroll > 1) {
      Var vo("vo" + std::to_string(copy)), vi("vi" + std::to_string(copy));
      s.split(v, vo, vi, step, TailStrategy::GuardWithIf)
          .vectorize(vi, vec, TailStrategy::GuardWithIf)
          .unroll(vi);
    } else {
      s.vectorize(v, vec, TailStrategy::GuardWithIf);
    }
  };
  // Specializations, checked in this order: each fast path with large N (parallel), each
  // fast path (serial), large N (parallel), then the default (serial). Flat conditions rather
  // than nested specializations: a specialization of a specialization scheduled the parent.
  auto parallel = [&](Halide::Stage s) {
    ++copy;
    Var io("io" + std::to_string(copy)), ii("ii" + std::to_string(copy));
    Expr chunk = fixed_chunk > 0 ? Expr(((fixed_chunk + step - 1) / step) * step)
                                 : ((n + tasks * step - 1) / (tasks * step)) * step;
    s.split(i, io, ii, chunk, TailStrategy::GuardWithIf).parallel(io);
    vectorize(s, ii);
  };
  auto serial = [&](Halide::Stage s) {
    ++copy;
    vectorize(s, i);
  };
  const bool split = tasks > 1 || fixed_chunk > 0;
  Expr big = serial_below > 0 ? n >= serial_below : Halide::Internal::const_true();
  std::vector<Halide::Stage> serial_copies;
  for (const Expr& cond : fast_paths) {
    if (split) parallel(out.specialize(cond && big));
    if (!split || serial_below > 0) serial_copies.push_back(out.specialize(cond));
  }
  if (split && serial_below > 0) parallel(out.specialize(big));
  for (auto& s : serial_copies) serial(s);
  if (split && serial_below == 0) {
    parallel(out);
  } else {
    serial(out);
  }
}

void ElementwiseSchedule::apply_blockwise(Halide::Func out, Halide::Func absmax_out,
                                          Halide::Func values, Halide::Func lanes,
                                          Halide::Func scales,
                                          const std::vector<Halide::Func>& dequantized,
                                          const Var& i, int block,
                                          const std::map<std::string, int64_t>& p) {
  const int vec = static_cast<int>(p.at("vector"));
  const int tasks = static_cast<int>(p.at("tasks"));
  const Expr blocks = absmax_out.output_buffers()[0].dim(0).extent();
  // Whole blocks per task; below serial_below elements one task takes them all.
  const Expr per_task =
      Halide::max((blocks + tasks - 1) / tasks,
                  Expr(static_cast<int>((p.at("serial_below") + block - 1) / block)));
  // The block var is absmax_out's own, so that compute_with finds the same loop names.
  // Producers per block: per group of 4 blocks instead, 8-bit Adam at 1e7 took 20 ms, not 14.
  const Var b = absmax_out.args()[0];
  Var bo("qbo"), bi("qbi"), ii("qii");
  out.split(i, b, ii, block, TailStrategy::GuardWithIf)
      .split(b, bo, bi, per_task, TailStrategy::GuardWithIf)
      .vectorize(ii, vec, TailStrategy::GuardWithIf)
      .parallel(bo);
  absmax_out.split(b, bo, bi, per_task, TailStrategy::GuardWithIf).parallel(bo);
  // Stored after the block's codes, from the same block_scale values.
  absmax_out.compute_with(out, bi);
  // On the stack: their extents depend on the tail block, and Halide 14 puts such buffers
  // on the heap, a malloc/free per block (8-bit Adam at 1e7: 26 ms instead of 18).
  values.compute_at(out, bi)
      .store_in(Halide::MemoryType::Stack)
      .vectorize(values.args()[0], vec, TailStrategy::GuardWithIf);
  // The old states' decoded values once per element (each Tuple element of `values` would
  // decode its own copy).
  for (Halide::Func deq : dequantized) {
    deq.compute_at(out, bi)
        .store_in(Halide::MemoryType::Stack)
        .vectorize(deq.args()[0], vec, TailStrategy::GuardWithIf);
  }
  const Var l = lanes.args()[0];
  lanes.compute_at(out, bi).store_in(Halide::MemoryType::Stack).vectorize(l);
  lanes.update().vectorize(l);
  scales.compute_at(out, bi).store_in(Halide::MemoryType::Stack);
}

std::string ElementwiseSchedule::blockwise_summary(const std::map<std::string, int64_t>& p,
                                                   int block) {
  return "8-bit states: blocks of " + std::to_string(block) + " elements in " +
         std::to_string(p.at("tasks")) + " parallel runs (one below " +
         std::to_string(p.at("serial_below")) + " elements); per block new values in " +
         std::to_string(p.at("vector")) +
         "-wide vectors, 16-lane absmax, codes and absmax stored in one pass";
}

void ElementwiseSchedule::apply_reduction(Halide::Func total, const Halide::RDom& r,
                                          const std::map<std::string, int64_t>& p) {
  const int vec = static_cast<int>(p.at("vector"));
  const int tasks = static_cast<int>(p.at("tasks"));
  total.compute_root();
  Expr n = r.x.extent();
  // Chunks of whole vectors; fewer than 2 chunks of work per task stays on one task.
  Expr chunk = Halide::max(((n + tasks * vec - 1) / (tasks * vec)) * vec,
                           static_cast<int>(p.at("serial_below")) / tasks);
  Halide::RVar ro("ro"), ri("ri"), rio("rio"), rii("rii");
  Var u("u"), lane("lane");
  Halide::Func partial = total.update().split(r.x, ro, ri, chunk).rfactor(ro, u);
  partial.compute_root().update().parallel(u);
  Halide::Func lanes = partial.update().split(ri, rio, rii, vec).rfactor(rii, lane);
  lanes.compute_at(partial, u).vectorize(lane).update().vectorize(lane);
}

void ElementwiseSchedule::apply_sparse(Halide::Func out, const Var& col,
                                       const std::map<std::string, int64_t>& p,
                                       const std::vector<Expr>& fast_paths) {
  // Index loop outermost, whole rows inside it: Halide's default put the column chunks
  // outside the index loop, striding over every row once per chunk (sparse_apply_adagrad,
  // 1e5 rows x 128 columns: 41 ms; row by row: 19 ms). Parallel column chunks (legal:
  // duplicates only meet in the same column) were 3.5x slower (68 ms): each task strides over
  // every row for one cache line of it.
  const Halide::RVar k(out.function().update(0).schedule().rvars().at(0).var);
  int copy = 0;
  auto schedule = [&](Halide::Stage u) {
    ++copy;
    Var co("co" + std::to_string(copy)), ci("ci" + std::to_string(copy));
    u.split(col, co, ci, static_cast<int>(p.at("vector")), TailStrategy::GuardWithIf)
        .vectorize(ci)
        .reorder(ci, co, k);
  };
  for (const Expr& cond : fast_paths) schedule(out.update().specialize(cond));
  schedule(out.update());
}

namespace {
// Chunks per parallel run: about 4 runs per task, at least one chunk.
Expr chunks_per_run(const Expr& chunks, const std::map<std::string, int64_t>& p) {
  const int runs = 4 * static_cast<int>(p.at("tasks"));
  return Halide::max(1, (chunks + runs - 1) / runs);
}
}  // namespace

void ElementwiseSchedule::apply_multi_tensor(Halide::Func out, const Var& c, const Var& k,
                                             const Expr& chunks,
                                             const std::map<std::string, int64_t>& p,
                                             const std::vector<Expr>& fast_paths) {
  const int vec = static_cast<int>(p.at("vector"));
  int copy = 0;
  auto schedule = [&](Halide::Stage s) {
    ++copy;
    Var ko("ko" + std::to_string(copy)), ki("ki" + std::to_string(copy));
    Var co("co" + std::to_string(copy)), ci("ci" + std::to_string(copy));
    s.split(k, ko, ki, chunks_per_run(chunks, p), TailStrategy::GuardWithIf)
        .split(c, co, ci, vec, TailStrategy::GuardWithIf)
        .vectorize(ci)
        .reorder(ci, co, ki, ko)
        .parallel(ko);
  };
  for (const Expr& cond : fast_paths) schedule(out.specialize(cond));
  schedule(out);
}

void ElementwiseSchedule::apply_multi_tensor_sums(Halide::Func chunk, Halide::Func lanes,
                                                  const Var& lane, const Var& k, const Expr& chunks,
                                                  const std::map<std::string, int64_t>& p) {
  Var ko("sko"), ki("ski");
  chunk.compute_root()
      .split(k, ko, ki, chunks_per_run(chunks, p), TailStrategy::GuardWithIf)
      .parallel(ko);
  chunk.update()
      .split(k, ko, ki, chunks_per_run(chunks, p), TailStrategy::GuardWithIf)
      .parallel(ko);
  lanes.compute_at(chunk, ki).vectorize(lane).update().vectorize(lane);
}

std::string ElementwiseSchedule::multi_tensor_summary(const std::map<std::string, int64_t>& p) {
  return "multi-tensor: chunks of C elements in " + std::to_string(4 * p.at("tasks")) +
         " parallel runs; " + std::to_string(p.at("vector")) +
         "-wide vectors per chunk; per-chunk fp64 sums in 16 lanes, then per tensor";
}

std::string ElementwiseSchedule::sparse_summary(const std::map<std::string, int64_t>& p) {
  return "indexed rows, serial in index order (duplicates apply in turn); each row in " +
         std::to_string(p.at("vector")) + "-wide vectors over the columns, GuardWithIf tails";
}

std::string ElementwiseSchedule::summary(const std::map<std::string, int64_t>& p) {
  std::string s = "1-D, " + std::to_string(p.at("vector")) + "-wide vectors";
  if (p.at("unroll") > 1) s += " x" + std::to_string(p.at("unroll")) + " unrolled";
  if (p.at("chunk") > 0) {
    s += "; N >= " + std::to_string(p.at("serial_below")) + ": parallel chunks of " +
         std::to_string(p.at("chunk")) + " elements; smaller N: serial";
  } else if (p.at("tasks") > 1) {
    s += "; N >= " + std::to_string(p.at("serial_below")) + ": " + std::to_string(p.at("tasks")) +
         " parallel chunks sized at run time; smaller N: serial";
  } else {
    s += "; serial";
  }
  if (p.at("divide")) s += "; exact divides";
  return s + "; GuardWithIf tails (safe in place)";
}

}  // namespace opforge::dsl
