// call_model beyond splittable ops: segmented forms (multi_tensor_apply_lamb / _lars) get their
// chunk table from the layout and match one single-tensor call per tensor (same formula; the
// fp64 norms may differ in summation order only); loss-scaled ops pass found_inf beside the
// flat buffers, and one non-finite gradient anywhere in the model skips the whole step.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "opforge/model_layout.hpp"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

const std::vector<TensorShape> kOdd = {{"a", {1}},       {"b", {5}},     {"c", {17}},
                                       {"d", {10, 100}}, {"e", {65543}}, {"f", {3}}};

// fp32 flat buffers for `names` over `layout`: seeded values in the tensors, zero padding.
std::map<std::string, std::vector<float>> flat_f32(const ModelLayout& l,
                                                   const std::vector<std::string>& names,
                                                   unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.1f, 1.f);
  std::map<std::string, std::vector<float>> out;
  for (const auto& n : names) {
    auto& v = out[n];
    v.assign(static_cast<size_t>(l.total_elements()), 0.f);
    for (size_t t = 0; t < l.size(); ++t) {
      for (int64_t i = 0; i < l.elements(t); ++i)
        v[l.offset(t) + i] = (n == "grad" ? -1 : 1) * u(rng);
    }
  }
  return out;
}

std::vector<Tensor> tensors_of(std::map<std::string, std::vector<float>>& m, int64_t total) {
  std::vector<Tensor> out;
  for (auto& [name, v] : m) out.push_back({name, v.data(), registry::DType::f32, {total}});
  return out;
}

const std::map<std::string, double> kLamb = {{"lr", 0.01},           {"beta1", 0.9},
                                             {"beta2", 0.999},       {"epsilon", 1e-6},
                                             {"weight_decay", 0.01}, {"step", 3}};

TEST_CASE("call_model: a segmented form equals the single-tensor op per tensor") {
  Registry& reg = shared_registry();
  for (const int64_t align : {16, 2048}) {
    CAPTURE(align);
    const ModelLayout l(kOdd, align);
    Kernel& multi = reg.select("multi_tensor_apply_lamb", {}, "avx2");
    Kernel& single = reg.select("apply_lamb", {}, "avx2");
    auto one = flat_f32(l, {"var", "m", "v", "grad"}, 11);
    auto per = one;
    call_model(multi, l, tensors_of(one, l.total_elements()), kLamb);
    const auto flat = tensors_of(per, l.total_elements());
    for (size_t i = 0; i < l.size(); ++i) single.call(tensor_views(l, i, flat), kLamb);
    for (const char* s : {"var", "m", "v"}) {
      CAPTURE(s);
      for (size_t i = 0; i < one.at(s).size(); ++i) {
        const float a = one.at(s)[i], b = per.at(s)[i];
        if (!(std::fabs(a - b) <= 1e-6f * std::fabs(b) + 1e-9f)) {
          FAIL_CHECK(s << "[" << i << "] = " << a << " in one call, " << b << " per tensor");
          break;
        }
      }
    }
  }
}

TEST_CASE("call_model: segmented forms refuse a bad chunk size and a caller's table") {
  Registry& reg = shared_registry();
  Kernel& multi = reg.select("multi_tensor_apply_lamb", {}, "avx2");
  const ModelLayout l8(kOdd, 8);
  auto b = flat_f32(l8, {"var", "m", "v", "grad"}, 1);
  const auto before = b;
  CHECK(
      contains(error_of([&] { call_model(multi, l8, tensors_of(b, l8.total_elements()), kLamb); }),
               "must be a multiple of 16"));
  CHECK(b == before);
  const ModelLayout l(kOdd, 16);
  auto c = flat_f32(l, {"var", "m", "v", "grad"}, 1);
  std::vector<int32_t> table(static_cast<size_t>(l.total_elements() / 16), 0);
  auto args = tensors_of(c, l.total_elements());
  args.push_back({"segments", table.data(), registry::DType::i32, {int64_t(table.size())}});
  CHECK(contains(error_of([&] { call_model(multi, l, args, kLamb); }),
                 "call_model builds 'segments' from the layout"));
}

TEST_CASE("call_model: loss scaling over a whole model, found_inf beside the flat buffers") {
  Registry& reg = shared_registry();
  Kernel& k =
      reg.select("apply_adam", {{"unscale", "true"}, {"skip_if_nonfinite", "true"}}, "avx2");
  const ModelLayout l(kOdd);
  for (const bool bad : {false, true}) {
    CAPTURE(bad);
    auto b = flat_f32(l, {"var", "m", "v", "grad"}, 5);
    if (bad) b["grad"][l.offset(4) + 100] = NAN;  // in tensor "e" only
    const auto before = b;
    std::vector<float> found = {0.f};
    auto args = tensors_of(b, l.total_elements());
    args.push_back({"found_inf", found.data(), registry::DType::f32, {1}});
    std::map<std::string, double> s = adam_scalars();
    s["inv_scale"] = 0.25;
    call_model(k, l, args, s);
    CHECK(found[0] == (bad ? 1.f : 0.f));
    for (const char* st : {"var", "m", "v"}) CHECK((b.at(st) == before.at(st)) == bad);
    // Per-tensor views share the one-element found_inf.
    const auto views = tensor_views(l, 1, args, &k.descriptor());
    CHECK(views.back().data == found.data());
    CHECK(views.front().data == static_cast<void*>(b.begin()->second.data() + l.offset(1)));
  }
}

}  // namespace
}  // namespace opforge::testing
