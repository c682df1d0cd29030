// A C++ program built against an installed opforge with find_package(opforge): opens the
// registry installed with the library, runs one Adam step through the C++ API and checks it,
// and round-trips its result through the .npy functions of opforge/npy.hpp.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "adam_reference.h"
#include "opforge/npy.hpp"
#include "opforge/runtime.hpp"

int main() try {
  auto reg = opforge::Registry::open();
  // The package's opforge_REGISTRY_DIR and the runtime's default must be the same registry.
  if (reg->dir() != OPFORGE_PACKAGE_REGISTRY) {
    std::fprintf(stderr, "consumer_cmake: runtime opened %s, package says %s\n", reg->dir().c_str(),
                 OPFORGE_PACKAGE_REGISTRY);
    return 1;
  }
  opforge::Kernel& k = reg->select("apply_adam");
  std::vector<float> var(kAdamN), m(kAdamN), v(kAdamN), g(kAdamN);
  adam_fill(var.data(), m.data(), v.data(), g.data(), kAdamN);
  std::vector<double> rvar(var.begin(), var.end()), rm(m.begin(), m.end()), rv(v.begin(), v.end()),
      rg(g.begin(), g.end());
  adam_reference(rvar.data(), rm.data(), rv.data(), rg.data(), kAdamN);

  using opforge::registry::DType;
  const std::vector<int64_t> shape{kAdamN};
  k.call({{"var", var.data(), DType::f32, shape},
          {"m", m.data(), DType::f32, shape},
          {"v", v.data(), DType::f32, shape},
          {"grad", g.data(), DType::f32, shape}},
         {{"beta1_power", kBeta1Power},
          {"beta2_power", kBeta2Power},
          {"lr", kLr},
          {"beta1", kBeta1},
          {"beta2", kBeta2},
          {"epsilon", kEpsilon}});
  const std::vector<float>* got[] = {&var, &m, &v};
  const std::vector<double>* want[] = {&rvar, &rm, &rv};
  const char* names[] = {"var", "m", "v"};
  for (int j = 0; j < 3; ++j) {
    const int i = adam_mismatch(got[j]->data(), want[j]->data(), kAdamN);
    if (i >= 0) {
      std::fprintf(stderr, "consumer_cmake: %s[%d] = %.9g, fp64 reference %.9g\n", names[j], i,
                   (*got[j])[i], (*want[j])[i]);
      return 1;
    }
  }
  // The public .npy functions are in the installed library too.
  const opforge::npy::Array a = opforge::npy::parse(
      opforge::npy::serialize(opforge::npy::from_f32(var, shape)), "consumer_cmake");
  if (opforge::npy::to_f32(a, "consumer_cmake") != var) {
    std::fprintf(stderr, "consumer_cmake: .npy round trip changed the values\n");
    return 1;
  }
  std::printf("consumer_cmake: ok: %s, N = %d, registry %s\n", k.descriptor().variant.c_str(),
              kAdamN, reg->dir().c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "consumer_cmake: %s\n", e.what());
  return 1;
}
