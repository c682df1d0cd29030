// matmul: an fp64 loop written from C = op(A) . op(B) (torch.matmul on 2-D / 3-D operands);
// the check (registry/cli/check/nn_problem.h) runs every registered matmul variant (each
// transpose combination, each ISA) through the runtime on these problems: odd sizes (1, not a
// multiple of the 16-wide vectors or the 8 x 32 register block, K past one 128- or 256-chunk
// with a partial last chunk), K above 2048 (where AVX-512 switches from 128- to 256-chunks:
// 2100 = 8 x 256 + 52, batched and not), batch 1 and > 1, the batch dim omitted on one or both
// operands (broadcast), M = 517 in three equal tile rows that are not multiples of 8 or 16
// rows (174 + 174 + 169 on AVX2, 176 + 176 + 165 on AVX-512); and small_m's (M <= 16, N >=
// 128): K below one vector and with a tail, N one task exactly and with a shifted last task
// and register block, batched with one operand broadcast, M at its limits 8 and 16; batched
// products of several tile rows and columns (the fused task index decoded back to batch); and
// each of the packed algorithm's few-task branches: 1 task made 4 tile rows (1 x 1, 9 x 31), 2-3
// made twice the rows (batch 2 of 33 x 65, 517 x 70), an odd count below 16 one more row
// (batch 5 of 20 x 40; 600 x 600, 9 tasks on AVX-512); and packed_b_once's (M >= 1024): M at
// its limit with N not a whole register block and K past one chunk, batched with b broadcast
// (its panels packed per batch), batched with K past 2048 (256-chunks).
#include "registry/builder/nn_golden/add_references.h"

namespace opforge::nn_golden {
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
  // The last four: K a multiple of 16 and of the K chunk (64: one chunk of K; 256: two of 128;
  // 2304: nine of 256; 384 with M at packed_b_once's), where a transposed b is packed in 16 x 16
  // blocks on AVX-512; odd M and N.
  const std::vector<Case> cases = {
      {0, 0, 1, 1, 1},      {0, 0, 1, 17, 5},      {3, 3, 17, 1, 33},    {2, 2, 33, 65, 17},
      {0, 0, 9, 31, 300},   {2, 0, 70, 47, 513},   {0, 3, 5, 9, 7},      {1, 1, 260, 40, 7},
      {0, 0, 5, 290, 1000}, {2, 2, 9, 40, 2100},   {0, 0, 3, 17, 2049},  {0, 0, 517, 70, 13},
      {0, 0, 1, 128, 1},    {0, 0, 3, 300, 77},    {2, 0, 2, 129, 40},   {0, 2, 8, 1000, 20},
      {0, 0, 16, 200, 33},  {3, 0, 400, 270, 3},   {2, 2, 300, 300, 5},  {5, 5, 20, 40, 9},
      {0, 0, 600, 600, 5},  {0, 0, 1024, 33, 130}, {2, 0, 1030, 70, 13}, {2, 2, 1100, 45, 2050},
      {2, 2, 33, 65, 64},   {0, 0, 70, 45, 256},   {0, 0, 9, 33, 2304},  {0, 0, 1024, 40, 384}};
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

// linear: matmul's shapes for the algorithms it shares (one of each kind: odd sizes, a
// batch dim, small_m's rows at 1 and 16 with N at its least 128 and beyond, packed_b_once's M
// at 1024 with K past one chunk, K in whole 16 x 16 pack blocks) and a bias of odd values,
// from torch.nn.functional.linear: y = x weight^T + bias.
std::vector<NnProblem> linear_problems() {
  struct Case {
    int64_t batch, M, N, K;
  };
  const std::vector<Case> cases = {{0, 1, 1, 1},      {0, 5, 17, 33},     {3, 17, 9, 300},
                                   {0, 1, 128, 77},   {0, 16, 300, 40},   {2, 3, 130, 5},
                                   {0, 600, 70, 513}, {0, 1024, 33, 130}, {2, 1030, 45, 2050},
                                   {0, 70, 45, 256},  {0, 1024, 40, 384}};
  std::vector<NnProblem> out;
  for (const Case& c : cases) {
    NnProblem p;
    p.shapes = {
        {"x", c.batch ? std::vector<int64_t>{c.batch, c.M, c.K} : std::vector<int64_t>{c.M, c.K}},
        {"weight", {c.N, c.K}},
        {"bias", {c.N}}};
    out.push_back(p);
  }
  return out;
}

NnTensors linear_reference(const NnShapes& s, const NnTensors& in, const NnScalars&,
                           const NnAttrs&) {
  const auto& sx = s.at("x");
  const int64_t batch = sx.size() == 3 ? sx[0] : 1, M = sx[sx.size() - 2], K = sx.back();
  const int64_t N = s.at("weight")[0];
  const auto &x = in.at("x"), &w = in.at("weight"), &bias = in.at("bias");
  std::vector<double> y(batch * M * N);
  for (int64_t i = 0; i < batch * M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += x[i * K + k] * w[j * K + k];
      y[i * N + j] = acc + bias[j];
    }
  }
  return {{"y", y}};
}

}  // namespace

void add_matmul(NnReferences& r) {
  r["matmul"] = NnReference{problems(), reference};
  r["linear"] = NnReference{linear_problems(), linear_reference};
}

}  // namespace opforge::nn_golden
