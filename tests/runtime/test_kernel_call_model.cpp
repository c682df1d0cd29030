// call_model: one kernel call over a model's flat buffers gives every tensor the bits of one
// call per tensor (tensor_views), for fp32 and mixed-precision (bf16m) variants, whatever the
// padding holds; zero padding stays zero for Adam, SGD and momentum; ops that cannot run on
// flat buffers and flat buffers of the wrong length are refused before anything runs.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "opforge/model_layout.hpp"
#include "opforge/model_presets.hpp"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

using registry::Descriptor;
using registry::DType;
using registry::Input;

// Flat buffers for every tensor argument of `d` over `layout`, as raw bytes: each tensor's
// elements seeded (states in [0.1, 1), other tensors +-[0.1, 1)), padding filled with `pad`.
struct FlatArgs {
  std::vector<std::vector<uint8_t>> bytes;  // descriptor order
  std::vector<std::string> names;
  std::vector<DType> dtypes;
  std::vector<ScalarView> scalars;
  int64_t total;

  FlatArgs(const Descriptor& d, const ModelLayout& layout, unsigned seed, float pad)
      : total(layout.total_elements()) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> mag(0.1f, 1.f);
    std::bernoulli_distribution negative(0.5);
    for (const Input& in : d.inputs) {
      if (in.role == Input::Role::scalar) {
        const bool integer = in.dtype == DType::i32 || in.dtype == DType::i64;
        scalars.push_back({in.name.c_str(), integer ? 1.0 : bit_test_scalar(in)});
        continue;
      }
      names.push_back(in.name);
      dtypes.push_back(in.dtype);
      std::vector<uint8_t> b(static_cast<size_t>(total) * registry::dtype_bytes(in.dtype));
      for (int64_t i = 0; i < total; ++i) store_element(b.data(), in.dtype, i, pad);
      for (size_t t = 0; t < layout.size(); ++t) {
        for (int64_t i = 0; i < layout.elements(t); ++i) {
          const float x = mag(rng);
          store_element(b.data(), in.dtype, layout.offset(t) + i,
                        in.role != Input::Role::state && negative(rng) ? -x : x);
        }
      }
      bytes.push_back(std::move(b));
    }
  }

  std::vector<TensorView> views() {
    std::vector<TensorView> v;
    for (size_t k = 0; k < bytes.size(); ++k) {
      v.push_back({names[k].c_str(), bytes[k].data(), dtypes[k], &total, 1});
    }
    return v;
  }
};

void run_model(Kernel& k, const ModelLayout& l, FlatArgs& a) {
  const auto v = a.views();
  call_model(k, l, v.data(), v.size(), a.scalars.data(), a.scalars.size());
}

void run_per_tensor(Kernel& k, const ModelLayout& l, FlatArgs& a) {
  const auto flat = a.views();
  for (size_t i = 0; i < l.size(); ++i) {
    const auto v = tensor_views(l, i, flat.data(), flat.size());
    k.call(v.data(), v.size(), a.scalars.data(), a.scalars.size());
  }
}

// The first real (non-padding) element whose bytes differ, "" when none.
std::string tensors_differ(const ModelLayout& l, const FlatArgs& a, const FlatArgs& b) {
  for (size_t k = 0; k < a.bytes.size(); ++k) {
    const size_t size = registry::dtype_bytes(a.dtypes[k]);
    for (size_t t = 0; t < l.size(); ++t) {
      const size_t from = l.offset(t) * size, len = l.elements(t) * size;
      if (std::memcmp(a.bytes[k].data() + from, b.bytes[k].data() + from, len) == 0) continue;
      size_t at = 0;
      while (a.bytes[k][from + at] == b.bytes[k][from + at]) ++at;
      return "'" + a.names[k] + "' of tensor '" + l.tensor(t).name + "', element " +
             std::to_string(at / size);
    }
  }
  return "";
}

// Whether every padding byte of argument k equals `byte`.
bool padding_is(const ModelLayout& l, const FlatArgs& a, size_t k, uint8_t byte) {
  const size_t size = registry::dtype_bytes(a.dtypes[k]);
  for (size_t t = 0; t < l.size(); ++t) {
    for (size_t p = (l.offset(t) + l.elements(t)) * size; p < l.offsets()[t + 1] * size; ++p) {
      if (a.bytes[k][p] != byte) return false;
    }
  }
  return true;
}

