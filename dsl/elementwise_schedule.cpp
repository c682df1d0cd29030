#include "dsl/elementwise_schedule.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "dsl/double_buffer.h"

namespace opforge::dsl {

using Halide::Expr;
using Halide::TailStrategy;
using Halide::Var;

const std::vector<ScheduleParamDecl>& ElementwiseSchedule::params() {
  static const std::vector<ScheduleParamDecl> p = {
      {"vector", 0, 0, 64,
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
      // Which wins can also depend on N: on an AMD EPYC (family 26), AVX-512, fp32 Adam, the
      // divide took 0.81x the estimate's time at 1e4, 0.93x at 1e5-3e5 and 1.05-1.12x at 1e7
      // (DRAM-bound), 1 and 2 threads (scripts/BENCHMARKS.md). The update's two forms are
      // copies of the loop nest specialized on N (exact_divides).
      {"divide_below", 0, 0, 1 << 30,
       "N below which 1/x is the exact divide, above it as `divide` says (0: no split; "
       "dense updates without reductions or results)"},
      // Off: 5-50x the time of the plain schedule for Adam and SGD at 1e5-1e7, grains of 4K
      // to 1M elements, both ISAs, 1 and 2 threads (scripts/BENCHMARKS.md, "Double
      // buffering"); here to try per op and machine with --set.
      {"double_buffer", 0, 0, 1,
       "stage the input tensors per block of db_grain elements in two slots, filled by an "
       "async producer task while the update runs on the other (dsl/double_buffer.h)"},
      // Floor 256: every slot costs a task pair and a semaphore wake (7-30 us measured).
      {"db_grain", 8192, 256, 1 << 20,
       "elements per double-buffer slot (rounded up to whole vectors x unroll)"},
      // The 8-bit kernels alternate a compute-heavy pass (decode, update, block maxima) with
      // their loads, and on one core of a 2-vCPU Xeon (family 6 model 207) they took more
      // than their compute time plus their bandwidth kernel's at 1e7. A prefetcht0 of grad and
      // var 512 elements ahead, from 2^21 elements: 0.80-0.91x the time there at 1e7 for
      // Adam, AdamW and Lion, both ISAs and maps (momentum 0.97-1.03x), 1.005-1.02x in cache
      // (the branch, the prefetch skipped), 1.03x at 1e6 (in L3) when run; prefetching the
      // codes did not help (scripts/BENCHMARKS.md, "the wide inputs prefetched").
      {"prefetch", 0, 0, 1 << 20,
       "8-bit-state ops: elements ahead at which the update prefetches its inputs wider than a "
       "byte (prefetcht0), 0: none (their default: 512)"},
      {"prefetch_from", 1 << 21, 0, 1 << 30,
       "8-bit-state ops: N at or above which those prefetches run"},
  };
  return p;
}

bool ElementwiseSchedule::bucketable(const std::string& name) {
  return name == "vector" || name == "unroll" || name == "tasks" || name == "chunk";
}

std::optional<std::pair<std::string, int64_t>> ElementwiseSchedule::split_bucket_key(
    const std::string& key) {
  const size_t at = key.find('@');
  if (at == std::string::npos) return std::nullopt;
  const std::string name = key.substr(0, at), bound = key.substr(at + 1);
  if (!bucketable(name)) {
    throw std::invalid_argument("schedule param '" + key + "': only vector, unroll, tasks and " +
                                "chunk take a size bucket (name@N)");
  }
  // Decimal digits, no leading zero: one spelling per bound (the text is in cache keys).
  const bool digits = !bound.empty() && bound.size() <= 10 && bound[0] != '0' &&
                      bound.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoll(bound) > (int64_t{1} << 31)) {
    throw std::invalid_argument("schedule param '" + key +
                                "': the bucket's N must be an integer in [1, 2^31], in decimal "
                                "digits without a leading zero");
  }
  return std::make_pair(name, std::stoll(bound));
}

std::map<std::string, int64_t> ElementwiseSchedule::resolve(
    const std::map<std::string, int64_t>& given, const Halide::Target& target) {
  std::map<std::string, int64_t> out;
  auto decl = [&](const std::string& name) -> const ScheduleParamDecl* {
    for (const auto& d : params()) {
      if (d.name == name) return &d;
    }
    return nullptr;
  };
  auto checked = [&](const ScheduleParamDecl& d, const std::string& key, int64_t v) {
    if (d.name == "vector" && v == 0) v = target.natural_vector_size(Halide::Float(32));
    return checked_param(d, key, v);
  };
  for (const auto& [k, v] : given) {
    const auto bucket = split_bucket_key(k);
    const ScheduleParamDecl* d = decl(bucket ? bucket->first : k);
    if (!d) throw std::invalid_argument("unknown schedule param '" + k + "'");
    if (bucket) out[k] = checked(*d, k, v);
  }
  for (const auto& d : params()) {
    auto it = given.find(d.name);
    out[d.name] = checked(d, d.name, it == given.end() ? d.default_value : it->second);
  }
  return out;
}

std::vector<int64_t> ElementwiseSchedule::bucket_bounds(const std::map<std::string, int64_t>& p) {
  std::set<int64_t> b;
  for (const auto& [k, v] : p) {
    if (const auto bucket = split_bucket_key(k)) b.insert(bucket->second);
  }
  return {b.begin(), b.end()};
}

std::map<std::string, int64_t> ElementwiseSchedule::params_at(
    const std::map<std::string, int64_t>& p, int64_t n) {
  std::map<std::string, int64_t> out, bound_of;
  for (const auto& [k, v] : p) {
    if (k.find('@') == std::string::npos) out[k] = v;
  }
  for (const auto& [k, v] : p) {
    const auto bucket = split_bucket_key(k);
    if (!bucket || bucket->second > n) continue;
    // The largest bound at or below n wins.
    if (!bound_of.count(bucket->first) || bound_of[bucket->first] < bucket->second) {
      bound_of[bucket->first] = bucket->second;
      out[bucket->first] = v;
    }
  }
  return out;
}

Expr ElementwiseSchedule::exact_divides(const std::map<std::string, int64_t>& p, const Expr& n) {
  auto value = [&](const char* name) {
    auto it = p.find(name);
    return it == p.end() ? int64_t{0} : it->second;
  };
  // divide=1 divides everywhere already; the double-buffered copies share their producers'
  // loops, which two forms of the update would double.
  if (value("divide_below") <= 0 || value("divide") || value("double_buffer")) return Expr();
  return n < static_cast<int>(value("divide_below"));
}

void ElementwiseSchedule::apply(Halide::Func out, const Var& i,
                                const std::map<std::string, int64_t>& p,
                                const std::vector<Expr>& fast_paths, Expr n,
                                const std::vector<Halide::Func>& stage, const Expr& exact) {
  const std::map<std::string, int64_t> base = params_at(p, 0);
  const int serial_below = static_cast<int>(base.at("serial_below"));
  if (!n.defined()) n = out.output_buffers()[0].dim(0).extent();
  // Double buffering: every copy, serial or parallel, runs its range (one range when serial)
  // in blocks of the grain; the staged inputs are stored per range and computed per block,
  // at loops of the same names in every copy (the producers have one schedule).
  const bool staged = base.at("double_buffer") != 0 && !stage.empty();
  Var db_range("db_range"), db_block("db_block");
  auto grain_of = [&](const std::map<std::string, int64_t>& q) {
    const int64_t step = q.at("vector") * q.at("unroll");
    return static_cast<int>((base.at("db_grain") + step - 1) / step * step);
  };
  int fold_grain = grain_of(base);
  for (int64_t b : bucket_bounds(p)) fold_grain = std::max(fold_grain, grain_of(params_at(p, b)));

  // Split names must be unique across all copies of the definition: copy k uses suffix k.
  int copy = 0;
  auto vectorize_range = [&](Halide::Stage s, const Var& v,
                             const std::map<std::string, int64_t>& q) {
    const int vec = static_cast<int>(q.at("vector")), unroll = static_cast<int>(q.at("unroll"));
    if (unroll > 1) {
      Var vo("vo" + std::to_string(copy)), vi("vi" + std::to_string(copy));
      s.split(v, vo, vi, vec * unroll, TailStrategy::GuardWithIf)
          .vectorize(vi, vec, TailStrategy::GuardWithIf)
          .unroll(vi);
    } else {
      s.vectorize(v, vec, TailStrategy::GuardWithIf);
    }
  };
  // A range of `v` in vectors; with double buffering, in blocks of the grain first (at most
  // `range` elements: a block wider than a constant range split gave wrong results, the
  // staged slots misplaced from the third range on; Halide 14, measured).
  auto vectorize = [&](Halide::Stage s, const Var& v, const std::map<std::string, int64_t>& q,
                       int range = 0) {
    if (!staged) return vectorize_range(s, v, q);
    Var bi("bi" + std::to_string(copy));
    const int block = range > 0 ? std::min(grain_of(q), range) : grain_of(q);
    s.split(v, db_block, bi, block, TailStrategy::GuardWithIf);
    vectorize_range(s, bi, q);
  };
  // The serial path as one range (db_range of extent 1), so its blocks sit under a loop of
  // that name too.
  auto serial = [&](Halide::Stage s, const std::map<std::string, int64_t>& q) {
    if (!staged) return vectorize(s, i, q);
    Var ii("ii" + std::to_string(copy));
    s.split(i, db_range, ii, Halide::max(n, 1), TailStrategy::GuardWithIf);
    vectorize(s, ii, q);
  };
  auto splits = [](const std::map<std::string, int64_t>& q) {
    return q.at("tasks") > 1 || q.at("chunk") > 0;
  };
  // Parallel chunks when q splits, else one serial loop.
  auto range = [&](Halide::Stage s, const std::map<std::string, int64_t>& q) {
    ++copy;
    if (!splits(q)) return serial(s, q);
    const int step = static_cast<int>(q.at("vector") * q.at("unroll"));
    const int tasks = static_cast<int>(q.at("tasks"));
    const int fixed_chunk = static_cast<int>(q.at("chunk"));
    Var io = staged ? db_range : Var("io" + std::to_string(copy));
    Var ii("ii" + std::to_string(copy));
    Expr chunk = fixed_chunk > 0 ? Expr(((fixed_chunk + step - 1) / step) * step)
                                 : ((n + tasks * step - 1) / (tasks * step)) * step;
    s.split(i, io, ii, chunk, TailStrategy::GuardWithIf).parallel(io);
    vectorize(s, ii, q, fixed_chunk > 0 ? ((fixed_chunk + step - 1) / step) * step : 0);
  };
  // Specializations, checked in this order: each fast path with large N (its size buckets,
  // largest first, then the rest of large N), each fast path (serial), large N (buckets, then
  // the rest), then the default (serial). Flat conditions rather than nested
  // specializations: a specialization of a specialization scheduled the parent. Buckets
  // apply to the parallel path only; below serial_below the serial loop keeps the base values.
  const std::map<std::string, int64_t> big_base = params_at(p, serial_below);
  const bool split = splits(big_base);
  const Expr big = serial_below > 0 ? n >= serial_below : Halide::Internal::const_true();
  const std::vector<int64_t> bounds = bucket_bounds(p);
  const bool all_parallel = split && serial_below == 0;
  // `cond` undefined: no fast path.
  auto both = [](const Expr& cond, const Expr& size) {
    return cond.defined() ? cond && size : size;
  };
  // Every copy under `prefix` (undefined: none): with exact_divides, the update's two forms
  // each get the whole set, so that each copy's condition decides the form.
  auto specialize_all = [&](const Expr& prefix) {
    auto under = [&](const Expr& cond) {
      return !prefix.defined() ? cond : cond.defined() ? prefix && cond : prefix;
    };
    auto large = [&](const Expr& cond, bool with_rest) {
      for (auto b = bounds.rbegin(); b != bounds.rend() && *b > serial_below; ++b) {
        range(out.specialize(under(both(cond, n >= static_cast<int>(*b)))), params_at(p, *b));
      }
      if (split && with_rest) range(out.specialize(under(both(cond, big))), big_base);
    };
    std::vector<Halide::Stage> serial_copies;
    for (const Expr& cond : fast_paths) {
      large(cond, true);
      if (!split || serial_below > 0) serial_copies.push_back(out.specialize(under(cond)));
    }
    large(Expr(), !all_parallel);
    for (auto& s : serial_copies) ++copy, serial(s, base);
    Halide::Stage rest = prefix.defined() ? out.specialize(prefix) : Halide::Stage(out);
    if (all_parallel) {
      range(rest, big_base);
    } else {
      ++copy;
      serial(rest, base);
    }
  };
  if (exact.defined()) {
    // Flat: (exact && c) for each condition c, then (!exact && c); the default is unreachable.
    specialize_all(exact);
    specialize_all(!exact);
    out.specialize_fail("opforge: N neither below nor at or above divide_below");
  } else {
    specialize_all(Expr());
  }
  const int vec = static_cast<int>(base.at("vector"));
  for (Halide::Func f : stage)
    double_buffer(f, out, db_range, db_block, f.args()[0], fold_grain, vec);
}

std::vector<Halide::Func> ElementwiseSchedule::staged_inputs(
    const std::vector<Halide::Func>& inputs, const Halide::Func& reader,
    const std::map<std::string, int64_t>& p) {
  std::vector<Halide::Func> out;
  if (p.at("double_buffer")) {
    for (Halide::Func f : inputs) out.push_back(f.in(reader));
  }
  return out;
}

void ElementwiseSchedule::apply_blockwise(Halide::Func out, Halide::Func absmax_out,
                                          Halide::Func lanes, Halide::Func scales,
                                          const std::vector<Halide::Func>& per_block, const Var& i,
                                          int block, const std::map<std::string, int64_t>& p) {
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
  // Bounded to the whole block, so that every block's loops have a constant trip count (the
  // tail block's extra elements read the clamped last element and are never stored): 8-bit
  // Adam 0.97-0.99x the time in cache and at 1e7, both maps, AVX-512 and AVX2 (2-vCPU AMD
  // EPYC, paired medians). On the stack: with extents that followed the tail block, Halide 14
  // put these buffers on the heap, a malloc/free per block (8-bit Adam at 1e7: 26 ms, not 18).
  for (Halide::Func f : per_block) {
    f.compute_at(out, bi)
        .bound(f.args()[0], 0, block)
        .store_in(Halide::MemoryType::Stack)
        .vectorize(f.args()[0], vec, TailStrategy::GuardWithIf);
  }
  // The maxima in a pass of their own (32 vector loads per block from L1). Fused into the new
  // values' loop instead (compute_with, the new values as an update over (lane, vector) that
  // the maxima recompute and LLVM merges; scripts/BENCHMARKS.md): 0.97-0.99x the time with
  // AVX-512, 0.99-1.09x with AVX2 (Zen 5, in cache); not kept.
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
         "-wide vectors, 16-lane absmax, codes and absmax stored in one pass" +
         (p.at("prefetch") > 0
              ? "; inputs wider than a byte prefetched " + std::to_string(p.at("prefetch")) +
                    " elements ahead from N = " + std::to_string(p.at("prefetch_from"))
              : std::string());
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

std::string ElementwiseSchedule::param_names() {
  std::string s;
  for (const auto& d : params()) s += (s.empty() ? "" : ", ") + d.name;
  return s;
}

namespace {
constexpr const char* kDeclined =
    " not applied (one form of 1/x with reductions, results, 8-bit states or double buffering)";
}  // namespace

std::string ElementwiseSchedule::divide_below_declined(int64_t below) {
  return "; divide_below " + std::to_string(below) + kDeclined;
}

bool ElementwiseSchedule::says_divide_below_declined(const std::string& summary) {
  return summary.find(kDeclined) != std::string::npos;
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
  for (int64_t b : bucket_bounds(p)) {
    s += "; N >= " + std::to_string(b) + ":";
    const char* sep = " ";
    for (const auto& [k, v] : p) {
      const auto bucket = split_bucket_key(k);
      if (!bucket || bucket->second != b) continue;
      s += sep + bucket->first + " " + std::to_string(v);
      sep = ", ";
    }
  }
  if (p.at("divide")) {
    s += "; exact divides";
  } else if (p.count("divide_below") && p.at("divide_below") > 0) {
    s += "; exact divides below N = " + std::to_string(p.at("divide_below"));
  }
  if (p.at("double_buffer"))
    s += "; " + double_buffer_summary("input tensors", static_cast<int>(p.at("db_grain")),
                                      "elements per range");
  return s + "; GuardWithIf tails (safe in place)";
}

}  // namespace opforge::dsl
