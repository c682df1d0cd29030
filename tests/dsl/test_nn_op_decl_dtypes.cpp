// NnOpDecl's tensor dtypes by attr: activations (fp32 or bf16 by the "dtype" attr) and
// input_dtype_when (a bool mask), what they give the variant (ids, tensor dtypes, the widened
// tolerance, cost bytes), the pipeline's kernel arguments, and the declaration errors.
#include <doctest/doctest.h>

#include "dsl/kernel_pipeline.h"
#include "dsl/resolved_op.h"

namespace opforge::dsl {
namespace {

using registry::DType;

NnKernel scale_rows(const NnArgs& a) {
  Halide::Func x = a.f32("x"), y = output_func("y");
  Halide::Var i;
  y(i) = a.store("y", x(i) * a.tensors.at("w")(0));
  return NnKernel{{y}, "scale", {}};
}

NnOpDecl scaled() {
  return NnOpDecl("scaled")
      .input("x", {"N"}, "activation")
      .input("w", {"K"}, "a per-channel parameter")
      .input("m", {"N"}, "a mask")
      .output("y", {"N"}, "activation")
      .activations({"x", "y"})
      .attr_string("m_dtype", "float32", {"float32", "bool"}, "mask dtype")
      .named_in_id_off_default("m_dtype")
      .input_dtype_when("m", "m_dtype", "bool", DType::b8)
      .algorithm("", "", 0, "scale", scale_rows)
      .cost("N", "(bytes_x + bytes_y + bytes_m)*N + 4*K")
      .tolerance(1e-5, 1e-6);
}

TEST_CASE("activations: the dtype attr picks fp32 or bf16 for the named tensors only") {
  const NnOpDecl d = scaled();
  d.validate();
  const ResolvedOp f32 = resolve(d), bf16 = resolve(d, {{"dtype", "bfloat16"}});
  CHECK(f32.variant_id("avx2") == "scaled__f32__avx2");  // named only off its default
  CHECK(bf16.variant_id("avx2") == "scaled__dtype_bfloat16__f32__avx2");
  CHECK(d.tensor_dtype("x", bf16.attrs) == DType::bf16);
  CHECK(d.tensor_dtype("y", bf16.attrs) == DType::bf16);
  CHECK(d.tensor_dtype("w", bf16.attrs) == DType::f32);
  CHECK(d.tensor_dtype("x", f32.attrs) == DType::f32);
  // One bf16 rounding of the result (<= 2^-8 relative) on top of the fp32 bound, whose atol
  // grows for the coherent rounding of quantized inputs (activation_tolerance).
  CHECK(f32.tolerance().rtol == doctest::Approx(1e-5));
  CHECK(bf16.tolerance().rtol == doctest::Approx(1e-5 + 1.0 / 256));
  CHECK(bf16.tolerance().atol == doctest::Approx(8e-6));
  CHECK_THROWS_WITH_AS(resolve(d, {{"dtype", "float16"}}), doctest::Contains("attr 'dtype'"),
                       std::invalid_argument);
}

TEST_CASE("input_dtype_when: the mask is bool in the variants that say so") {
  const NnOpDecl d = scaled();
  const ResolvedOp b = resolve(d, {{"m_dtype", "bool"}});
  CHECK(d.tensor_dtype("m", b.attrs) == DType::b8);
  CHECK(d.tensor_dtype("m", resolve(d).attrs) == DType::f32);
  CHECK(b.variant_id("avx512") == "scaled__m_dtype_bool__f32__avx512");
}

TEST_CASE("cost expressions count each tensor's bytes in the variant") {
  const NnOpDecl d = scaled();
  CHECK(d.cost_for_variant(d.cost().bytes, resolve(d).attrs) == "(4 + 4 + 4)*N + 4*K");
  CHECK(d.cost_for_variant(d.cost().bytes,
                           resolve(d, {{"dtype", "bfloat16"}, {"m_dtype", "bool"}}).attrs) ==
        "(2 + 2 + 1)*N + 4*K");
}

TEST_CASE("the pipeline's arguments and output take the variant's dtypes") {
  const NnOpDecl d = scaled();
  const Halide::Target t("x86-64-linux-avx2-fma-f16c-no_runtime");
  const KernelPipeline p = build_pipeline(resolve(d, {{"dtype", "bfloat16"}}), {}, t, true);
  std::map<std::string, DType> got;
  for (const auto& a : p.kernel_args) got[a.name] = a.dtype;
  CHECK(got == std::map<std::string, DType>{
                   {"x", DType::bf16}, {"w", DType::f32}, {"m", DType::f32}, {"y", DType::bf16}});
  CHECK(p.outputs.at(0).dtype == DType::bf16);
}

TEST_CASE("activations and input_dtype_when: declaration errors name the problem") {
  NnBuildFn build = scale_rows;
  CHECK_THROWS_WITH_AS(
      NnOpDecl("bad")
          .input("x", {"N"}, "x")
          .output("y", {"N"}, "y")
          .activations({"x", "z"})
          .algorithm("", "", 0, "", build)
          .validate(),
      doctest::Contains("activation 'z' is not a declared float32 input or output"),
      std::invalid_argument);
  CHECK_THROWS_WITH_AS(NnOpDecl("bad")
                           .input("x", {"N"}, "x")
                           .attr_string("k", "a", {"a", "b"}, "k")
                           .input_dtype_when("x", "k", "c", DType::b8),
                       doctest::Contains("attr 'k' has no choice 'c'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(NnOpDecl("bad")
                           .attr_string("k", "a", {"a", "b"}, "k")
                           .input_dtype_when("x", "k", "b", DType::b8),
                       doctest::Contains("no input tensor 'x'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(NnOpDecl("bad")
                           .input("x", {"N"}, "x")
                           .output("y", {"N"}, "y")
                           .algorithm("", "", 0, "", build)
                           .cost("", "bytes_q*N")
                           .validate(),
                       doctest::Contains("'bytes_q' is not a dim"), std::invalid_argument);
}

}  // namespace
}  // namespace opforge::dsl
