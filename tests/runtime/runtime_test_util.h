// Shared helpers of the runtime tests: Adam workloads, exception capture and
// scratch copies of the test registry.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "host_isa.h"
#include "opforge/descriptor.h"
#include "opforge/fp8.h"
#include "opforge/runtime.hpp"
#include "opforge/scalar_domain.h"
#include "opforge/sha256.h"
#include "test_registry.h"

namespace opforge::testing {

// Writes x as element i of a buffer of dtype t: f32/f64 exact; bf16 and f16 truncated (test
// values |x| in [2^-4, 1) stay normal halves; zero and NaN are exact); integer tensors get 1;
// bool ones x != 0.
inline void store_element(uint8_t* p, registry::DType t, int64_t i, float x) {
  using registry::DType;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  switch (t) {
    case DType::f32:
      std::memcpy(p + 4 * i, &x, 4);
      break;
    case DType::f64: {
      const double y = x;
      std::memcpy(p + 8 * i, &y, 8);
      break;
    }
    case DType::bf16: {
      const uint16_t h = static_cast<uint16_t>(bits >> 16);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case DType::f16: {
      uint16_t h = static_cast<uint16_t>((bits >> 16) & 0x8000);
      if (x != x) {
        h = 0x7e00;
      } else if (x != 0) {
        const uint32_t e = ((bits >> 23) & 0xff) - 127 + 15;
        h = static_cast<uint16_t>(h | (e << 10) | ((bits >> 13) & 0x3ff));
      }
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case DType::i32: {
      const int32_t y = 1;
      std::memcpy(p + 4 * i, &y, 4);
      break;
    }
    case DType::i64: {
      const int64_t y = 1;
      std::memcpy(p + 8 * i, &y, 8);
      break;
    }
    case DType::b8:
      p[i] = x != 0;
      break;
    case DType::u8:
      p[i] = static_cast<uint8_t>(x);
      break;
    case DType::f8e4m3:  // the FP8 value nearest x
    case DType::f8e5m2:
      p[i] = registry::fp8_from_float(x, t);
      break;
  }
}

// The message of the opforge::Error `f` throws; fails the test when it throws nothing or
// something else.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL_CHECK("expected opforge::Error, got another exception: " << e.what());
    return e.what();
  }
  FAIL_CHECK("expected opforge::Error, nothing was thrown");
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A float scalar for tests that compare two call forms bit for bit: 0.5, or the typical value
// where 0.5 is outside the scalar's domain (FTRL's lr_power <= 0). Why 0.5: products with it
// are exact, so the forms agree whatever each loop's multiply-add contraction; with typical
// values (0.9, 0.999) a kernel's serial and parallel paths can differ in the last bit (seen:
// call_model vs per-tensor calls of Adam, Adadelta), which these tests do not judge.
inline double bit_test_scalar(const registry::Input& in) {
  const bool half_ok =
      registry::ScalarDomain::parse(in.domain.empty() ? "any" : in.domain).contains(0.5);
  return half_ok || !in.typical ? 0.5 : *in.typical;
}

// The one shared registry, opened once per test binary.
inline Registry& shared_registry() {
  static std::unique_ptr<Registry> reg = Registry::open(test_registry_dir());
  return *reg;
}

// Adam state and gradient of n elements, with TF-typical magnitudes.
struct AdamData {
  std::vector<float> var, m, v, grad;
  explicit AdamData(size_t n, unsigned seed = 7) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f), small(-0.1f, 0.1f), pos(0.f, 0.01f);
    for (size_t i = 0; i < n; ++i) {
      var.push_back(u(rng));
      m.push_back(small(rng));
      v.push_back(pos(rng));
      grad.push_back(u(rng));
    }
  }
  std::vector<Tensor> tensors(const std::vector<int64_t>& shape) {
    return {{"var", var.data(), registry::DType::f32, shape},
            {"m", m.data(), registry::DType::f32, shape},
            {"v", v.data(), registry::DType::f32, shape},
            {"grad", grad.data(), registry::DType::f32, shape}};
  }
};

inline std::map<std::string, double> adam_scalars() {
  return {{"beta1_power", 0.729}, {"beta2_power", 0.997002999},
          {"lr", 0.01},           {"beta1", 0.9},
          {"beta2", 0.999},       {"epsilon", 1e-7}};
}

// A fresh directory under the system temp dir, removed with everything in it at scope end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "opforge-runtime-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed: " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Whole-file reads and writes for tests that damage or rewrite registry files.
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE_MESSAGE(in, "cannot read " << p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  REQUIRE_MESSAGE(out, "cannot write " << p);
  out << text;
}

// A private copy of the test registry that a test may damage; the shared one is never
// modified.
class RegistryCopy {
 public:
  RegistryCopy() : dir_(tmp_.path() / "registry") {
    std::filesystem::copy(test_registry_dir(), dir_, std::filesystem::copy_options::recursive);
  }
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path operator/(const std::string& rel) const { return dir_ / rel; }
  // Rewrites descriptors (variant -> JSON text) and the digests the index records for them,
  // as a consistent edit of both would: for tests of what the other checks catch, or of a
  // registry deliberately changed (max_elements).
  void rewrite_descriptors(const std::map<std::string, std::string>& texts) const {
    nlohmann::ordered_json index = nlohmann::ordered_json::parse(read_file(dir_ / "index.json"));
    for (auto& e : index["variants"]) {
      auto it = texts.find(e["variant"].get<std::string>());
      if (it == texts.end()) continue;
      std::ofstream(dir_ / e["descriptor"].get<std::string>(), std::ios::trunc) << it->second;
      e["sha256"] = registry::sha256_hex(it->second);
    }
    rewrite_index(index.dump(2));
  }
  // Where the index puts `variant`'s descriptor, and where that descriptor puts its kernel
  // (content-addressed names: "ops/<variant>-<digest>.json").
  std::filesystem::path descriptor_file(const std::string& variant) const {
    const nlohmann::json index = nlohmann::json::parse(read_file(dir_ / "index.json"));
    for (const auto& e : index["variants"]) {
      if (e["variant"] == variant) return dir_ / e["descriptor"].get<std::string>();
    }
    FAIL("no variant " << variant << " in " << dir_);
    return {};
  }
  std::filesystem::path kernel_file(const std::string& variant) const {
    const auto d = nlohmann::json::parse(read_file(descriptor_file(variant)));
    return dir_ / d["kernel"]["file"].get<std::string>();
  }
  // Writes `text` as the index with its own digest recomputed, as the builder would: for
  // tests of what the other checks catch. `text` must be a valid index but for that digest.
  void rewrite_index(const std::string& text) const {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
    j.erase("sha256");
    const registry::Index idx = registry::index_from_json(j.dump(), "rewritten index");
    std::ofstream(dir_ / "index.json", std::ios::trunc) << registry::to_json(idx);
  }

 private:
  TempDir tmp_;
  std::filesystem::path dir_;
};

}  // namespace opforge::testing
