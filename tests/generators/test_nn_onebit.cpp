// onebit_compress and onebit_decompress beyond the reference run (their fp64 references and
// problems: registry/builder/nn_golden/onebit.cpp; test_nn_kernels.cpp runs every variant on
// them): the zero chunk, and bad shapes, which must fail naming the argument.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "generators/nn_call_error.h"
#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "registry/builder/nn_golden/nn_reference.h"
#include "test_registry.h"

namespace opforge::testing {
namespace {

using namespace nn_golden;  // NnProblem, NnReference, the formulas

TEST_CASE("onebit_compress: a zero chunk gives scale 0, all bits set, zero error") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    CAPTURE(isa);
    std::vector<float> x(64, 0.f), err(64, 0.f), err_out(64, 1.f), scale(2, 1.f);
    x[40] = -0.f;  // -0 + 0 = +0: still positive
    std::vector<int32_t> bits(2, 0);
    std::vector<Tensor> t = {{"x", x.data(), registry::DType::f32, {2, 32}},
                             {"err", err.data(), registry::DType::f32, {2, 32}},
                             {"bits", bits.data(), registry::DType::i32, {2, 1}},
                             {"scale", scale.data(), registry::DType::f32, {2}},
                             {"err_out", err_out.data(), registry::DType::f32, {2, 32}}};
    reg->select("onebit_compress", {}, isa).call(t, {});
    CHECK(bits[0] == -1);
    CHECK(bits[1] == -1);
    CHECK(scale[0] == 0.f);
    CHECK(scale[1] == 0.f);
    for (float e : err_out) CHECK(e == 0.f);
  }
}

TEST_CASE("onebit_compress and onebit_decompress reject bad shapes, naming the argument") {
  auto reg = Registry::open(test_registry_dir());
  std::vector<float> f(4096);
  std::vector<int32_t> w(128);
  auto fails = [&](const std::string& op, std::vector<Tensor> t,
                   std::map<std::string, double> scalars,
                   const std::string& what) { check_call_fails(*reg, op, t, scalars, what); };
  auto f32 = [&](const char* name, std::vector<int64_t> shape) {
    return Tensor{name, f.data(), registry::DType::f32, std::move(shape)};
  };
  auto i32 = [&](const char* name, std::vector<int64_t> shape) {
    return Tensor{name, w.data(), registry::DType::i32, std::move(shape)};
  };
  // A chunk of 48: not whole words.
  fails("onebit_compress",
        {f32("x", {2, 48}), f32("err", {2, 48}), i32("bits", {2, 1}), f32("scale", {2}),
         f32("err_out", {2, 48})},
        {}, "multiple of 32");
  // err of another chunk count.
  fails("onebit_compress",
        {f32("x", {2, 64}), f32("err", {3, 64}), i32("bits", {2, 2}), f32("scale", {2}),
         f32("err_out", {2, 64})},
        {}, "err");
  // bits as floats.
  fails("onebit_compress",
        {f32("x", {2, 64}), f32("err", {2, 64}), f32("bits", {2, 2}), f32("scale", {2}),
         f32("err_out", {2, 64})},
        {}, "bits");
  // scale with 3 codes, bits with 2.
  fails("onebit_decompress", {i32("bits", {2, 4, 2}), f32("scale", {3, 4}), f32("y", {4, 64})},
        {{"weight", 0.5}}, "scale");
  // y of the wrong chunk length.
  fails("onebit_decompress", {i32("bits", {2, 4, 2}), f32("scale", {2, 4}), f32("y", {4, 32})},
        {{"weight", 0.5}}, "y");
}

}  // namespace
}  // namespace opforge::testing
