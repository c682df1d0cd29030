// Gradient compression to fp16/bf16 with error feedback (the rounding error is kept and added to
// the next step's gradient: 1-bit Adam's and DeepSpeed's compressed all-reduce keep it too). A
// ZeRO reduce-scatter sends `c` and the receiver averages with accumulate_grad (bf16g/f16g,
// scaled: acc += scale * widen(c)).
//
// Declared as an elementwise optimizer op in the narrow-state storage (op_table: bf16s / f16s):
// the first state `err` stays fp32 and is updated in place, the second state `c` is stored in
// the format, so the elementwise recipe, multi-tensor form and a bandwidth kernel come with the
// declaration. `c` is never read (the update does not load it), only written. Its bandwidth
// kernel (bandwidth_s2_g1_bf16s) also reads the narrow state: 16 B per element against this
// op's 14 B (grad, err read; err, c written).
#include "generators/ops.h"

namespace opforge::generators {

const dsl::OptimizerDecl& compress_ef() {
  static const dsl::OptimizerDecl d =
      dsl::OptimizerDecl("compress_ef")
          .summary(
              "Compresses an fp32 gradient to fp16/bf16 with error feedback: c = round(grad + "
              "err), err = what the rounding lost (c written, err updated in place)")
          .reference(
              "1-bit Adam / DeepSpeed compressed communication error feedback (Tang et al. "
              "2021); torch DDP fp16_compress_hook / bf16_compress_hook, plus error feedback")
          .formula(
              "s = grad + err (fp32); c = s rounded to nearest even in `format` (bf16: NaN "
              "stays NaN; f16: IEEE, overflow to inf, subnormals kept); err = s - c (exact), "
              "0 where c is inf or NaN")
          .grad("grad", "This step's fp32 gradient")
          .state("err", "fp32 error-feedback buffer (zero at the start), updated in place")
          .state("c", "The compressed gradient in `format`, written only")
          .attr_string("format", "bf16", {"bf16", "f16"},
                       "the compressed dtype (the variant's storage: bf16s or f16s)")
          // Exact: the fp64 golden evaluates the same fp32 add and rounding.
          .tolerance(0, 0)
          .update([](const dsl::UpdateContext& c) {
            const Halide::Type t =
                c.attr_string("format") == "f16" ? Halide::Float(16) : Halide::BFloat(16);
            // fp32 in the kernel and in the fp64 golden alike: one fp32 add, one rounding.
            const dsl::Expr s = Halide::cast<float>(c["grad"]) + Halide::cast<float>(c["err"]);
            const dsl::Expr wide = dsl::from_storage(dsl::to_storage(t, s));
            // s - wide is exact (Sterbenz-like: wide is s rounded to fewer bits). A non-finite
            // c carries the overflow or NaN to the receiver; err restarts from 0.
            const dsl::Expr e = dsl::select(dsl::is_finite(wide), s - wide, 0.0f);
            // The storage rounds `c` to `format` when it stores it (with_storage, narrow state).
            return dsl::Updates{{"err", e}, {"c", s}};
          });
  return d;
}

}  // namespace opforge::generators
