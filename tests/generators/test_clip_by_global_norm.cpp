// Reference: tf.clip_by_global_norm (clip_ops.py) and torch.nn.utils.clip_grad_norm_
// (norm_type 2, error_if_nonfinite False), on one flat buffer:
//   n = sqrt(sum(grad^2))
//   tf:    grad *= clip_norm * min(1/n, 1/clip_norm) (+ (n - n): NaN when n is not finite)
//   torch: grad *= clamp(clip_norm / (n + 1e-6), max=1)
//   global_norm = n
#include <cmath>
#include <limits>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

const RegisterReference reg(
    "clip_by_global_norm",
    {[](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
       t["grad"] = uniform(rng, n, -1, 1);
       t["global_norm"] = {uniform(rng, 1, 0, 5)[0]};  // written, whatever it held
       // Around the expected norm sqrt(n/3): clipped about half of the time.
       s["clip_norm"] = static_cast<float>(std::sqrt(n / 3.0) * uniform(rng, 1, 0.5, 1.5)[0]);
     },
     [](const Attrs& a, const Scalars& s, Tensors& t) {
       std::vector<double>& g = t.at("grad");
       double sq = 0;
       for (double x : g) sq += x * x;
       const double n = static_cast<float>(std::sqrt(sq));  // the frameworks' fp32 norm
       const double clip = s.at("clip_norm");
       double scale;
       if (a.at("convention") == "tf") {
         scale = std::isfinite(n) ? clip * std::min(1 / n, 1 / clip)
                                  : std::numeric_limits<double>::quiet_NaN();
       } else {
         scale = std::isnan(n) ? n : std::min(clip / (n + 1e-6), 1.0);
       }
       for (double& x : g) x *= scale;
       t.at("global_norm") = {n};
     }});

}  // namespace
}  // namespace opforge::testing

#include <doctest/doctest.h>

#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

// Non-finite norms: TF gives NaN gradients for an inf or NaN norm; torch zeroes them for an
// infinite norm (clip / inf = 0) and gives NaN for a NaN norm. A zero norm leaves them as is.
TEST_CASE("clip_by_global_norm: zero, infinite and NaN norms per convention, every ISA") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    for (const char* conv : {"tf", "torch"}) {
      CAPTURE(isa);
      CAPTURE(conv);
      Kernel& k = reg->select("clip_by_global_norm", {{"convention", conv}}, isa);
      for (int kind = 0; kind < 3; ++kind) {  // zero, one inf, one NaN
        const int64_t n = 37;
        std::vector<float> g(n, kind == 0 ? 0.0f : 0.5f), norm(1, -1.0f);
        if (kind == 1) g[20] = INFINITY;
        if (kind == 2) g[20] = NAN;
        k.call({{"grad", g.data(), registry::DType::f32, {n}},
                {"global_norm", norm.data(), registry::DType::f32, {1}}},
               {{"clip_norm", 1.0}});
        CAPTURE(kind);
        if (kind == 0) {
          CHECK(norm[0] == 0.0f);
          for (float x : g) CHECK(x == 0.0f);
        } else if (kind == 1) {
          CHECK(std::isinf(norm[0]));
          const bool tf = std::string(conv) == "tf";
          for (int64_t i = 0; i < n; ++i) {
            CAPTURE(i);
            if (tf || i == 20) {
              CHECK(std::isnan(g[i]));  // tf: NaN scale; torch: inf * 0
            } else {
              CHECK(g[i] == 0.0f);
            }
          }
        } else {
          CHECK(std::isnan(norm[0]));
          for (float x : g) CHECK(std::isnan(x));
        }
      }
    }
  }
}

}  // namespace
}  // namespace opforge::testing

// Reference: tf.linalg.global_norm / torch.nn.utils.get_total_norm, accumulated from the old
// value: global_norm = sqrt(global_norm^2 + sum(grad^2)).
namespace opforge::testing {
namespace {

const RegisterReference global_norm_reference(
    "global_norm", {[](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars&) {
                      t["grad"] = uniform(rng, n, -1, 1);
                      t["global_norm"] = {uniform(rng, 1, 0, 3)[0]};  // a norm so far
                    },
                    [](const Attrs&, const Scalars&, Tensors& t) {
                      double sq = 0;
                      for (double x : t.at("grad")) sq += x * x;
                      const double old = t.at("global_norm")[0];
                      t.at("global_norm") = {std::sqrt(old * old + sq)};
                    }});

// Calls one per tensor, accumulating from 0, give the norm of one call over their flat buffer;
// the gradients are only read.
TEST_CASE("global_norm: per-tensor calls accumulate to the flat call's norm, grads untouched") {
  auto reg = Registry::open(test_registry_dir());
  Kernel& k = reg->select("global_norm", {}, "avx2");
  std::mt19937 rng(9);
  const std::vector<size_t> sizes = {1, 5, 17, 1000, 65543};
  std::vector<float> flat;
  for (size_t n : sizes) {
    for (double x : uniform(rng, n, -1, 1)) flat.push_back(static_cast<float>(x));
  }
  const std::vector<float> before = flat;
  std::vector<float> whole = {0.f}, parts = {0.f};
  k.call({{"grad", flat.data(), registry::DType::f32, {int64_t(flat.size())}},
          {"global_norm", whole.data(), registry::DType::f32, {1}}},
         {});
  size_t off = 0;
  for (size_t n : sizes) {
    k.call({{"grad", flat.data() + off, registry::DType::f32, {int64_t(n)}},
            {"global_norm", parts.data(), registry::DType::f32, {1}}},
           {});
    off += n;
  }
  double sq = 0;
  for (float x : before) sq += double(x) * x;
  CHECK(std::fabs(whole[0] - std::sqrt(sq)) <= 3e-7 * std::sqrt(sq));
  CHECK(std::fabs(parts[0] - std::sqrt(sq)) <= 1e-6 * std::sqrt(sq));  // 5 fp32 roundings
  CHECK(flat == before);
}

}  // namespace
}  // namespace opforge::testing
