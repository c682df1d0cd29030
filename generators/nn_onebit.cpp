// 1-bit compression with error feedback (1-bit Adam, Tang et al. ICML 2021; the momentum a
// rank sends, and the server's average it sends back), over chunks of C elements:
//
//   onebit_compress(x[G, C], err[G, C]) -> (bits[G, C/32], scale[G], err_out[G, C])
//     s = x + err (one fp32 add); scale[g] = mean over the chunk of |s| (the least-squares
//     scale of a sign code; DeepSpeed uses the RMS); bit c of the chunk is 1 where s >= 0
//     (-0 included; NaN gives 0); err_out = s - scale * (bit ? 1 : -1), the error fed back
//     next time. The bits of 32 consecutive elements are one int32 word, element 32 w + j in
//     bit j: in memory (little-endian) element 8 i + j is bit j of byte i, 8 per byte, as
//     numpy.packbits(..., bitorder="little") and the wire format DeepSpeed's packbits uses.
//   onebit_decompress(bits[K, G, C/32], scale[K, G], weight) -> y[G, C]
//     y = weight * sum over k of scale[k, g] * (bit ? 1 : -1): K ranks' codes of one slice
//     averaged (weight 1/K) in one pass, or one code decompressed (K = 1, weight 1).
//
// err_out is its own tensor: an NN op's outputs never alias its inputs, and here aliasing
// would be wrong besides (the chunk's bits and scale are fused into err_out's loop over the
// chunks and read err after err_out's element loop). The caller swaps two buffers.
//
// Schedules (both memory-bound; C % 32 == 0, checked, so every 32-lane step is whole):
//   compress: chunks in `tasks` parallel blocks; per chunk, |s| summed in 32 fp32 lanes (two
//     or four vector accumulators), then err_out in vectors, then the chunk's words, each a
//     32-lane horizontal add of the bit values (the chunk, 16 KB of x and err at C = 2048, is
//     read from L1 by the second and third passes); scale and bits are computed with err_out
//     at the chunk loop (compute_with), so one loop over the chunks writes all three. Serial
//     below G * C = serial_below (a thread-pool wake costs 3-47 us).
//   decompress: rows in `tasks` parallel blocks; per 32 elements (one word), the K terms in
//     32-lane registers: a broadcast word, a per-lane shift and mask, a select of +-scale.
// Measured (`opforge bench`, the examples: 2048 chunks of 2048, 2 threads, cold caches,
// medians of 301 interleaved calls, Intel Xeon family 6 model 207, 2 vCPUs, quiet host), %
// of the same-run same-traffic kernel's GB/s:
//                                            AVX-512   AVX2
//   onebit_compress (bandwidth_add)            74%      76%
//   onebit_decompress, K = 1 (bandwidth_copy)  76%      77%
//   onebit_decompress, K = 4 of 512 chunks     80%       -
// compress: L2-resident (32 x 2048, 1 thread, warm) it takes 2.0x (AVX-512) and 2.2x (AVX2)
// the add's time: its three passes over the chunk (sum, err_out, words) compute while no
// DRAM load of that core is in flight, the softmax situation (nn_norms.cpp). Tried, not
// kept: the words in the sum's pass (word's update fused with the sum's step k): Halide 14
// refuses compute_with between an impure RVar (the sum's k) and a pure one (the word index).
// Kept though within noise: err_out's scale divided once per chunk, not once per vector.
// decompress writes 4 B per element and reads 1/8 B: the stores' read-for-ownership makes a
// write stream cost about what a copy's read + write do, hence ~75% of the copy's GB/s.
#include "generators/nn_ops.h"

