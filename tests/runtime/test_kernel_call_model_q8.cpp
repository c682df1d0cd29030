// call_model with 8-bit states (storages q8s and q8ls: uint8 codes plus one fp32 absmax per
// 256 elements): on a layout aligned to the block, one call over the flat buffers equals one call
// per tensor (tensor_views cuts each tensor's codes and absmaxes): codes and absmaxes bit for
// bit (every block holds one tensor's elements; zero padding keeps zero codes and absmaxes),
// the parameter within an ulp. A layout whose
// alignment is not a multiple of the block is refused, naming the op and the alignment it
// needs, before anything runs.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "opforge/model_layout.hpp"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

const std::vector<TensorShape> kOdd = {{"a", {1}},       {"b", {5}},     {"c", {17}},
                                       {"d", {10, 100}}, {"e", {65543}}, {"f", {3}}};
const std::map<std::string, double> kAdamW = {{"lr", 0.01},           {"beta1", 0.9},
                                              {"beta2", 0.999},       {"epsilon", 1e-8},
                                              {"weight_decay", 0.01}, {"step", 3}};

struct Q8Buffers {
  std::vector<float> var, grad, m_absmax, v_absmax;
  std::vector<uint8_t> m, v;
  std::vector<Tensor> tensors(int64_t total, int64_t blocks) {
    return {{"var", var.data(), registry::DType::f32, {total}},
            {"grad", grad.data(), registry::DType::f32, {total}},
            {"m", m.data(), registry::DType::u8, {total}},
            {"v", v.data(), registry::DType::u8, {total}},
            {"m_absmax", m_absmax.data(), registry::DType::f32, {blocks}},
            {"v_absmax", v_absmax.data(), registry::DType::f32, {blocks}}};
  }
};

// Seeded tensors, zero padding (parameter, gradient, the maps' codes of 0, absmax 0).
Q8Buffers make(const ModelLayout& l, int64_t block) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f), a(0.1f, 1.f);
  std::uniform_int_distribution<int> code(0, 255);
  const size_t total = static_cast<size_t>(l.total_elements());
  Q8Buffers b{std::vector<float>(total, 0.f),         std::vector<float>(total, 0.f),
              std::vector<float>(total / block, 0.f), std::vector<float>(total / block, 0.f),
              std::vector<uint8_t>(total, 127),       std::vector<uint8_t>(total, 0)};
  for (size_t t = 0; t < l.size(); ++t) {
    for (int64_t i = 0; i < l.elements(t); ++i) {
      const size_t k = static_cast<size_t>(l.offset(t) + i);
      b.var[k] = u(rng);
      b.grad[k] = u(rng);
      b.m[k] = static_cast<uint8_t>(code(rng));
      b.v[k] = static_cast<uint8_t>(code(rng));
    }
    for (int64_t j = 0; j < (l.elements(t) + block - 1) / block; ++j) {
      b.m_absmax[l.offset(t) / block + j] = a(rng);
      b.v_absmax[l.offset(t) / block + j] = a(rng);
    }
  }
  return b;
}

TEST_CASE("call_model: 8-bit states on a block-aligned layout equal one call per tensor") {
  Registry& reg = shared_registry();
  // Both maps (the linear map's code of 0 is 127 signed and 0 unsigned, as the dynamic's).
  for (const std::string& isa : host_isas(reg, "apply_adamw").runnable) {
    for (const std::string storage : {"q8s", "q8ls"}) {
      Kernel& k = reg.select("apply_adamw", {{"storage", storage}}, isa);
      const int64_t block = k.descriptor().shape.block;
      REQUIRE(block == 256);
      for (const int64_t align : {256, 2048}) {
        CAPTURE(isa);
        CAPTURE(storage);
        CAPTURE(align);
        const ModelLayout l(kOdd, align);
        const int64_t total = l.total_elements(), blocks = total / block;
        Q8Buffers one = make(l, block), per = one;
        call_model(k, l, one.tensors(total, blocks), kAdamW);
        const std::vector<Tensor> flat = per.tensors(total, blocks);
        for (size_t i = 0; i < l.size(); ++i) {
          const std::vector<Tensor> views = tensor_views(l, i, flat, &k.descriptor());
          for (const Tensor& t : views) {
            if (t.name.find("_absmax") != std::string::npos)
              CHECK(t.shape == std::vector<int64_t>{(l.elements(i) + block - 1) / block});
          }
          k.call(views, kAdamW);
        }
        // The parameter: within an ulp of the update's operands. A tensor's last, partial block
        // takes the kernel's tail path, whose AVX2 code rounds the step differently in the last
        // bit (seen: one element of 66566, var -0.0204 + 0.0225 = 0.00208, 9e-7 apart relative to
        // the result, one ulp of the step); inside one flat call that block is whole.
        const Q8Buffers start = make(l, block);
        int ulp_apart = 0;
        for (size_t e = 0; e < one.var.size(); ++e) {
          if (one.var[e] == per.var[e]) continue;
          ++ulp_apart;
          const double bound = 0x1p-23 * (std::fabs(start.var[e]) + std::fabs(per.var[e]));
          CHECK_MESSAGE(std::fabs(double(one.var[e]) - per.var[e]) <= bound,
                        "var[" << e << "] = " << one.var[e] << " in one call, " << per.var[e]
                               << " per tensor, from " << start.var[e]);
        }
        CHECK(ulp_apart * 1000 <= static_cast<int>(l.model_elements()));
        CHECK(one.m == per.m);
        CHECK(one.v == per.v);
        CHECK(one.m_absmax == per.m_absmax);
        CHECK(one.v_absmax == per.v_absmax);
        // The padding stayed zero: the codes of 0, absmax 0, parameter 0.
        for (size_t t = 0; t + 1 <= l.size(); ++t) {
          const int64_t end = l.offset(t) + l.elements(t);
          const int64_t next = t + 1 < l.size() ? l.offset(t + 1) : total;
          for (int64_t e = end; e < next; ++e) {
            REQUIRE(one.var[e] == 0.f);
            REQUIRE(one.m[e] == 127);
            REQUIRE(one.v[e] == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("call_model: 8-bit states refuse a layout whose blocks would straddle tensors") {
  Registry& reg = shared_registry();
  Kernel& k = reg.select("apply_adamw", {{"storage", "q8s"}}, "avx2");
  const ModelLayout l(kOdd, 32);
  Q8Buffers b = make(ModelLayout(kOdd, 256), 256);  // any buffers: refused before the sizes
  const Q8Buffers before = b;
  const std::string what = error_of(
      [&] { call_model(k, l, b.tensors(l.total_elements(), l.total_elements() / 256), kAdamW); });
  CHECK(contains(what, "blocks of 256"));
  CHECK(contains(what, "ModelLayout(tensors, 256)"));
  CHECK(contains(what, "got 32"));
  CHECK(b.var == before.var);
  CHECK(b.m == before.m);
}

}  // namespace
}  // namespace opforge::testing
