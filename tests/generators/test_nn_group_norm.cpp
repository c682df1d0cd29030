// group_norm beyond the reference run (its fp64 reference and problems:
// registry/builder/nn_golden/group_norm.cpp; test_nn_kernels.cpp runs every variant on them):
// bad shapes and groups, which must fail naming the argument or the rule.
#include <doctest/doctest.h>

#include <cmath>

#include "generators/nn_call_error.h"
#include "opforge/runtime.hpp"
#include "registry/builder/nn_golden/nn_reference.h"
#include "test_registry.h"

namespace opforge::testing {
namespace {

using namespace nn_golden;  // NnProblem, NnReference, the formulas

TEST_CASE("group_norm rejects bad shapes and groups, naming the argument or the rule") {
  auto reg = Registry::open(test_registry_dir());
  std::vector<float> x(2 * 6 * 3 * 4), w(7), b(6), y(x.size());
  auto fails = [&](std::vector<Tensor> t, double groups, const std::string& what) {
    check_call_fails(*reg, "group_norm", t, {{"groups", groups}, {"eps", 1e-5}}, what);
  };
  const Tensor xt{"x", x.data(), registry::DType::f32, {2, 6, 3, 4}};
  const Tensor yt{"y", y.data(), registry::DType::f32, {2, 6, 3, 4}};
  const Tensor wt{"weight", w.data(), registry::DType::f32, {6}};
  const Tensor bt{"bias", b.data(), registry::DType::f32, {6}};
  // weight of 7 channels against x's 6
  fails({xt, {"weight", w.data(), registry::DType::f32, {7}}, bt, yt}, 3, "weight");
  // 6 channels in 4 groups
  fails({xt, wt, bt, yt}, 4, "divisible by groups");
  fails({xt, wt, bt, yt}, 0, "groups must be >= 1");
  // NCHW is rank 4
  fails({{"x", x.data(), registry::DType::f32, {12, 3, 4}}, wt, bt, yt}, 3, "x");
}

}  // namespace
}  // namespace opforge::testing
