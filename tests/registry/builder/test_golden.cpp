// run_golden: an op's declaration evaluated in fp64, unscheduled, with Halide's JIT. Expected
// values are the published formulas worked here in double: dense, sparse rows with a
// repeated index (applied in order), and the multi-tensor form's refusal.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

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

TEST_CASE("compare_with_golden: errors, ulps, the tolerance, NaN only matching NaN") {
  const float one_up = std::nextafter(1.0f, 2.0f);  // 1 + 2^-23
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> kernel = {1.0f, one_up, 2.5f, nan, nan, 0.0f};
  const std::vector<double> golden = {1.0, 1.0, 2.0, std::nan(""), 1.0, 1e-9};
  // |err| <= 1e-6 + 0.1 * |g|: index 2 (err 0.5 > 0.2) and index 4 (NaN vs 1) exceed.
  const GoldenErrors e = compare_with_golden(kernel, golden, 0.1, 1e-6);
  CHECK(e.elements == 6);
  CHECK(e.exceeding == 2);
  CHECK(e.max_abs == 0.5);
  CHECK(e.max_rel == doctest::Approx(1.0));  // index 5: |0 - 1e-9| / 1e-9
  // The largest is index 5: from 0 to 1e-9f are as many steps as 1e-9f's bits, 0x3089705f.
  CHECK(e.max_ulp == 0x3089705f);
  // 2.5f is 2^21 fp32 steps above 2.0f: 0.5 in a binade of 2^23 steps of 2^-22.
  CHECK(compare_with_golden({2.5f}, {2.0}, 0, 0).max_ulp == (int64_t(1) << 21));
  CHECK(compare_with_golden({one_up}, {1.0}, 0, 0).max_ulp == 1);
  CHECK(compare_with_golden({one_up}, {1.0}, 0, 0).exceeding == 1);
  CHECK(compare_with_golden({one_up}, {1.0}, 0, 1.2e-7).exceeding == 0);
  CHECK_THROWS_AS(compare_with_golden({1.0f}, {1.0, 2.0}, 0, 0), std::invalid_argument);
}

TEST_CASE("run_golden fp32: the declaration in fp32; its distance widens the bound there only") {
  // Centered RMSProp's denominator ms' - mg'^2 + eps: with grad = mg and ms = mg^2 the new
  // ms' and mg'^2 are equal in exact arithmetic, so it cancels and an fp32 evaluation is far
  // from fp64 (epsilon 1e-6 keeps it positive in fp32); at ms = 1, mg = 0.1, grad = 0.5 it
  // does not.
  GoldenData g;
  g.n = 2;
  const float mg0 = std::sqrt(0.5f), ms0 = mg0 * mg0;
  g.tensors = {{"var", {1.0, 1.0}},
               {"mg", {mg0, 0.1}},
               {"ms", {ms0, 1.0}},
               {"mom", {0.0, 0.0}},
               {"grad", {mg0, 0.5}}};
  g.scalars = {
      {"lr", double(0.001f)}, {"rho", double(0.9f)}, {"momentum", 0.0}, {"epsilon", double(1e-6f)}};
  GoldenData g32 = g;
  const dsl::ResolvedOp op = dsl::resolve(generators::apply_centered_rms_prop());
  run_golden(op, g);
  run_golden(op, g32, /*fp32=*/true);
  const double far = std::fabs(g32.tensors["var"][0] - g.tensors["var"][0]);
  const double near = std::fabs(g32.tensors["var"][1] - g.tensors["var"][1]);
  CHECK(far > 1e-6);   // cancellation: the fp32 evaluation lost digits
  CHECK(near < 1e-7);  // well conditioned: fp32 rounding only
  // A kernel value off by 4x the fp32 evaluation's distance passes with conditioning 8, not
  // without it; the same absolute error on the well-conditioned element fails either way.
  const std::vector<float> k = {float(g.tensors["var"][0] + 4 * far),
                                float(g.tensors["var"][1] + 4 * far)};
  CHECK(compare_with_golden({k[0]}, {g.tensors["var"][0]}, 1e-6, 1e-7).exceeding == 1);
  auto spread = [&](int i) {
    return fp32_spread({g.tensors["var"][i]}, {g32.tensors["var"][i]}, {});
  };
  CHECK(compare_with_golden({k[0]}, {g.tensors["var"][0]}, 1e-6, 1e-7, spread(0), 8).exceeding ==
        0);
  CHECK(compare_with_golden({k[1]}, {g.tensors["var"][1]}, 1e-6, 1e-7, spread(1), 8).exceeding ==
        1);
  CHECK_THROWS_AS(compare_with_golden({1.0f}, {1.0}, 0, 0, {1.0, 2.0}, 8), std::invalid_argument);
}

