#include "registry/cli/bench/bench_workload.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>

#include "opforge/fp8.h"

namespace opforge::cli {

uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

uint16_t f16_bits_normal(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t sign = (u >> 16) & 0x8000u, mant = u & 0x7fffffu;
  const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  if (exp < 1 || exp > 30)
    throw std::runtime_error("f16_bits_normal: value outside f16's normal range");
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
  return static_cast<uint16_t>(h);
}

double default_scalar(const registry::Input& in) {
  if (in.typical) return *in.typical;
  if (in.default_value) return *in.default_value;
  return in.dtype == registry::DType::i32 || in.dtype == registry::DType::i64 ? 1.0 : 0.5;
}

Workload::Workload(const registry::Descriptor& d, int64_t n_,
                   const std::map<std::string, double>& given)
    : n(n_) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(0.1f, 1.0f);
  if (!d.shape.segments.empty()) {
    // Multi-tensor form, as one model tensor: chunks of the largest power of two in [16, 2048]
    // dividing n, else of 2048 (fewer, 16-aligned, for small n) with n rounded up to them.
    int64_t c = n < 2048 ? std::max<int64_t>(16, (n + 15) / 16 * 16) : 2048;
    for (int64_t p = 2048; p >= 16; p /= 2) {
      if (n >= p && n % p == 0) {
        c = p;
        break;
      }
    }
    chunks = (n + c - 1) / c;
    n = chunks * c;
  }
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::scalar) {
      scalars.push_back(
          {in.name.c_str(), given.count(in.name) ? given.at(in.name) : default_scalar(in)});
      continue;
    }
    const registry::DType t = in.dtype;
    if (in.name == d.shape.segments) {  // every chunk in model tensor 0
      Buffer b(std::aligned_alloc(64, ((chunks * 4 + 63) / 64) * 64));
      if (!b) throw std::runtime_error("out of memory for " + in.name);
      std::fill_n(static_cast<int32_t*>(b.get()), chunks, 0);
      tensors.push_back({in.name.c_str(), b.get(), t, &chunks, 1});
      buffers.push_back(std::move(b));
      continue;
    }
    if (in.role == registry::Input::Role::result) {  // one element, starting clear
      Buffer b(std::aligned_alloc(64, 64));
      if (!b) throw std::runtime_error("out of memory for " + in.name);
      static_cast<float*>(b.get())[0] = 0.f;
      tensors.push_back({in.name.c_str(), b.get(), t, &one, 1});
      buffers.push_back(std::move(b));
      continue;
    }
    if (in.role == registry::Input::Role::block_scale) {  // absmaxes in [0.1, 1)
      blocks = (n + d.shape.block - 1) / d.shape.block;
      Buffer b(std::aligned_alloc(64, ((blocks * 4 + 63) / 64) * 64));
      if (!b) throw std::runtime_error("out of memory for " + in.name);
      for (int64_t k = 0; k < blocks; ++k) static_cast<float*>(b.get())[k] = u(rng);
      tensors.push_back({in.name.c_str(), b.get(), t, &blocks, 1});
      buffers.push_back(std::move(b));
      continue;
    }
    const bool fp8 = t == registry::DType::f8e4m3 || t == registry::DType::f8e5m2;
    if (t != registry::DType::f32 && t != registry::DType::f16 && t != registry::DType::bf16 &&
        t != registry::DType::u8 && !fp8) {
      throw std::runtime_error(in.name +
                               ": dense workloads hold f32, f16, bf16, uint8 or FP8 tensors");
    }
    const size_t size = static_cast<size_t>(registry::dtype_bytes(t));
    const size_t bytes = ((static_cast<size_t>(n) * size + 63) / 64) * 64;
    Buffer b(std::aligned_alloc(64, bytes));
    if (!b) throw std::runtime_error("out of memory for " + in.name);
    for (int64_t i = 0; i < n; ++i) {
      const float x = u(rng);
      if (t == registry::DType::f32) {
        static_cast<float*>(b.get())[i] = x;
      } else if (t == registry::DType::u8) {  // 8-bit codes: any of the 256
        static_cast<uint8_t*>(b.get())[i] = static_cast<uint8_t>(x * 255.f);
      } else if (fp8) {
        static_cast<uint8_t*>(b.get())[i] = registry::fp8_from_float(x, t);
      } else {
        static_cast<uint16_t*>(b.get())[i] =
            t == registry::DType::bf16 ? bf16_bits(x) : f16_bits_normal(x);
      }
    }
    tensors.push_back({in.name.c_str(), b.get(), t, &this->n, 1});
    buffers.push_back(std::move(b));
  }
}

