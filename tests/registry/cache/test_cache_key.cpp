// The kernel and runtime keys: every part named, in the documented order, and each part
// changing the digest.
#include <doctest/doctest.h>

#include <set>

#include "registry/cache/cache_key.h"

namespace opforge::cache {
namespace {

KernelKeyParts sample() {
  KernelKeyParts p;
  p.artifacts = "kernel.so,kernel.o";
  p.halide = "14.0.0 " + std::string(64, 'a');
  p.target = "x86-64-linux-avx2-no_runtime";
  p.entry = "apply_x__f32__avx2";
  p.arguments = {{"var", registry::KernelArg::Kind::input_buffer, registry::DType::f32, 1},
                 {"lr", registry::KernelArg::Kind::input_scalar, registry::DType::f32, 0}};
  p.algorithm = "updated(i) = var(i) - lr";
  p.schedule_recipe = "elementwise";
  p.schedule_params = {{"vector", 16}, {"tasks", 8}};
  p.dsl_sources = std::string(64, 'b');
  return p;
}

TEST_CASE("kernel key: parts named and ordered, canonical text") {
  const auto parts = kernel_key(sample()).parts();
  std::vector<std::string> names;
  for (const auto& [n, v] : parts) names.push_back(n);
  CHECK(names == std::vector<std::string>{"format", "halide", "target", "entry", "arguments",
                                          "algorithm", "schedule", "dsl_sources"});
  CHECK(parts[0].second ==
        "opforge-cache/" + std::to_string(kFormatVersion) + "/kernel.so,kernel.o");
  CHECK(parts[4].second == "var:input_buffer:float32:1;lr:input_scalar:float32:0;");
  // Params sorted by name whatever order they were given in.
  CHECK(parts[6].second == "elementwise{tasks=8,vector=16,}");
  CHECK(kernel_key(sample()).hex_digest() == kernel_key(sample()).hex_digest());
}

TEST_CASE("kernel key: every part changes the digest, extras appended in order") {
  const std::string base = kernel_key(sample()).hex_digest();
  std::set<std::string> digests = {base};
  auto changed = [&](void (*edit)(KernelKeyParts&)) {
    KernelKeyParts p = sample();
    edit(p);
    return kernel_key(p).hex_digest();
  };
  digests.insert(changed([](KernelKeyParts& p) { p.artifacts += ",kernel.s"; }));
  digests.insert(changed([](KernelKeyParts& p) { p.halide.back() = 'c'; }));
  digests.insert(changed([](KernelKeyParts& p) { p.target = "x86-64-linux-avx512"; }));
  digests.insert(changed([](KernelKeyParts& p) { p.entry += "_2"; }));
  digests.insert(changed([](KernelKeyParts& p) { p.arguments[1].dtype = registry::DType::i64; }));
  digests.insert(changed([](KernelKeyParts& p) { p.algorithm += " "; }));
  digests.insert(changed([](KernelKeyParts& p) { p.schedule_params["tasks"] = 4; }));
  digests.insert(changed([](KernelKeyParts& p) { p.schedule_recipe = "sparse_rows"; }));
  digests.insert(changed([](KernelKeyParts& p) { p.dsl_sources.back() = 'c'; }));
  digests.insert(changed([](KernelKeyParts& p) { p.extra = {{"nn_sources", "x"}}; }));
  CHECK(digests.size() == 11);
  KernelKeyParts p = sample();
  p.extra = {{"z", "1"}, {"a", "2"}};
  const auto parts = kernel_key(p).parts();
  REQUIRE(parts.size() == 10);
  CHECK(parts[8].first == "z");
  CHECK(parts[9].first == "a");
}

TEST_CASE("runtime key: format, halide, target, entry runtime") {
  const auto parts = runtime_key("a,b", "14.0.0 x", "x86-64-linux").parts();
  REQUIRE(parts.size() == 4);
  CHECK(parts[3].first == "entry");
  CHECK(parts[3].second == "runtime");
  CHECK(runtime_key("a,b", "14.0.0 x", "x86-64-linux").hex_digest() !=
        runtime_key("a,b", "14.0.0 y", "x86-64-linux").hex_digest());
}

}  // namespace
}  // namespace opforge::cache
