// Shared helpers of the runtime validation tests: Adam workloads, exception capture and
// scratch copies of the test registry.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {

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

// A private copy of the test registry that a test may damage; the shared one is never
// modified.
class RegistryCopy {
 public:
  RegistryCopy() : dir_(tmp_.path() / "registry") {
    std::filesystem::copy(test_registry_dir(), dir_, std::filesystem::copy_options::recursive);
  }
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path operator/(const std::string& rel) const { return dir_ / rel; }

 private:
  TempDir tmp_;
  std::filesystem::path dir_;
};

}  // namespace opforge::testing