namespace opforge::generators {

using dsl::NnArgs;
using dsl::NnKernel;
using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::TailStrategy;
using Halide::Var;

namespace {

constexpr int kWord = 32;  // signs per int32 word

struct OnebitParams {
  int vector;        // fp32 lanes of the target (16 on AVX-512, 8 on AVX2)
  int tasks;         // parallel blocks of chunks (rows), ceil(G / tasks) each
  int serial_below;  // G * C below which one serial loop runs
  std::map<std::string, int64_t> as_map() const {
    return {{"vector", vector}, {"tasks", tasks}, {"serial_below", serial_below}};
  }
};

OnebitParams onebit_params(const Halide::Target& t) {
  return {t.natural_vector_size(Halide::Float(32)), 8, 1 << 15};
}

// Every tensor starts at 0 (the runtime passes dense buffers so): the simplifier then sees
// that 32 consecutive elements starting at a multiple of 32 share one word.
void zero_mins(const Halide::OutputImageParam& b, int dims) {
  for (int d = 0; d < dims; ++d) b.dim(d).set_min(0);
}

NnKernel build_compress(const NnArgs& a) {
  Halide::ImageParam x = a.tensors.at("x"), err = a.tensors.at("err");
  zero_mins(x, 2);
  zero_mins(err, 2);
  const Expr C = x.dim(0).extent(), G = x.dim(1).extent();
  Var c("c"), g("g"), u("u"), w("w");

  // Algorithm.
  Func s("s");
  s(c, g) = x(c, g) + err(c, g);
  // mean |s| per chunk: 32 partial sums (C is a multiple of 32), folded in lane order.
  Func lanes("abs_lanes"), mean("mean_abs");
  RDom k(0, C / kWord, "k"), l(0, kWord, "l");
  lanes(u, g) = 0.0f;
  lanes(u, g) += Halide::abs(s(k * kWord + u, g));
  mean(g) = 0.0f;
  mean(g) += lanes(l, g);
  Func scale = dsl::output_func("scale");
  scale(g) = mean(g) / Halide::cast<float>(C);
  // err_out reads its own copy of the scale (`scale` is an output: a Func reading it would be
  // a separate pass over the tensor; the fused stages must not depend on each other).
  Func chunk_scale("chunk_scale");
  chunk_scale(g) = mean(g) / Halide::cast<float>(C);
  Func err_out = dsl::output_func("err_out");
  const Expr sv = s(c, g);
  err_out(c, g) = sv - Halide::select(sv >= 0.0f, chunk_scale(g), -chunk_scale(g));
  // The word: bit j set where element 32 w + j is >= 0, summed (the bits are disjoint).
  Func word("word");
  RDom j(0, kWord, "j");
  word(w, g) = Halide::cast<uint32_t>(0);
  word(w, g) += Halide::select(s(w * kWord + j, g) >= 0.0f,
                               Halide::cast<uint32_t>(1) << Halide::cast<uint32_t>(j),
                               Halide::cast<uint32_t>(0));
  Func bits = dsl::output_func("bits");
  bits(w, g) = Halide::reinterpret<int32_t>(word(w, g));
  zero_mins(err_out.output_buffer(), 2);
  zero_mins(bits.output_buffer(), 2);
  zero_mins(scale.output_buffer(), 1);

  // Schedule.
  const OnebitParams p = onebit_params(a.target);
  Var go("go"), gi("gi");
  const Expr block = Halide::max(1, (G + p.tasks - 1) / p.tasks);
  auto rows = [&](Halide::Stage st, Var gv, bool parallel) {
    st.split(gv, go, gi, block, TailStrategy::GuardWithIf);
    if (parallel) st.parallel(go);
  };
  Halide::Stage big = err_out.specialize(G * C >= p.serial_below);
  rows(big, g, true);
  big.vectorize(c, p.vector, TailStrategy::GuardWithIf);
  rows(err_out, g, false);
  err_out.vectorize(c, p.vector, TailStrategy::GuardWithIf);
  // Fused at the chunk: each chunk's scale and words follow its err_out row, in the same
  // parallel or serial loop (Halide allows no specialization on a Func computed with another).
  rows(scale, g, false);
  scale.compute_with(err_out, gi);
  rows(bits, g, false);
  bits.compute_with(err_out, gi);
  // The chunk's sum of |s|, before its err_out row; the 32 lanes innermost as vectors.
  Var uo("uo"), ui("ui");
  mean.compute_at(err_out, gi);
  chunk_scale.compute_at(err_out, gi);  // one divide per chunk, not per vector
  lanes.compute_at(err_out, gi).vectorize(u, p.vector);
  lanes.update().split(u, uo, ui, p.vector).reorder(ui, uo, k).vectorize(ui).unroll(uo);
  // One word at a time: its 32 lanes compared and summed horizontally.
  word.compute_at(bits, w);
  word.update().atomic().vectorize(j);
  return NnKernel{{bits, scale, err_out},
                  "onebit_compress: chunks in " + std::to_string(p.tasks) +
                      " parallel blocks; per chunk |s| summed in 32 lanes, err_out in " +
                      std::to_string(p.vector) +
                      "-wide vectors, then each word as a 32-lane horizontal add, all fused "
                      "at the chunk; serial below G*C = " +
                      std::to_string(p.serial_below),
                  p.as_map()};
}

NnKernel build_decompress(const NnArgs& a) {
  Halide::ImageParam bits = a.tensors.at("bits"), scale = a.tensors.at("scale");
  zero_mins(bits, 3);
  zero_mins(scale, 2);
  const Expr K = scale.dim(1).extent(), G = scale.dim(0).extent();
  const Expr weight = a.scalars.at("weight");
  Var c("c"), g("g");

  // Algorithm: the K terms summed in rank order, then weighted.
  Func sum_k("sum_k");
  RDom r(0, K, "r");
  const Expr bit = (bits(c / kWord, g, r) >> (c % kWord)) & 1;
  sum_k(c, g) = 0.0f;
  sum_k(c, g) += Halide::select(bit != 0, scale(g, r), -scale(g, r));
  Func y = dsl::output_func("y");
  y(c, g) = weight * sum_k(c, g);
  zero_mins(y.output_buffer(), 2);

  // Schedule: one word's 32 elements per step (whole: C = 32 W, so RoundUp never rounds),
  // their K terms summed in registers; rows in parallel blocks (serial below G * C = serial_below).
  const OnebitParams p = onebit_params(a.target);
  const Expr C = y.output_buffer().dim(0).extent();
  Var go("go"), gi("gi"), co("co"), ci("ci");
  const Expr block = Halide::max(1, (G + p.tasks - 1) / p.tasks);
  auto schedule = [&](Halide::Stage st, bool parallel) {
    st.split(g, go, gi, block, TailStrategy::GuardWithIf)
        .split(c, co, ci, kWord, TailStrategy::RoundUp)
        .vectorize(ci);
    if (parallel) st.parallel(go);
  };
  schedule(y.specialize(G * C >= p.serial_below), true);
  schedule(y, false);
  sum_k.compute_at(y, co).vectorize(c);
  sum_k.update().reorder(c, r).vectorize(c);
  return NnKernel{{y},
                  "onebit_decompress: rows in " + std::to_string(p.tasks) +
                      " parallel blocks; per word its 32 elements' K terms in 32-lane "
                      "registers; serial below G*C = " +
                      std::to_string(p.serial_below),
                  p.as_map()};
}

}  // namespace

const dsl::NnOpDecl& onebit_compress() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl d("onebit_compress");
    d.input("x", {"G", "C"}, "Values to send (1-bit Adam: the momentum), G chunks of C")
        .input("err", {"G", "C"}, "Error-feedback buffer (zero at the start)")
        .output("bits", {"G", "C/32"},
                "Signs, 1 where x + err >= 0: element 32 w + j of a chunk in bit j of word w "
                "(bit j of byte i for element 8 i + j)",
                registry::DType::i32)
        .output("scale", {"G"}, "Per chunk, the mean of |x + err|")
        .output("err_out", {"G", "C"}, "The new error: x + err - decompressed")
        .check("C % 32 == 0", "the chunk length C must be a multiple of 32")
        .check("C >= 32", "the chunk length C must be at least 32")
        .algorithm("", "", 0, "chunks fused", build_compress)
        .estimate("G", 2048)
        .estimate("C", 2048)
        .cost("", "12*G*C + G*C/8 + 4*G")
        .example("x=2048,2048 err=2048,2048")
        .bandwidth_op("bandwidth_add")
        .summary(
            "1-bit compression with error feedback: signs packed 32 per int32 word (8 "
            "per byte) and one fp32 scale per chunk")
        .formula(
            "s = x + err; scale = mean_chunk |s|; bit = s >= 0; err_out = s - scale * "
            "(bit ? 1 : -1)")
        .reference(
            "1-bit Adam (Tang et al., ICML 2021), Algorithm 1's compressor with error "
            "feedback")
        // bits exact (fp32 rounding keeps the sign of x + err); the scale a sum of C terms in
        // 32 lanes (~3e-7 relative measured); err_out cancels where |s| is near the scale, so
        // atol is for |x + err| up to about 1 (a momentum's scale) and grows with it: a few
        // ulps of max |x + err| (test_nn_onebit.cpp scales it so).
        .tolerance(2e-6, 1e-6);
    return d;
  }();
  return d;
}