// Odd tensor sizes: vector tails, the serial path (below 16384) and the parallel one.
const std::vector<TensorShape> kOdd = {
    {"a", {1}}, {"b", {5}}, {"c", {17}}, {"d", {10, 100}}, {"e", {65543}}};

// Variants whose vector tails round differently from full vectors (test_kernel_chunked_calls.cpp,
// position_dependent): their elements depend on where a call starts, so a flat call and
// per-tensor calls agree within tolerance, not in every bit.
bool position_dependent(const std::string& variant) {
  for (const char* p : {"apply_adagrad__update_slots_1__", "apply_adagrad_v2__update_slots_1__",
                        "apply_ftrl__multiply_linear_by_lr_1__f32__avx2"}) {
    if (variant.rfind(p, 0) == 0) return true;
  }
  return false;
}

// Every optimizer op's default variant on each ISA this CPU runs, fp32 and bf16m storage.
std::vector<Kernel*> flat_callable(Registry& reg) {
  const std::vector<std::string> isas =
      host_isas(reg, "apply_adam").runnable;  // says what it skips
  std::vector<Kernel*> out;
  for (const auto& op : reg.ops()) {
    const Descriptor first = reg.variants(op).front();
    if (first.kind != "optimizer" || !first.shape.splittable) continue;
    for (const std::string storage : {"f32", "bf16m"}) {
      for (const std::string& isa : isas) {
        try {
          Kernel& k = reg.select(op, {{"storage", storage}}, isa);
          if (!position_dependent(k.descriptor().variant)) out.push_back(&k);
        } catch (const Error&) {
          // no such storage for this op
        }
      }
    }
  }
  return out;
}

TEST_CASE(
    "call_model: every flat-callable default variant equals one call per tensor, bit for bit") {
  Registry& reg = shared_registry();
  const std::vector<Kernel*> kernels = flat_callable(reg);
  int bf16m = 0;
  for (Kernel* k : kernels) bf16m += storage_tag(k->descriptor()) == "bf16m";
  CHECK(kernels.size() >= 15);
  CHECK(bf16m >= 4);  // adam, adamw, gradient descent, momentum
  for (const int64_t alignment : {int64_t(32), int64_t(1)}) {
    const ModelLayout l(kOdd, alignment);
    for (Kernel* k : kernels) {
      CAPTURE(k->descriptor().variant);
      CAPTURE(alignment);
      FlatArgs model(k->descriptor(), l, 21, 0.0f), per = model;
      run_model(*k, l, model);
      run_per_tensor(*k, l, per);
      CHECK(tensors_differ(l, model, per) == "");
      for (size_t a = 0; a < per.bytes.size(); ++a) CHECK(padding_is(l, per, a, 0));
    }
  }
}

TEST_CASE("call_model: padding is updated but never reaches real elements") {
  Registry& reg = shared_registry();
  const ModelLayout l(kOdd);
  for (const char* op : {"apply_adam", "apply_gradient_descent", "apply_momentum"}) {
    for (const std::string storage : {"f32", "bf16m"}) {
      Kernel& k = reg.select(op, {{"storage", storage}});
      CAPTURE(k.descriptor().variant);
      // Zero padding stays zero, in every argument (the bf16 model copy too).
      FlatArgs zeros(k.descriptor(), l, 5, 0.0f), per = zeros;
      run_model(k, l, zeros);
      for (size_t a = 0; a < zeros.bytes.size(); ++a) {
        CAPTURE(zeros.names[a]);
        CHECK(padding_is(l, zeros, a, 0));
      }
      // NaN padding changes no real element: the same bits as per-tensor calls.
      FlatArgs nans(k.descriptor(), l, 5, std::nanf(""));
      run_model(k, l, nans);
      run_per_tensor(k, l, per);
      CHECK(tensors_differ(l, nans, per) == "");
      CHECK(tensors_differ(l, zeros, per) == "");
      CHECK_FALSE(padding_is(l, nans, 0, 0));
    }
  }
}

