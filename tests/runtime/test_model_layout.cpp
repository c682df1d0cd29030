// ModelLayout: offsets, alignment and totals of a model's tensors in flat buffers, and the
// errors of a bad model (no registry needed).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "opforge/model_layout.hpp"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

std::vector<TensorShape> odd_sizes() {
  return {{"a", {1}}, {"b", {5}}, {"c", {17}}, {"d", {10, 100}}, {"e", {65543}}};
}

TEST_CASE("layout: offsets are aligned, the table has T + 1 entries ending at the total") {
  const ModelLayout l(odd_sizes());
  CHECK(ModelLayout::kDefaultAlignment == 32);
  CHECK(l.alignment() == 32);
  CHECK(l.size() == 5);
  // 0 | 1 -> 32 | 32 + 5 -> 64 | 64 + 17 -> 96 | 96 + 1000 = 1096 -> 1120 | 1120 + 65543 =
  // 66663 -> 66688.
  CHECK(l.offsets() == std::vector<int64_t>{0, 32, 64, 96, 1120, 66688});
  CHECK(l.element_counts() == std::vector<int64_t>{1, 5, 17, 1000, 65543});
  CHECK(l.offset(3) == 96);
  CHECK(l.elements(3) == 1000);
  CHECK(l.total_elements() == 66688);
  CHECK(l.model_elements() == 1 + 5 + 17 + 1000 + 65543);
  CHECK(l.tensor(3).shape == std::vector<int64_t>{10, 100});
  CHECK(l.index_of("e") == 4);
}

TEST_CASE("layout: alignment 1 packs the tensors with no padding; 16 pads to 64 B of fp32") {
  const ModelLayout packed(odd_sizes(), 1);
  CHECK(packed.offsets() == std::vector<int64_t>{0, 1, 6, 23, 1023, 66566});
  CHECK(packed.total_elements() == packed.model_elements());
  const ModelLayout sixteen(odd_sizes(), 16);
  CHECK(sixteen.offsets() == std::vector<int64_t>{0, 16, 32, 64, 1072, 66624});
  for (size_t i = 0; i < sixteen.size(); ++i) CHECK(sixteen.offset(i) % 16 == 0);
}

TEST_CASE("layout: rank-0 tensors hold one element, empty tensors none") {
  const ModelLayout l({{"scalar", {}}, {"empty", {3, 0}}, {"x", {2}}}, 4);
  CHECK(l.element_counts() == std::vector<int64_t>{1, 0, 2});
  CHECK(l.offsets() == std::vector<int64_t>{0, 4, 4, 8});
  CHECK(l.model_elements() == 3);
  const ModelLayout none({});
  CHECK(none.size() == 0);
  CHECK(none.offsets() == std::vector<int64_t>{0});
  CHECK(none.total_elements() == 0);
}

TEST_CASE("layout: bad models are errors naming the tensor") {
  SUBCASE("alignment: a power of two from 1 to 2^20") {
    for (const int64_t bad :
         {int64_t(0), int64_t(-16), int64_t(3), int64_t(24), int64_t(1) << 21}) {
      CAPTURE(bad);
      const std::string msg = error_of([&] { ModelLayout(odd_sizes(), bad); });
      CHECK(contains(msg, "alignment must be a power of two"));
      CHECK(contains(msg, "got " + std::to_string(bad)));
    }
  }
  SUBCASE("a negative dimension") {
    const std::string msg = error_of([] { ModelLayout({{"w", {4, -2}}}); });
    CHECK(contains(msg, "'w'"));
    CHECK(contains(msg, "negative dimension [4, -2]"));
  }
  SUBCASE("a duplicate name") {
    const std::string msg = error_of([] { ModelLayout({{"w", {4}}, {"b", {4}}, {"w", {2}}}); });
    CHECK(contains(msg, "'w' appears twice"));
    CHECK(contains(msg, "tensor 2"));
  }
  SUBCASE("an empty name") {
    CHECK(contains(error_of([] { ModelLayout({{"w", {4}}, {"", {4}}}); }), "tensor 1 has no name"));
  }
  SUBCASE("int64 overflow") {
    const int64_t big = int64_t(1) << 62;
    CHECK(contains(error_of([&] { ModelLayout({{"w", {big, 4}}}); }), "64 bits"));
    CHECK(contains(error_of([&] {
                     ModelLayout({{"a", {big}}, {"b", {big}}, {"c", {big}}});
                   }),
                   "64 bits"));
  }
  SUBCASE("an unknown name in index_of") {
    const ModelLayout l({{"weight", {4}}});
    const std::string msg = error_of([&] { l.index_of("wieght"); });
    CHECK(contains(msg, "no tensor 'wieght'"));
    CHECK(contains(msg, "did you mean 'weight'"));
  }
}

TEST_CASE("tensor_views: each tensor's part of the flat buffers, the tensor's own shape") {
  const ModelLayout l(odd_sizes());
  std::vector<float> var(l.total_elements());
  std::vector<uint16_t> grad(l.total_elements());
  const int64_t total = l.total_elements();
  const TensorView flat[2] = {{"var", var.data(), registry::DType::f32, &total, 1},
                              {"grad", grad.data(), registry::DType::bf16, &total, 1}};
  const std::vector<TensorView> d = tensor_views(l, 3, flat, 2);
  REQUIRE(d.size() == 2);
  CHECK(std::string(d[0].name) == "var");
  CHECK(d[0].data == var.data() + 96);
  CHECK(d[1].data == grad.data() + 96);  // offsets are in elements: 2 B per bf16 element
  CHECK(d[1].dtype == registry::DType::bf16);
  CHECK(d[0].rank == 2);
  CHECK(std::vector<int64_t>(d[0].shape, d[0].shape + 2) == std::vector<int64_t>{10, 100});

  const std::vector<Tensor> owned = {{"var", var.data(), registry::DType::f32, {total}}};
  const std::vector<Tensor> e = tensor_views(l, 4, owned);
  CHECK(e.at(0).data == var.data() + 1120);
  CHECK(e.at(0).shape == std::vector<int64_t>{65543});

  const int64_t short_total = total - 1;
  const TensorView wrong[1] = {{"var", var.data(), registry::DType::f32, &short_total, 1}};
  const std::string msg = error_of([&] { tensor_views(l, 0, wrong, 1); });
  CHECK(contains(msg, "'var' has 66687 elements"));
  CHECK(contains(msg, "needs 66688"));
  CHECK(contains(error_of([&] { tensor_views(l, 5, flat, 2); }), "tensor index 5 is out of range"));
}

}  // namespace
}  // namespace opforge::testing
