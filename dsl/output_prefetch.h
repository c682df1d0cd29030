// Write prefetches of an output from inside another loop: "while this pass computes element
// (c, r) of a scratch Func, bring output element (c, r)'s cache line in", so that the later
// pass that stores the output finds its lines in cache instead of stalling on each line's
// read-for-ownership. Halide 14's prefetch() can only fetch what the loop it sits in reads
// (an output is never read there) and emits prefetchnta every 64 elements (a quarter of
// fp32's lines), so this is a marker in the algorithm plus a custom lowering pass:
//
//   e(c, r) = with_output_prefetch(exp(...), "y", {c, r});   // algorithm: value + marker
//   add_output_prefetch_pass(pipeline, outputs, algorithm);  // after Pipeline(outputs)
//
// The pass replaces each marker by its value and puts one prefetch of y(c, r) (lane 0 of a
// vector) before the store that held it. A marker that reaches code generation (no pass,
// or one the pass could not place) fails the compile: an unknown extern call.
//
// The same pass places read prefetches of an input some elements ahead (with_input_prefetch):
// one prefetcht0 per line of the vector, for a compute-heavy loop that keeps too few of its
// loads in flight for the hardware prefetchers alone (the 8-bit optimizer states).
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

namespace opforge::dsl {

// `value`, marked to prefetch element `coords` (innermost first) of output `output` where it
// is stored.
Halide::Expr with_output_prefetch(const Halide::Expr& value, const std::string& output,
                                  const std::vector<Halide::Expr>& coords);

// `value`, marked to prefetch element `element` (a flat offset from the buffer's start) of
// input `input` where it is stored.
Halide::Expr with_input_prefetch(const Halide::Expr& value, const Halide::ImageParam& input,
                                 const Halide::Expr& element, const Halide::Expr& when);

// Adds the lowering pass to `p` when a definition reachable from `outputs` holds a marker
// (`algorithm`: the pipeline's algorithm text, where the markers show by name). Compiling
// `p` then throws std::invalid_argument for a marker naming no output, with the wrong number
// of coords, or outside any store or let.
void add_output_prefetch_pass(Halide::Pipeline& p, const std::vector<Halide::Func>& outputs,
                              const std::string& algorithm);

}  // namespace opforge::dsl