TEST_CASE("call_model: the Tensor overload, and a preset model") {
  Registry& reg = shared_registry();
  Kernel& sgd = reg.select("apply_gradient_descent");
  const ModelLayout l = model_preset("resnet-1001");
  std::vector<float> var(l.total_elements()), delta(l.total_elements());
  for (size_t t = 0; t < l.size(); ++t) {
    for (int64_t i = 0; i < l.elements(t); ++i) {
      var[l.offset(t) + i] = static_cast<float>(t % 7) - 3.0f;
      delta[l.offset(t) + i] = 0.25f * static_cast<float>(i % 5);
    }
  }
  std::vector<float> per = var;
  const int64_t total = l.total_elements();
  call_model(
      sgd, l,
      {{"var", var.data(), DType::f32, {total}}, {"delta", delta.data(), DType::f32, {total}}},
      {{"alpha", 0.5}});
  const std::vector<Tensor> flat = {{"var", per.data(), DType::f32, {total}},
                                    {"delta", delta.data(), DType::f32, {total}}};
  for (size_t t = 0; t < l.size(); ++t) sgd.call(tensor_views(l, t, flat), {{"alpha", 0.5}});
  CHECK(std::memcmp(var.data(), per.data(), var.size() * sizeof(float)) == 0);
  const size_t last = l.size() - 1;  // linear.bias[3] = (t % 7 - 3) - 0.5 * 0.75
  CHECK(var[l.offset(last) + 3] == static_cast<float>(last % 7) - 3.0f - 0.375f);
}

TEST_CASE("call_model: refusals name the op or the argument and change nothing") {
  Registry& reg = shared_registry();
  const ModelLayout l(kOdd);
  SUBCASE("LAMB and LARS need per-tensor norms") {
    for (const char* op : {"apply_lamb", "apply_lars"}) {
      CAPTURE(op);
      Kernel& k = reg.select(op);
      FlatArgs a(k.descriptor(), l, 3, 0.0f);
      const FlatArgs before = a;
      const std::string msg = error_of([&] { run_model(k, l, a); });
      CHECK(contains(msg, "op '" + std::string(op) + "' needs per-tensor norms"));
      CHECK(contains(msg, "once per tensor"));
      CHECK(a.bytes == before.bytes);
      CHECK(contains(error_of([&] { check_multi_tensor(k.descriptor()); }), "per-tensor norms"));
    }
  }
  SUBCASE("sparse ops") {
    Kernel& k = reg.select("sparse_apply_adagrad");
    const std::string msg =
        error_of([&] { call_model(k, l, std::vector<Tensor>{}, std::map<std::string, double>{}); });
    CHECK(contains(msg, "op 'sparse_apply_adagrad' is a sparse op"));
    CHECK(contains(msg, "'indices'"));
  }
  SUBCASE("a flat buffer whose length is not the layout's total") {
    Kernel& adam = reg.select("apply_adam");
    FlatArgs a(adam.descriptor(), l, 3, 0.0f);
    const FlatArgs before = a;
    auto v = a.views();
    const int64_t shorter = l.total_elements() - 32;
    v[2].shape = &shorter;  // v
    std::string msg = error_of(
        [&] { call_model(adam, l, v.data(), v.size(), a.scalars.data(), a.scalars.size()); });
    CHECK(contains(msg, "op 'apply_adam'"));
    CHECK(contains(msg, "flat argument 'v' has 66656 elements"));
    CHECK(contains(msg, "needs 66688"));
    CHECK(contains(msg, "32-element alignment"));
    // The model's own element count is not enough: the padding belongs to the buffers.
    const int64_t unpadded = l.model_elements();
    for (auto& x : v) x.shape = &unpadded;
    msg = error_of(
        [&] { call_model(adam, l, v.data(), v.size(), a.scalars.data(), a.scalars.size()); });
    CHECK(contains(msg, "flat argument 'var' has 66566 elements"));
    const int64_t negative[2] = {-1, 4};
    v[0].shape = negative;
    v[0].rank = 2;
    CHECK(contains(error_of([&] {
                     call_model(adam, l, v.data(), v.size(), a.scalars.data(), a.scalars.size());
                   }),
                   "'var' has a negative dimension [-1, 4]"));
    CHECK(a.bytes == before.bytes);
  }
  SUBCASE("the kernel's own checks still apply (a missing scalar)") {
    Kernel& adam = reg.select("apply_adam");
    FlatArgs a(adam.descriptor(), l, 3, 0.0f);
    const auto v = a.views();
    CHECK(contains(error_of([&] { call_model(adam, l, v.data(), v.size(), a.scalars.data(), 2); }),
                   "missing scalar argument"));
  }
}

}  // namespace
}  // namespace opforge::testing
