// NN-op calls through the runtime, on bandwidth_copy (the simplest NN kernel): fresh outputs
// passed by name, shapes checked against the descriptor's named dims, errors naming the
// argument and both shapes, outputs that overlap an input refused, every ISA on odd sizes.
#include <doctest/doctest.h>

#include <functional>
#include <vector>

#include "opforge/runtime.hpp"
#include "runtime/runtime_test_util.h"
#include "test_registry.h"

using namespace opforge;
using opforge::testing::error_of;

namespace {}  // namespace

TEST_CASE("bandwidth_copy copies odd sizes exactly on every ISA the CPU has") {
  auto reg = Registry::open(testing::test_registry_dir());
  for (const auto& d : reg->variants("bandwidth_copy")) {
    if (!testing::runs_here(d)) continue;
    Kernel& k = reg->load(d.variant);
    for (int64_t n : {1, 5, 17, 1000, 8191, 8192, 65543}) {
      CAPTURE(d.variant);
      CAPTURE(n);
      std::vector<float> x(n), y(n, -1.f);
      for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * static_cast<float>(i) - 3.f;
      const std::vector<Tensor> t = {{"x", x.data(), registry::DType::f32, {n}},
                                     {"y", y.data(), registry::DType::f32, {n}}};
      CHECK(k.output_shapes(t, {}) == std::vector<std::vector<int64_t>>{{n}});
      k.call(t, {});
      CHECK(y == x);
    }
  }
}

TEST_CASE("bad NN calls name the argument and the shapes") {
  auto reg = Registry::open(testing::test_registry_dir());
  Kernel& k = reg->select("bandwidth_copy");
  std::vector<float> x(12), y(12), z(13);
  using registry::DType;
  CHECK(error_of([&] {
          k.call({{"x", x.data(), DType::f32, {3, 4}}, {"y", y.data(), DType::f32, {12}}}, {});
        }) == "op 'bandwidth_copy': argument 'x' has shape [3, 4] (rank 2), expected rank 1: [N]");
  CHECK(error_of([&] {
          k.call({{"x", x.data(), DType::f32, {12}}, {"y", z.data(), DType::f32, {13}}}, {});
        }) == "op 'bandwidth_copy': output 'y' has shape [13], expected [12] = [N]");
  CHECK(error_of([&] {
          k.call({{"x", x.data(), DType::f32, {12}}}, {});
        }) == "op 'bandwidth_copy': missing tensor argument 'y'");
  CHECK(error_of([&] {
          k.call({{"x", x.data(), DType::f32, {12}}, {"y", x.data() + 4, DType::f32, {12}}}, {});
        }).find("output 'y' overlaps argument 'x'") != std::string::npos);
  CHECK(error_of([&] {
          k.call({{"x", x.data(), DType::f32, {12}}, {"y", y.data(), DType::f64, {12}}}, {});
        }).find("argument 'y' has dtype float64, expected float32") != std::string::npos);
  CHECK(error_of([&] {
          reg->select("bandwidth_copy", {{"algorithm", "winograd"}});
        }).find("has no algorithm 'winograd'") != std::string::npos);
  // Nothing was written by a refused call.
  CHECK(y == std::vector<float>(12, 0.f));
}

TEST_CASE("an empty NN call runs nothing and succeeds") {
  auto reg = Registry::open(testing::test_registry_dir());
  Kernel& k = reg->select("bandwidth_copy");
  float x = 1, y = 2;
  k.call({{"x", &x, registry::DType::f32, {0}}, {"y", &y, registry::DType::f32, {0}}}, {});
  CHECK(y == 2);
}
