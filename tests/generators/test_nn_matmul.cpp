// matmul: the kernel (its build function called as the NN pipeline builder calls it, JIT-compiled
// for the host's avx512 or avx2 target) against an fp64 loop written from the formula, for every
// transpose combination, odd sizes (1, not a multiple of the 16-wide vectors or the 8 x 32 register
// block, K past one 256-chunk), batch 1 and > 1; and the declaration's shape rules.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "generators/nn_ops.h"
#include "registry/format/shape_expr.h"

namespace {

using namespace opforge;

struct Case {
  int batch, M, N, K;
};

Halide::Target jit_target(bool avx2) {
  Halide::Target host = Halide::get_host_target();
  if (!avx2 && host.has_feature(Halide::Target::AVX512_Skylake)) {
    return Halide::Target("x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41");
  }
  return Halide::Target("x86-64-linux-avx-avx2-f16c-fma-sse41");
}

// One compiled kernel (any shape), as the NN pipeline builder makes it.
struct Compiled {
  Halide::ImageParam a{Halide::Float(32), 3, "a"}, b{Halide::Float(32), 3, "b"};
  Halide::Func c;
  Halide::Target target;
  bool ta, tb;
};

Compiled compile(bool ta, bool tb, bool avx2) {
  const auto& decl = generators::matmul();
  dsl::AttrValues attrs = {{"transpose_a", ta ? "true" : "false"},
                           {"transpose_b", tb ? "true" : "false"}};
  Compiled k;
  k.target = jit_target(avx2);
  k.ta = ta;
  k.tb = tb;
  // One 3-D ImageParam per operand, named like it.
  dsl::NnArgs args;
  args.tensors = {{"a", k.a}, {"b", k.b}};
  args.attrs = decl.resolve_attrs(attrs);
  args.target = k.target;
  k.c = decl.find_algorithm("").build(args).outputs.at(0);
  REQUIRE(k.c.name() == "c");
  k.c.compile_jit(k.target);
  return k;
}

// Max over c of |c - ref| / (atol + rtol*|ref|): <= 1 passes the declared tolerance.
double run_case(Compiled& k, const Case& s) {
  const bool ta = k.ta, tb = k.tb;
  // Stored shapes (Halide order: cols, rows, batch).
  const int ar = ta ? s.K : s.M, ac = ta ? s.M : s.K, br = tb ? s.N : s.K, bc = tb ? s.K : s.N;
  Halide::Buffer<float> A(ac, ar, s.batch), B(bc, br, s.batch), C(s.N, s.M, s.batch);
  std::mt19937 rng(1234 + s.M * 7 + s.N * 13 + s.K);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  A.for_each_value([&](float& v) { v = u(rng); });
  B.for_each_value([&](float& v) { v = u(rng); });
  k.a.set(A);
  k.b.set(B);
  k.c.realize(Halide::Realization(C), k.target);
  const auto tol = generators::matmul().tolerance();
  double worst = 0;
  for (int bt = 0; bt < s.batch; ++bt) {
    for (int i = 0; i < s.M; ++i) {
      for (int j = 0; j < s.N; ++j) {
        double ref = 0;
        for (int kk = 0; kk < s.K; ++kk) {
          const double x = ta ? A(i, kk, bt) : A(kk, i, bt);
          const double y = tb ? B(kk, j, bt) : B(j, kk, bt);
          ref += x * y;
        }
        const double err = std::fabs(C(j, i, bt) - ref) / (tol.atol + tol.rtol * std::fabs(ref));
        worst = std::max(worst, err);
      }
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("matmul matches the fp64 reference for every transpose, odd sizes and batches") {
  const std::vector<Case> cases = {{1, 1, 1, 1},    {1, 1, 17, 5},    {3, 17, 1, 33},
                                   {2, 33, 65, 17}, {1, 9, 31, 300},  {2, 70, 47, 513},
                                   {1, 260, 40, 7}, {1, 5, 290, 1000}};
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Compiled k = compile(ta, tb, false);
      for (const Case& s : cases) {
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(s.batch);
        CAPTURE(s.M);
        CAPTURE(s.N);
        CAPTURE(s.K);
        CHECK(run_case(k, s) <= 1.0);
      }
    }
  }
}

TEST_CASE("matmul avx2 build (6 x 16 register block) matches the reference") {
  for (bool tb : {false, true}) {
    Compiled k = compile(!tb, tb, true);
    CHECK(run_case(k, {2, 31, 47, 300}) <= 1.0);
    CHECK(run_case(k, {1, 7, 9, 3}) <= 1.0);
  }
}

TEST_CASE("matmul declaration: output dims, inner-dim checks and cost follow the transposes") {
  const auto& decl = generators::matmul();
  decl.validate();
  auto eval = [](const std::string& e, const std::map<std::string, int64_t>& env) {
    return *registry::ShapeExpr::parse(e).evaluate(env);
  };
  // a: 2 x 3 stored, b: 3 x 4 stored.
  std::map<std::string, int64_t> env = {{"B", 1},          {"a_rows", 2}, {"a_cols", 3},
                                        {"b_rows", 3},     {"b_cols", 4}, {"transpose_a", 0},
                                        {"transpose_b", 0}};
  const auto& out = decl.outputs().at(0);
  CHECK(eval(out.dims[1], env) == 2);
  CHECK(eval(out.dims[2], env) == 4);
  CHECK(eval(decl.cost().flops, env) == 2 * 2 * 3 * 4);
  for (const auto& c : decl.checks()) CHECK(eval(c.condition, env) == 1);
  // transpose_a: op(a) is 3 x 2, so K = a_rows = 2 != b_rows = 3: exactly one check fails.
  env["transpose_a"] = 1;
  int failed = 0;
  for (const auto& c : decl.checks()) {
    if (eval(c.condition, env) == 0) {
      ++failed;
      CHECK(c.message.find("transpose_a") != std::string::npos);
    }
  }
  CHECK(failed == 1);
  // transpose_a and transpose_b with a 3 x 2 and b 4 x 3 stored: M = 2, N = 4, K = 3.
  env = {{"B", 5},      {"a_rows", 3},      {"a_cols", 2},     {"b_rows", 4},
         {"b_cols", 3}, {"transpose_a", 1}, {"transpose_b", 1}};
  CHECK(eval(out.dims[1], env) == 2);
  CHECK(eval(out.dims[2], env) == 4);
  CHECK(eval(decl.cost().flops, env) == 2 * 5 * 2 * 4 * 3);
  for (const auto& c : decl.checks()) CHECK(eval(c.condition, env) == 1);
}
