// silu and silu_mul: fp64 references written from the formula (torch.nn.functional.silu:
// x * sigmoid(x) = x / (1 + e^-x)), registered for test_nn_kernels.cpp, which runs every
// variant (each ISA the CPU runs) on them: N = 1, tails of the 8- and 16-wide vectors (5, 17,
// 1000), the serial path (N < 16384) and ragged parallel chunks (65543); inputs up to +-100,
// where exp(-x) overflows (y -> -0) and vanishes (y = x). This file adds NaN and infinities,
// and bad shapes, which must fail naming the argument.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "generators/nn_call_error.h"
#include "generators/nn_reference.h"
#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

double silu(double v) {
  return v / (1 + std::exp(-v));
}

std::vector<NnProblem> elementwise_problems(const std::vector<std::string>& tensors) {
  std::vector<NnProblem> out;
  for (int64_t n : {1, 5, 17, 1000, 65543}) {
    for (double range : {6.0, 20.0, 100.0}) {
      NnProblem p;
      for (const auto& t : tensors) p.shapes[t] = {n};
      p.lo = -range, p.hi = range;
      out.push_back(p);
    }
  }
  return out;
}

const RegisterNnReference reg_silu("silu", {elementwise_problems({"x"}),
                                            [](const NnShapes&, const NnTensors& in,
                                               const NnScalars&, const NnAttrs&) {
                                              const auto& x = in.at("x");
                                              std::vector<double> y(x.size());
                                              for (size_t i = 0; i < x.size(); ++i)
                                                y[i] = silu(x[i]);
                                              return NnTensors{{"y", y}};
                                            }});

const RegisterNnReference reg_silu_mul("silu_mul", {elementwise_problems({"a", "b"}),
                                                    [](const NnShapes&, const NnTensors& in,
                                                       const NnScalars&, const NnAttrs&) {
                                                      const auto &a = in.at("a"), &b = in.at("b");
                                                      std::vector<double> y(a.size());
                                                      for (size_t i = 0; i < a.size(); ++i)
                                                        y[i] = silu(a[i]) * b[i];
                                                      return NnTensors{{"y", y}};
                                                    }});

const RegisterNnReference reg_add("bandwidth_add",
                                  {elementwise_problems({"a", "b"}),
                                   [](const NnShapes&, const NnTensors& in, const NnScalars&,
                                      const NnAttrs&) {
                                     const auto &a = in.at("a"), &b = in.at("b");
                                     std::vector<double> y(a.size());
                                     // fp32 operands: the fp32 sum is their exact sum rounded once.
                                     for (size_t i = 0; i < a.size(); ++i)
                                       y[i] = static_cast<float>(static_cast<float>(a[i]) + b[i]);
                                     return NnTensors{{"y", y}};
                                   }});

TEST_CASE("silu and silu_mul: NaN stays NaN, -inf gives NaN and +inf itself, as torch") {
  auto reg = Registry::open(test_registry_dir());
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::string& isa : runnable_isas()) {
    CAPTURE(isa);
    std::vector<float> x = {std::nanf(""), -inf, inf, -200.f, 200.f, 0.f, -0.f}, y(x.size());
    std::vector<Tensor> t = {{"x", x.data(), registry::DType::f32, {int64_t(x.size())}},
                             {"y", y.data(), registry::DType::f32, {int64_t(x.size())}}};
    reg->select("silu", {}, isa).call(t, {});
    CHECK(std::isnan(y[0]));
    CHECK(std::isnan(y[1]));  // -inf * sigmoid(-inf) = -inf * 0 (torch: nan)
    CHECK(y[2] == inf);
    CHECK((y[3] == 0.f && std::signbit(y[3])));  // exp(200) overflows: -0 (exact: -3e-85)
    CHECK(y[4] == 200.f);
    CHECK(y[5] == 0.f);
    std::vector<float> a = {1.f, std::nanf(""), 3.f}, b = {std::nanf(""), 2.f, inf}, z(3);
    std::vector<Tensor> u = {{"a", a.data(), registry::DType::f32, {3}},
                             {"b", b.data(), registry::DType::f32, {3}},
                             {"y", z.data(), registry::DType::f32, {3}}};
    reg->select("silu_mul", {}, isa).call(u, {});
    CHECK(std::isnan(z[0]));
    CHECK(std::isnan(z[1]));
    CHECK(z[2] == inf);
  }
}

TEST_CASE("silu and silu_mul reject bad shapes, naming the argument") {
  auto reg = Registry::open(test_registry_dir());
  std::vector<float> a(32), b(32), y(32);
  auto fails = [&](const std::string& op, std::vector<Tensor> t, const std::string& arg) {
    check_call_fails(*reg, op, t, {}, arg);
  };
  // silu is declared over a flat x[N]
  fails(
      "silu",
      {{"x", a.data(), registry::DType::f32, {4, 8}}, {"y", y.data(), registry::DType::f32, {32}}},
      "x");
  // b shorter than a
  fails("silu_mul",
        {{"a", a.data(), registry::DType::f32, {32}},
         {"b", b.data(), registry::DType::f32, {31}},
         {"y", y.data(), registry::DType::f32, {32}}},
        "b");
  // y of another length
  fails("silu_mul",
        {{"a", a.data(), registry::DType::f32, {32}},
         {"b", b.data(), registry::DType::f32, {32}},
         {"y", y.data(), registry::DType::f32, {16}}},
        "y");
}

}  // namespace
}  // namespace opforge::testing
