// Loss scaling fused into the step (OptimizerDecl::grad_scaling), for every op-table row that
// has it: a skipped step leaves every state bit for bit as it was (torch GradScaler skips
// optimizer.step), found_inf reports and accumulates, and a clean step does update (so the
// bit-identity checks can fail). The values of a clean step are checked against the fp64
// references in test_kernels.cpp (with_grad_scaling in reference.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "fp8_reference.h"
#include "generators/op_table.h"
#include "host_isa.h"
#include "ieee_half.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

using registry::DType;

bool attr_on(const registry::Descriptor& d, const char* name) {
  const registry::Attr* a = d.find_attr(name);
  return a && a->value == "true";
}

// Buffers of one call: every tensor argument of `d` with `n` elements in its dtype (results one
// element), finite seeded values; the model copy (if any) starts as the rounding of the master.
struct Call {
  std::map<std::string, std::vector<uint8_t>> bytes;
  std::map<std::string, DType> dtype;
  std::map<std::string, double> scalars;
  std::vector<std::string> grads, states;

  Call(const registry::Descriptor& d, size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> pos(0.1f, 1.0f), any(-1.0f, 1.0f);
    for (const auto& in : d.inputs) {
      if (in.role == registry::Input::Role::scalar) {
        // A valid step: decays in (0, 1), small lr, step 1; inv_scale 1/1024.
        scalars[in.name] = in.name == "inv_scale"                                   ? 1.0 / 1024
                           : in.name == "step" || in.dtype == DType::i64            ? 1.0
                           : in.name.rfind("beta", 0) == 0 || in.name == "momentum" ? 0.9
                                                                                    : 0.01;
        continue;
      }
      const bool result = in.role == registry::Input::Role::result;
      // 8-bit states: codes, and one absmax per block (block_scale).
      const size_t block = static_cast<size_t>(d.shape.block);
      const size_t count = result                                          ? 1
                           : in.role == registry::Input::Role::block_scale ? (n + block - 1) / block
                                                                           : n;
      dtype[in.name] = in.dtype;
      bytes[in.name].resize(count * registry::dtype_bytes(in.dtype));
      if (in.role == registry::Input::Role::gradient) grads.push_back(in.name);
      if (in.role == registry::Input::Role::state) states.push_back(in.name);
      for (size_t i = 0; i < count; ++i) {
        const float x = result                                       ? 0.f
                        : in.role == registry::Input::Role::gradient ? any(rng) * 1024
                                                                     : pos(rng);
        set(in.name, i, x);
      }
    }
    if (dtype.count("model")) {
      for (size_t i = 0; i < n; ++i) set("model", i, get(states.front(), i));
    }
  }
  void set(const std::string& name, size_t i, float x) {
    uint8_t* p = bytes.at(name).data();
    switch (dtype.at(name)) {
      case DType::f32:
        std::memcpy(p + 4 * i, &x, 4);
        break;
      case DType::bf16: {
        const uint16_t h = ref_bf16_bits(x);
        std::memcpy(p + 2 * i, &h, 2);
        break;
      }
      case DType::u8:  // an 8-bit state's code, from x in (0, 1)
        p[i] = static_cast<uint8_t>(x * 255);
        break;
      case DType::f8e4m3:  // FP8 gradients (E4M3 makes +-inf NaN, having no infinity)
        p[i] = fp8_encode(kE4M3, x);
        break;
      case DType::f8e5m2:
        p[i] = fp8_encode(kE5M2, x);
        break;
      default: {
        const uint16_t h = ref_f16_bits(x);
        std::memcpy(p + 2 * i, &h, 2);
      }
    }
  }
  float get(const std::string& name, size_t i) const {
    const uint8_t* p = bytes.at(name).data();
    if (dtype.at(name) == DType::f32) {
      float x;
      std::memcpy(&x, p + 4 * i, 4);
      return x;
    }
    if (dtype.at(name) == DType::u8) return p[i];
    if (dtype.at(name) == DType::f8e4m3) return static_cast<float>(fp8_value(kE4M3, p[i]));
    if (dtype.at(name) == DType::f8e5m2) return static_cast<float>(fp8_value(kE5M2, p[i]));
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return dtype.at(name) == DType::bf16 ? bf16_to_float(h) : f16_to_float(h);
  }
  void run(Kernel& k) {
    std::vector<Tensor> t;
    for (auto& [name, b] : bytes) {
      const int64_t count = static_cast<int64_t>(b.size() / registry::dtype_bytes(dtype.at(name)));
      t.push_back({name, b.data(), dtype.at(name), {count}});
    }
    k.call(t, scalars);
  }
};