TEST_CASE("run_golden fp32 sensitivity: a cancelling update whose fp32 evaluation lands by luck") {
  // AddSign's m' = m*beta + grad*(1 - beta) at beta = 3.4 (a draw of `check --scalars random`)
  // cancels: at some elements the plain fp32 evaluation happens to land near fp64 while the
  // same sum with a fused multiply-add (what a kernel's LLVM emits) lands some of the terms'
  // ulps away. 8x the evaluation's distance alone failed such elements; with the sensitivity
  // (one ulp up in m, grad and each scalar, one at a time) none fails, and a kernel whose beta
  // is off by 1e-4 relative still fails at more than half the elements.
  const int n = 20000;
  GoldenData g;
  g.n = n;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<double> var(n), m(n), grad(n);
  for (int i = 0; i < n; ++i) var[i] = u(rng), m[i] = u(rng), grad[i] = u(rng);
  g.tensors = {{"var", var}, {"m", m}, {"grad", grad}};
  const float lr = 0.000863207795f, alpha = 2.87878942f, sign_decay = 1.83476043f,
              beta = 3.40487432f;
  g.scalars = {{"lr", lr}, {"alpha", alpha}, {"sign_decay", sign_decay}, {"beta", beta}};
  GoldenData g32 = g;
  const dsl::ResolvedOp op = dsl::resolve(generators::apply_add_sign());
  run_golden(op, g);
  Sensitivity sensitivity;
  run_golden(op, g32, /*fp32=*/true, &sensitivity);
  REQUIRE(sensitivity.at("m").size() == size_t(n));
  std::vector<float> fused(n), off(n);
  for (int i = 0; i < n; ++i) {
    const float mi = float(m[i]), gi = float(grad[i]);
    fused[i] = std::fma(mi, beta, gi * (1.0f - beta));
    off[i] = std::fma(mi, beta * 1.0001f, gi * (1.0f - beta));
    // Where it cancels (|m'| well below the term m*beta), m one ulp up moves m' by beta ulps
    // of m, far more than the rounding of m' itself: the sensitivity holds at least that.
    const double m_ulp = std::nextafter(mi, 2.0f) - mi;
    if (std::fabs(g.tensors.at("m")[i]) < 0.1 * beta * std::fabs(mi))
      CHECK(sensitivity.at("m")[i] >= 0.5 * beta * m_ulp);
  }
  const std::vector<double>& gm = g.tensors.at("m");
  const std::vector<double> distance = fp32_spread(gm, g32.tensors.at("m"), {});
  const std::vector<double> spread = fp32_spread(gm, g32.tensors.at("m"), sensitivity.at("m"));
  const double rtol = 3e-7, atol = 1e-7;
  CHECK(compare_with_golden(fused, gm, rtol, atol, distance, 8).exceeding > 0);
  CHECK(compare_with_golden(fused, gm, rtol, atol, spread, 8).exceeding == 0);
  CHECK(compare_with_golden(off, gm, rtol, atol, spread, 8).exceeding > n / 2);
  // The nudged reruns leave the fp32 values as a run without them computes them.
  GoldenData again = g32;
  again.tensors = {{"var", var}, {"m", m}, {"grad", grad}};
  run_golden(op, again, /*fp32=*/true);
  CHECK(again.tensors.at("m") == g32.tensors.at("m"));
  CHECK_THROWS_AS(fp32_spread({1.0}, {1.0}, {1.0, 2.0}), std::invalid_argument);
}

}  // namespace
}  // namespace opforge::builder
