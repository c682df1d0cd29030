// The C ABI of multi-tensor apply: layouts from shapes and presets, their tables, and
// opforge_call_model against one opforge_call per tensor.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "opforge/opforge.h"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

TEST_CASE("C ABI: model layouts, their offsets table, presets") {
  const int64_t s0[1] = {5}, s1[2] = {3, 7}, s2[1] = {40};
  const opforge_tensor_shape shapes[3] = {{"w0", 1, s0}, {"w1", 2, s1}, {"b", 1, s2}};
  opforge_model_layout* l = nullptr;
  REQUIRE_MESSAGE(opforge_model_layout_create(shapes, 3, 8, &l) == 0, opforge_last_error());
  CHECK(opforge_model_layout_tensors(l) == 3);
  const int64_t* off = opforge_model_layout_offsets(l);
  const int64_t* n = opforge_model_layout_elements(l);
  CHECK(std::vector<int64_t>(off, off + 4) == std::vector<int64_t>{0, 8, 32, 72});
  CHECK(std::vector<int64_t>(n, n + 3) == std::vector<int64_t>{5, 21, 40});
  CHECK(opforge_model_layout_total_elements(l) == 72);
  CHECK(std::string(opforge_model_layout_name(l, 1)) == "w1");
  CHECK(opforge_model_layout_name(l, 3) == nullptr);
  opforge_model_layout_free(l);

  REQUIRE(opforge_model_layout_create(shapes, 3, 0, &l) == 0);  // 0: the default, 32
  CHECK(opforge_model_layout_offsets(l)[1] == 32);
  opforge_model_layout_free(l);

  CHECK(opforge_model_layout_create(shapes, 3, 12, &l) != 0);
  CHECK(l == nullptr);
  CHECK(contains(opforge_last_error(), "alignment must be a power of two"));
  const opforge_tensor_shape twice[2] = {{"w", 1, s0}, {"w", 1, s2}};
  CHECK(opforge_model_layout_create(twice, 2, 0, &l) != 0);
  CHECK(contains(opforge_last_error(), "'w' appears twice"));
  const int64_t neg[1] = {-5};
  const opforge_tensor_shape negative[1] = {{"w", 1, neg}};
  CHECK(opforge_model_layout_create(negative, 1, 0, &l) != 0);
  CHECK(contains(opforge_last_error(), "negative dimension"));
  const opforge_tensor_shape unnamed[1] = {{nullptr, 1, s0}};
  CHECK(opforge_model_layout_create(unnamed, 1, 0, &l) != 0);
  CHECK(contains(opforge_last_error(), "tensor 0 has no name"));

  std::vector<std::string> presets;
  for (size_t i = 0; opforge_model_preset_name(i); ++i)
    presets.push_back(opforge_model_preset_name(i));
  CHECK(presets.size() == 3);
  REQUIRE(opforge_model_layout_preset("transformer-small", 0, &l) == 0);
  CHECK(opforge_model_layout_tensors(l) == 148);
  CHECK(opforge_model_layout_total_elements(l) == 124439808);
  CHECK(std::string(opforge_model_layout_name(l, 0)) == "wte");
  opforge_model_layout_free(l);
  CHECK(opforge_model_layout_preset("gpt-5", 0, &l) != 0);
  CHECK(contains(opforge_last_error(), "unknown model preset 'gpt-5'"));
  opforge_model_layout_free(nullptr);
}

TEST_CASE("C ABI: opforge_call_model equals one opforge_call per tensor; refusals") {
  opforge_registry* reg = nullptr;
  REQUIRE_MESSAGE(opforge_open(test_registry_dir().c_str(), &reg) == 0, opforge_last_error());
  opforge_kernel *sgd = nullptr, *lamb = nullptr;
  REQUIRE(opforge_select(reg, "apply_gradient_descent", nullptr, nullptr, &sgd) == 0);
  REQUIRE(opforge_select(reg, "apply_lamb", nullptr, nullptr, &lamb) == 0);
  const int64_t s0[1] = {17}, s1[2] = {100, 10}, s2[1] = {65543};
  const opforge_tensor_shape shapes[3] = {{"a", 1, s0}, {"b", 2, s1}, {"c", 1, s2}};
  opforge_model_layout* l = nullptr;
  REQUIRE(opforge_model_layout_create(shapes, 3, 0, &l) == 0);
  const int64_t total = opforge_model_layout_total_elements(l);
  std::vector<float> var(total, 0.f), delta(total, 0.f);
  const int64_t* off = opforge_model_layout_offsets(l);
  const int64_t* n = opforge_model_layout_elements(l);
  for (size_t t = 0; t < 3; ++t) {
    for (int64_t i = 0; i < n[t]; ++i) {
      var[off[t] + i] = static_cast<float>(std::cos(0.01 * static_cast<double>(i + t)));
      delta[off[t] + i] = static_cast<float>(std::sin(0.1 * static_cast<double>(i)));
    }
  }
  std::vector<float> per = var;
  const opforge_scalar s[1] = {{"alpha", 0.125}};
  opforge_tensor flat[2] = {{"var", var.data(), OPFORGE_F32, 1, &total},
                            {"delta", delta.data(), OPFORGE_F32, 1, &total}};
  REQUIRE_MESSAGE(opforge_call_model(sgd, l, flat, 2, s, 1) == 0, opforge_last_error());
  for (size_t t = 0; t < 3; ++t) {
    opforge_tensor one[2] = {
        {"var", per.data() + off[t], OPFORGE_F32, shapes[t].rank, shapes[t].shape},
        {"delta", delta.data() + off[t], OPFORGE_F32, shapes[t].rank, shapes[t].shape}};
    REQUIRE_MESSAGE(opforge_call(sgd, one, 2, s, 1) == 0, opforge_last_error());
  }
  CHECK(std::memcmp(var.data(), per.data(), total * sizeof(float)) == 0);

  CHECK(opforge_call_model(sgd, nullptr, flat, 2, s, 1) != 0);
  CHECK(contains(opforge_last_error(), "opforge_call_model: layout is NULL"));
  CHECK(opforge_call_model(nullptr, l, flat, 2, s, 1) != 0);
  CHECK(contains(opforge_last_error(), "opforge_call_model: kernel is NULL"));
  CHECK(opforge_call_model(lamb, l, flat, 2, s, 1) != 0);
  CHECK(contains(opforge_last_error(), "op 'apply_lamb' needs per-tensor norms"));
  const int64_t shorter = total - 1;
  flat[1].shape = &shorter;
  CHECK(opforge_call_model(sgd, l, flat, 2, s, 1) != 0);
  CHECK(contains(opforge_last_error(), "flat argument 'delta' has " + std::to_string(shorter)));
  opforge_model_layout_free(l);
  opforge_close(reg);
}

}  // namespace
}  // namespace opforge::testing