// Every variant with grad scaling in the op table, on every ISA this CPU runs.
std::vector<std::string> scaled_variants(Registry& reg) {
  std::vector<std::string> ids;
  for (const auto& row : generators::op_table()) {
    const dsl::ResolvedOp op = row.resolve();
    const dsl::AttrValues& attrs = op.attrs;
    if (attrs.count("unscale") == 0) continue;
    if (op.as_optimizer().is_multi_tensor()) continue;  // test_multi_tensor_ops.cpp
    if (attrs.at("unscale") != "true" && attrs.at("skip_if_nonfinite") != "true") continue;
    for (const auto& isa : row.isas) {
      const std::string id = op.variant_id(isa);
      if (runs_here(reg.descriptor(id))) ids.push_back(id);
    }
  }
  return ids;
}

const std::vector<size_t> kSizes = {1, 5, 17, 1000, 65543};

TEST_CASE("grad scaling: a non-finite gradient skips the step, states bit-identical") {
  auto reg = Registry::open(test_registry_dir());
  const std::vector<std::string> ids = scaled_variants(*reg);
  REQUIRE(ids.size() >= 10);
  int skipping = 0;
  for (const auto& id : ids) {
    Kernel& k = reg->load(id);
    const registry::Descriptor& d = k.descriptor();
    const bool skip = attr_on(d, "skip_if_nonfinite");
    skipping += skip;
    for (size_t n : kSizes) {
      for (int kind = 0; kind < 3; ++kind) {  // +inf, NaN, -inf at a seeded position
        CAPTURE(id);
        CAPTURE(n);
        CAPTURE(kind);
        Call c(d, n, static_cast<unsigned>(n * 7 + kind));
        const size_t at = (n * 2654435761u + kind) % n;
        const float bad = kind == 0 ? INFINITY : kind == 1 ? NAN : -INFINITY;
        c.set(c.grads.front(), at, bad);
        const auto before = c.bytes;
        c.run(k);
        CHECK(c.get("found_inf", 0) == 1.0f);
        for (const auto& s : c.states) {
          if (skip) {
            CHECK_MESSAGE(c.bytes.at(s) == before.at(s), s << " changed by a skipped step");
          } else {
            CHECK_MESSAGE(c.bytes.at(s) != before.at(s), s << " not updated (no skip)");
          }
        }
      }
    }
  }
  CHECK(skipping >= 8);
}

TEST_CASE("grad scaling: found_inf set on entry skips; a clean step updates and keeps it 0") {
  auto reg = Registry::open(test_registry_dir());
  for (const auto& id : scaled_variants(*reg)) {
    Kernel& k = reg->load(id);
    const registry::Descriptor& d = k.descriptor();
    for (size_t n : kSizes) {
      CAPTURE(id);
      CAPTURE(n);
      for (const float entry : {1.0f, NAN, 0.0f}) {
        Call c(d, n, static_cast<unsigned>(n + 1));
        c.set("found_inf", 0, entry);
        const auto before = c.bytes;
        c.run(k);
        const bool set = entry != 0.0f;  // NaN counts as set (torch: `if (found_inf)`)
        CHECK(c.get("found_inf", 0) == (set ? 1.0f : 0.0f));
        // The first state (the parameter) changes under a clean step: every element moves
        // with these draws (lr 0.01, nonzero gradients).
        const bool unchanged = c.bytes.at(c.states.front()) == before.at(c.states.front());
        CHECK(unchanged == (set && attr_on(d, "skip_if_nonfinite")));
      }
    }
  }
}

TEST_CASE("grad scaling: overflow of grad * inv_scale is found (torch checks the unscaled value)") {
  auto reg = Registry::open(test_registry_dir());
  int checked = 0;
  for (const auto& id : scaled_variants(*reg)) {
    Kernel& k = reg->load(id);
    const registry::Descriptor& d = k.descriptor();
    if (!attr_on(d, "unscale")) continue;
    Call c(d, 17, 5);
    if (c.dtype.at(c.grads.front()) != DType::f32) continue;  // needs a finite grad near FLT_MAX
    c.scalars["inv_scale"] = 4.0;
    c.set(c.grads.front(), 3, 1e38f);  // finite; times 4 overflows
    const auto before = c.bytes;
    c.run(k);
    CHECK_MESSAGE(c.get("found_inf", 0) == 1.0f, id);
    if (attr_on(d, "skip_if_nonfinite")) CHECK(c.bytes.at("var") == before.at("var"));
    ++checked;
  }
  CHECK(checked >= 2);
}

TEST_CASE("grad scaling: a result must hold one element") {
  auto reg = Registry::open(test_registry_dir());
  const std::vector<std::string> ids = scaled_variants(*reg);
  REQUIRE(!ids.empty());
  Kernel& k = reg->load(ids.front());
  Call c(k.descriptor(), 17, 1);
  c.bytes["found_inf"].resize(8);  // two elements
  try {
    c.run(k);
    FAIL("a two-element found_inf was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("'found_inf' must hold one element") != std::string::npos);
  }
}

}  // namespace
}  // namespace opforge::testing
