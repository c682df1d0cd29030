// Seeded arguments of any dense op for tests that run two call forms on equal copies and
// compare the bytes (the sliced and whole calls, the dense and full call paths).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "runtime/runtime_test_util.h"

namespace opforge::testing {

// Seeded arguments of any dense op, as raw bytes in each tensor's dtype: states in [0.1, 1)
// (second moments stay positive), other tensors in [-1, 1); scalars 0.5 (bit_test_scalar),
// integer scalars 1. Copies compare byte for byte; views() points into this object.
// 8-bit states: codes over all 256 values, and block_scale tensors of ceil(n / block)
// absmaxes in [0.1, 1). A result tensor (found_inf) holds one element, 0.
struct DenseArgs {
  std::vector<std::vector<uint8_t>> bytes;  // one per tensor input, descriptor order
  std::vector<std::string> names;
  std::vector<registry::DType> dtypes;
  std::vector<int64_t> lengths;  // n; ceil(n / block) for a block_scale; 1 for a result
  std::vector<bool> scales;
  std::vector<ScalarView> scalars;
  int64_t n, block;

  DenseArgs(const registry::Descriptor& d, int64_t n_, unsigned seed)
      : n(n_), block(d.shape.block) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> pos(0.1f, 1.f), sym(-1.f, 1.f);
    for (const registry::Input& in : d.inputs) {
      if (in.role == registry::Input::Role::scalar) {
        const bool integer = in.dtype == registry::DType::i32 || in.dtype == registry::DType::i64;
        scalars.push_back({in.name.c_str(), integer ? 1.0 : bit_test_scalar(in)});
        continue;
      }
      const bool scale = in.role == registry::Input::Role::block_scale;
      const bool result = in.role == registry::Input::Role::result;
      names.push_back(in.name);
      dtypes.push_back(in.dtype);
      scales.push_back(scale);
      lengths.push_back(scale ? (n + block - 1) / block : result ? 1 : n);
      std::vector<uint8_t> b(static_cast<size_t>(lengths.back()) * registry::dtype_bytes(in.dtype));
      for (int64_t i = 0; i < lengths.back(); ++i) {
        const float x = result                                             ? 0.f
                        : in.role == registry::Input::Role::state || scale ? pos(rng)
                                                                           : sym(rng);
        store_element(b.data(), in.dtype, i, in.dtype == registry::DType::u8 ? x * 255 : x);
      }
      bytes.push_back(std::move(b));
    }
  }

  std::vector<TensorView> views() {
    std::vector<TensorView> v;
    for (size_t k = 0; k < bytes.size(); ++k) {
      v.push_back({names[k].c_str(), bytes[k].data(), dtypes[k], &lengths[k], 1});
    }
    return v;
  }
};

// One call of k on all of a.
inline void call_whole(Kernel& k, DenseArgs& a) {
  auto v = a.views();
  k.call(v.data(), v.size(), a.scalars.data(), a.scalars.size());
}
// The first tensor whose bytes differ, and where ("" when equal).
inline std::string first_difference(const DenseArgs& a, const DenseArgs& b) {
  for (size_t k = 0; k < a.bytes.size(); ++k) {
    if (a.bytes[k] == b.bytes[k]) continue;
    const size_t size = registry::dtype_bytes(a.dtypes[k]);
    size_t at = 0;
    while (a.bytes[k][at] == b.bytes[k][at]) ++at;
    return "'" + a.names[k] + "' element " + std::to_string(at / size);
  }
  return "";
}

}  // namespace opforge::testing