SparseWorkload::SparseWorkload(const registry::Descriptor& d, int64_t rows, int64_t cols,
                               int64_t count, const std::map<std::string, double>& given)
    : state_shape{rows, cols}, grad_shape{count, cols}, index_shape{count} {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(0.1f, 1.0f);
  std::uniform_int_distribution<int64_t> pick(0, rows - 1);
  f32.reserve(d.inputs.size());
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::scalar) {
      scalars.push_back(
          {in.name.c_str(), given.count(in.name) ? given.at(in.name) : default_scalar(in)});
    } else if (in.name == d.shape.indices) {
      for (int64_t k = 0; k < count; ++k) idx64.push_back(pick(rng));
      idx32.assign(idx64.begin(), idx64.end());
      const bool wide = in.dtype == registry::DType::i64;
      tensors.push_back({in.name.c_str(), wide ? static_cast<void*>(idx64.data()) : idx32.data(),
                         in.dtype, index_shape.data(), 1});
    } else {
      const bool state = in.role == registry::Input::Role::state;
      f32.emplace_back(static_cast<size_t>((state ? rows : count) * cols));
      for (float& x : f32.back()) x = u(rng);
      tensors.push_back({in.name.c_str(), f32.back().data(), registry::DType::f32,
                         state ? state_shape.data() : grad_shape.data(), 2});
    }
  }
}

bool share_buffers(const registry::Descriptor& bw, const Workload& w,
                   const registry::Descriptor& op, ArgViews& out) {
  std::vector<const TensorView*> states, others;
  size_t t = 0;
  for (const auto& in : op.inputs) {
    if (in.role == registry::Input::Role::scalar) continue;
    // 8-bit states' absmaxes: 4 bytes per block, which the bandwidth kernel leaves out.
    if (in.role == registry::Input::Role::block_scale) {
      ++t;
      continue;
    }
    (in.role == registry::Input::Role::state ? states : others).push_back(&w.tensors.at(t++));
  }
  size_t s = 0, o = 0;
  for (const auto& in : bw.inputs) {
    if (in.role == registry::Input::Role::scalar) {
      out.scalars.push_back({in.name.c_str(), default_scalar(in)});
      continue;
    }
    const bool state = in.role == registry::Input::Role::state;
    auto& pool = state ? states : others;
    size_t& k = state ? s : o;
    if (k >= pool.size()) return false;
    TensorView v = *pool[k++];
    if (v.dtype != in.dtype) return false;
    v.name = in.name.c_str();
    out.tensors.push_back(v);
  }
  return s == states.size() && o == others.size();
}

double bytes_per_element(const registry::Descriptor& d) {
  return static_cast<double>(d.traffic.bytes_read_per_element) +
         static_cast<double>(d.traffic.bytes_written_per_element);
}

CacheFit cache_fit(const registry::Descriptor& d, int64_t n, int64_t l3_bytes) {
  CacheFit f;
  const double per_element = static_cast<double>(d.traffic.bytes_read_per_element);
  f.footprint_bytes = static_cast<double>(n) * per_element;
  if (l3_bytes <= 0 || per_element <= 0) return f;
  f.fits = f.footprint_bytes <= static_cast<double>(l3_bytes);
  f.dram_n = 1;
  while (static_cast<double>(f.dram_n) * per_element < 2.0 * static_cast<double>(l3_bytes) &&
         f.dram_n < int64_t(1000000000000)) {
    f.dram_n *= 10;
  }
  return f;
}

std::vector<int64_t> count_list(const std::string& text, const std::string& option) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    int64_t k = 0;
    if (item.rfind("2^", 0) == 0) {
      char* end = nullptr;
      const long e = std::strtol(item.c_str() + 2, &end, 10);
      if (item.size() > 2 && !*end && e >= 0 && e <= 62) k = int64_t(1) << e;
    } else {
      char* end = nullptr;
      const double v = std::strtod(item.c_str(), &end);
      if (!item.empty() && !*end && v >= 1 && v < 9.2e18 &&
          v == static_cast<double>(static_cast<int64_t>(v))) {
        k = static_cast<int64_t>(v);
      }
    }
    if (k < 1) {
      throw UsageError(option + ": expected positive counts (1048576, 1e6 or 2^20), got '" + item +
                       "'");
    }
    out.push_back(k);
  }
  if (out.empty()) throw UsageError(option + ": expected at least one count");
  return out;
}

Kernel* bandwidth_kernel(Registry& reg, const registry::Descriptor& d) {
  if (!d.bandwidth_op.empty()) return &reg.select(d.bandwidth_op, {}, d.target.isa);
  for (const auto& op : reg.ops()) {
    const auto vs = reg.variants(op);
    if (vs.empty() || vs.front().kind != "bandwidth") continue;
    const registry::Traffic& t = vs.front().traffic;
    if (t.bytes_read_per_element == d.traffic.bytes_read_per_element &&
        t.bytes_written_per_element == d.traffic.bytes_written_per_element) {
      return &reg.select(op, {}, d.target.isa);
    }
  }
  return nullptr;
}

}  // namespace opforge::cli