const dsl::NnOpDecl& onebit_decompress() {
  static const dsl::NnOpDecl d = [] {
    dsl::NnOpDecl d("onebit_decompress");
    d.input("bits", {"K", "G", "W"}, "K codes' sign words (onebit_compress's bits)",
            registry::DType::i32)
        .input("scale", {"K", "G"}, "K codes' per-chunk scales")
        .scalar("weight", "Multiplies the sum (1/K averages K ranks' codes)")
        .output("y", {"G", "W*32"}, "weight * sum over k of scale * (bit ? 1 : -1)")
        .check("K >= 1", "bits and scale need at least one code (K)")
        .algorithm("", "", 0, "per word in registers", build_decompress)
        .estimate("K", 1)
        .estimate("G", 2048)
        .estimate("W", 64)
        .cost("", "4*G*W*32 + 4*K*G*W + 4*K*G")
        .example("bits=1,2048,64 scale=1,2048 weight=1")
        .bandwidth_op("bandwidth_copy")
        .summary("Decompresses (and averages) 1-bit codes: onebit_compress's inverse")
        .formula("y[g, c] = weight * sum_k scale[k, g] * (bit c of chunk g of code k ? 1 : -1)")
        .reference("1-bit Adam (Tang et al., ICML 2021), Algorithm 1's server average")
        // K fp32 adds of +-scale and one multiply; atol for the sums that cancel.
        .tolerance(1e-6, 1e-6);
    return d;
  }();
  return d;
}

}  // namespace opforge::generators
