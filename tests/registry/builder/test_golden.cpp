// run_golden: an op's declaration evaluated in fp64, unscheduled, with Halide's JIT. Expected
// values are the published formulas worked here in double: dense, sparse rows with a
// repeated index (applied in order), and the multi-tensor form's refusal.
#include <doctest/doctest.h>

#include <cmath>

#include "dsl/resolved_op.h"
#include "generators/ops.h"
#include "registry/builder/golden.h"

namespace opforge::builder {
namespace {

TEST_CASE("run_golden: apply_gradient_descent is var - alpha * delta in fp64") {
  GoldenData g;
  g.n = 5;
  g.tensors["var"] = {1.0, -2.0, 0.1, 1e-9, 3.0};
  g.tensors["delta"] = {0.5, 0.25, -1.0, 1e-9, 0.0};
  g.scalars["alpha"] = 0.1;
  const std::vector<double> var = g.tensors["var"], delta = g.tensors["delta"];
  run_golden(dsl::resolve(generators::apply_gradient_descent()), g);
  for (size_t i = 0; i < var.size(); ++i) {
    CAPTURE(i);
    // fp64 to the last bits (the JIT may fuse the multiply-add: one rounding fewer).
    CHECK(g.tensors["var"][i] == doctest::Approx(var[i] - 0.1 * delta[i]).epsilon(1e-15));
  }
  CHECK(g.tensors["delta"] == delta);  // gradients are read only
}

TEST_CASE("run_golden: sparse_apply_adagrad updates indexed rows in index order") {
  GoldenData g;
  g.rows = 3;
  g.cols = 2;
  g.count = 3;
  g.tensors["var"] = {1, 2, 3, 4, 5, 6};     // [3, 2]
  g.tensors["accum"] = {1, 1, 1, 1, 1, 1};   // [3, 2]
  g.tensors["grad"] = {1, 2, 3, 4, 0.5, 1};  // [3 indices, 2]
  g.indices["indices"] = {2, 0, 2};          // row 2 twice: the second sees the first
  g.scalars["lr"] = 0.5;
  run_golden(dsl::resolve(generators::sparse_apply_adagrad(), {{"Tindices", "int64"}}), g);
  std::vector<double> var = {1, 2, 3, 4, 5, 6}, accum(6, 1.0);
  const std::vector<double> grad = {1, 2, 3, 4, 0.5, 1};
  const int idx[] = {2, 0, 2};
  for (int k = 0; k < 3; ++k) {
    for (int c = 0; c < 2; ++c) {
      const int at = idx[k] * 2 + c;
      const double gr = grad[k * 2 + c];
      accum[at] += gr * gr;
      var[at] -= 0.5 * gr / std::sqrt(accum[at]);
    }
  }
  for (int i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(g.tensors["accum"][i] == doctest::Approx(accum[i]).epsilon(1e-15));
    CHECK(g.tensors["var"][i] == doctest::Approx(var[i]).epsilon(1e-15));
  }
  CHECK(g.tensors["var"][2] == 3.0);  // row 1 untouched
}

TEST_CASE("run_golden: the multi-tensor form is refused, naming the op") {
  GoldenData g;
  CHECK_THROWS_WITH_AS(run_golden(dsl::resolve(generators::multi_tensor_apply_lamb()), g),
                       doctest::Contains("op 'multi_tensor_apply_lamb'"), std::invalid_argument);
}

}  // namespace
}  // namespace opforge::builder
