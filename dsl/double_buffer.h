// Double buffering: a producer's values for the consumer's next block are computed on another
// thread while the consumer works on this block, in a buffer of two slots. Halide's directives
// (store_at + compute_at + fold_storage + async), put together once so every recipe stages
// the same way:
//
//   staged.store_at(consumer, outer)        // one two-slot buffer per `outer` iteration
//         .compute_at(consumer, block)      // a slot filled per `block` iteration
//         .fold_storage(dim, 2 * grain)     // two slots of `grain` along `dim`
//         .async();                         // the producer runs as its own task
//
// Halide 14 lowers this to a producer/consumer task pair per `outer` iteration that hands
// slots over with semaphores. The traps it avoids:
// - async() together with a prefetch() in the consumer's loop nest hangs in Halide 14 (the
//   producer task is dropped and the consumer waits forever): double_buffer throws when the
//   consumer has a prefetch directive.
// - every slot costs a semaphore hand-off between two threads (wake, cache-line ping-pong):
//   a slot of one 4 KB row made layer_norm 35-38 ms instead of 1.2-7 ms. The grain is a
//   parameter so that a slot is worth the hand-off; callers' params set its floor.
// - a block split wider than a constant split of the range around it (blocks of 4096 in
//   chunks of 1000) gave wrong values from the third chunk on, in place or not, async or
//   not (Halide 14, measured); with the range split sized at run time it did not. Callers
//   keep a block within a constant range (the elementwise recipe: min(grain, chunk)).
// - a slot narrower than one vector of the consumer failed the fold's run-time order check:
//   double_buffer refuses a grain below `vector` when the fold is along the vectorized dim.
// - the fold is checked at run time (halide_error_bad_fold) when a slot's footprint exceeds
//   `grain` along `dim`: a consumer reading a little past its block (softmax's next row)
//   needs the footprint within the two slots, which this folding of 2 * grain gives when the
//   overhang is at most `grain`.
// - with no thread to spare (both cores busy with the consumer's parallel tasks) the producer
//   task waits its turn and the pair runs as a staged copy: an extra pass through L1/L2.
// What it costs, measured (2-vCPU AMD EPYC, scripts/BENCHMARKS.md "Double buffering"): each
// slot is a halide_do_parallel_tasks call on each side plus a semaphore wait, 7-17 us per
// slot for the row ops and up to ~28 us per input and slot for Adam; and the producer's
// stores into the fold go through a per-lane `% fold` (a scatter), the slot's start reaching
// the async task without its alignment. No op of the library hid that: off everywhere.
// Measure before keeping it (the measured tables are beside each recipe).
#pragma once

#include <Halide.h>

#include <string>

namespace opforge::dsl {

// Stages `staged` (typically `input.in(consumer)`, a wrapper the consumer reads instead of
// the input) as above: stored per `outer` loop of `consumer`, computed per `block` loop,
// folded over its `dim` into two slots of `grain`, vectorized `vector` wide along its dim 0
// (0: its vectorization is the caller's), async unless `async` is false (a synchronous
// staging copy, for comparison). Throws std::invalid_argument naming the Func for a grain < 1
// (or below `vector` when `dim` is its dim 0), or a consumer with a prefetch.
void double_buffer(Halide::Func staged, const Halide::Func& consumer, const Halide::Var& outer,
                   const Halide::Var& block, const Halide::Var& dim, int grain, int vector,
                   bool async = true);
// The same with the levels given (store in one Func's loop, compute in another's, as a GEMM
// packs a panel per K chunk of a tile); `consumer`: the Func whose prefetches are checked.
void double_buffer(Halide::Func staged, const Halide::Func& consumer,
                   const Halide::LoopLevel& store, const Halide::LoopLevel& compute,
                   const Halide::Var& dim, int grain, int vector, bool async = true);

// One line for a schedule summary: "double-buffered <what> (2 slots of <grain> <unit>, async)".
std::string double_buffer_summary(const std::string& what, int grain, const std::string& unit,
                                  bool async = true);

}  // namespace opforge::dsl
