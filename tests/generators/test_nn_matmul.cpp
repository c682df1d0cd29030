// matmul: an fp64 loop written from C = op(A) . op(B) (torch.matmul on 2-D / 3-D operands),
// registered for test_nn_kernels.cpp, which runs every registered matmul variant (each
// transpose combination, each ISA) through the runtime on these problems: odd sizes (1, not a
// multiple of the 16-wide vectors or the 8 x 32 register block, K past one 128- or 256-chunk
// with a partial last chunk), K above 2048 (where AVX-512 switches from 128- to 256-chunks:
// 2100 = 8 x 256 + 52, batched and not), batch 1 and > 1, the batch dim omitted on one or both
// operands (broadcast); and the declaration's shape rules.
#include <doctest/doctest.h>

#include "generators/nn_ops.h"
#include "generators/nn_reference.h"
#include "registry/format/shape_expr.h"

namespace opforge::testing {
namespace {

// Stored shapes of a and b for op(a) M x K, op(b) K x N; batch 0: no batch dim.
NnShapes operands(bool ta, bool tb, int64_t batch_a, int64_t batch_b, int64_t M, int64_t N,
                  int64_t K) {
  std::vector<int64_t> a = ta ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K};
  std::vector<int64_t> b = tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
  if (batch_a) a.insert(a.begin(), batch_a);
  if (batch_b) b.insert(b.begin(), batch_b);
  return {{"a", a}, {"b", b}};
}

std::vector<NnProblem> problems() {
  struct Case {
    int64_t ba, bb, M, N, K;
  };
  const std::vector<Case> cases = {{0, 0, 1, 1, 1},     {0, 0, 1, 17, 5},   {3, 3, 17, 1, 33},
                                   {2, 2, 33, 65, 17},  {0, 0, 9, 31, 300}, {2, 0, 70, 47, 513},
                                   {0, 3, 5, 9, 7},     {1, 1, 260, 40, 7}, {0, 0, 5, 290, 1000},
                                   {2, 2, 9, 40, 2100}, {0, 0, 3, 17, 2049}};
  std::vector<NnProblem> out;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (const Case& c : cases) {
        NnProblem p;
        p.shapes = operands(ta, tb, c.ba, c.bb, c.M, c.N, c.K);
        p.attrs = {{"transpose_a", ta ? "true" : "false"}, {"transpose_b", tb ? "true" : "false"}};
        out.push_back(p);
      }
    }
  }
  return out;
}

NnTensors reference(const NnShapes& s, const NnTensors& in, const NnScalars&, const NnAttrs& at) {
  const bool ta = at.at("transpose_a") == "true", tb = at.at("transpose_b") == "true";
  const auto& sa = s.at("a");
  const auto& sb = s.at("b");
  const bool has_ba = sa.size() == 3, has_bb = sb.size() == 3;
  const int64_t ar = sa[sa.size() - 2], ac = sa.back(), br = sb[sb.size() - 2], bc = sb.back();
  const int64_t M = ta ? ac : ar, K = ta ? ar : ac, N = tb ? br : bc;
  const int64_t batch = has_ba ? sa[0] : has_bb ? sb[0] : 1;
  const auto& A = in.at("a");
  const auto& B = in.at("b");
  std::vector<double> C(batch * M * N);
  for (int64_t t = 0; t < batch; ++t) {
    const double* a = A.data() + (has_ba ? t * ar * ac : 0);  // no batch dim: broadcast
    const double* b = B.data() + (has_bb ? t * br * bc : 0);
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += (ta ? a[k * ac + i] : a[i * ac + k]) * (tb ? b[j * bc + k] : b[k * bc + j]);
        C[(t * M + i) * N + j] = acc;
      }
    }
  }
  return {{"c", C}};
}

const RegisterNnReference reg("matmul", {problems(), reference});

}  // namespace
}  // namespace opforge::testing

using namespace opforge;

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
