// silu and silu_mul beyond the reference run (their fp64 references and problems:
// registry/builder/nn_golden/silu.cpp; test_nn_kernels.cpp runs every variant on them): NaN
// and infinities as torch, and bad shapes, which must fail naming the argument.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "generators/nn_call_error.h"
#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "registry/builder/nn_golden/nn_reference.h"
#include "test_registry.h"

namespace opforge::testing {
namespace {

using namespace nn_golden;  // NnProblem, NnReference, the formulas

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
