// The avx512_bf16 tier (generators/isa.cpp): which op-table rows carry it, that selection
// prefers it where the CPU has it, and that its kernels store what their avx512 twins store on
// every reference problem (with NaN weights): NaN where the twin has NaN, the same bits or one
// bf16 ulp apart (LLVM's Sapphire Rapids code computes a few fp32 results an ulp apart, which
// can cross a rounding boundary: silu_mul, 1 of 65543), and zero where the twin rounds a
// subnormal result to a bf16 subnormal (vcvtneps2bf16 flushes it). Their accuracy against fp64
// is test_nn_kernels.cpp's, as for every NN variant.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "dsl/nn_op_decl.h"
#include "generators/op_table.h"
#include "host_isa.h"
#include "ieee_half.h"
#include "opforge/runtime.hpp"
#include "registry/builder/nn_golden/nn_reference.h"
#include "registry/cli/check/nn_problem.h"
#include "test_registry.h"

namespace opforge::testing {
namespace {

using namespace nn_golden;

constexpr const char* kTier = "avx512_bf16";

bool lists(const std::vector<std::string>& isas, const std::string& isa) {
  return std::find(isas.begin(), isas.end(), isa) != isas.end();
}

bool is_nan(uint16_t h) {
  return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
}
bool is_subnormal(uint16_t h) {
  return (h & 0x7f80) == 0 && (h & 0x7f) != 0;
}

// The tensors of one call, inputs drawn once and shared by both kernels.
struct Call {
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<uint16_t>> bf16;
  std::vector<Tensor> tensors;
};

// Inputs as `p` draws them (bf16 inputs are bf16 values), every fp32 input's element 0 a NaN
// with its whole payload set (0x7fffffff: the bits that a bare rounding carried out of the
// exponent); outputs NaN-filled.
Call make_call(Kernel& k, const NnProblem& p, unsigned seed) {
  const registry::Descriptor& d = k.descriptor();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(static_cast<float>(p.lo), static_cast<float>(p.hi));
  Call c;
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::scalar) continue;
    const auto& shape = p.shapes.at(in.name);
    const size_t n = static_cast<size_t>(elements(shape));
    if (in.dtype == registry::DType::bf16) {
      auto& h = c.bf16[in.name];
      for (size_t i = 0; i < n; ++i) h.push_back(ref_bf16_bits(u(rng)));
      c.tensors.push_back({in.name, h.data(), registry::DType::bf16, shape});
    } else {
      REQUIRE(in.dtype == registry::DType::f32);
      auto& f = c.f32[in.name];
      for (size_t i = 0; i < n; ++i) f.push_back(u(rng));
      const uint32_t nan = 0x7fffffff;
      std::memcpy(f.data(), &nan, 4);
      c.tensors.push_back({in.name, f.data(), registry::DType::f32, shape});
    }
  }
  const auto shapes = k.output_shapes(c.tensors, p.scalars);
  for (size_t j = 0; j < d.outputs.size(); ++j) {
    REQUIRE(d.outputs[j].dtype == registry::DType::bf16);
    auto& h = c.bf16[d.outputs[j].name];
    h.assign(static_cast<size_t>(elements(shapes[j])), uint16_t{0x7fc1});
    c.tensors.push_back({d.outputs[j].name, h.data(), registry::DType::bf16, shapes[j]});
  }
  return c;
}

TEST_CASE("avx512_bf16 tier: the bf16 forms of the memory-bound NN ops, beside both full ISAs") {
  const generators::Isa& tier = generators::isa(kTier);
  CHECK_FALSE(tier.every_op);
  for (const auto& i : generators::isas()) {
    if (i.name != kTier) CHECK(i.priority < tier.priority);
  }
  std::set<std::string> ops;
  for (const auto& row : generators::op_table()) {
    if (!lists(row.isas, kTier)) continue;
    const dsl::ResolvedOp op = row.resolve();
    CAPTURE(op.variant_id(kTier));
    const auto dtype = op.attrs.find(dsl::kActivationDtypeAttr);
    CHECK((row.decl->kind() == "bandwidth" ||
           (dtype != op.attrs.end() && dtype->second == "bfloat16")));
    CHECK(lists(row.isas, "avx512"));  // selection falls back where the CPU lacks the tier
    CHECK(lists(row.isas, "avx2"));
    ops.insert(row.decl->name());
  }
  for (const char* op : {"layer_norm", "rms_norm", "softmax", "add_layer_norm", "add_rms_norm",
                         "group_norm", "gelu", "silu", "silu_mul", "bandwidth_copy"}) {
    CAPTURE(op);
    CHECK(ops.count(op));
  }
  CHECK_FALSE(ops.count("matmul"));
}

TEST_CASE("avx512_bf16 tier: selected first, and what avx512 stores but for subnormals") {
  auto reg = Registry::open(test_registry_dir());
  const HostIsas host = host_isas(*reg, "layer_norm");  // says what it skips
  if (!host.runs(kTier) || !host.runs("avx512")) return;
  int compared = 0;
  int64_t elements = 0, off_by_one = 0;
  for (const auto& e : reg->index().variants) {
    if (e.isa != kTier) continue;
    const registry::Descriptor d = reg->descriptor(e.variant);
    if (d.kind == "bandwidth") continue;
    CAPTURE(e.variant);
    // Without a forced ISA the tier wins; the avx512 twin stays selectable.
    CHECK(reg->select(e.op, e.attrs).descriptor().variant == e.variant);
    Kernel& tier = reg->load(e.variant);
    Kernel& twin = reg->select(e.op, e.attrs, "avx512");
    CHECK(twin.descriptor().algorithm.name == d.algorithm.name);
    const NnReference* ref = find_nn_reference(e.op);
    REQUIRE(ref);
    for (size_t i = 0; i < ref->problems.size(); ++i) {
      const NnProblem& p = ref->problems[i];
      if (!attrs_match(d, p.attrs)) continue;
      CAPTURE(shapes_text(p.shapes, p.scalars));
      Call a = make_call(tier, p, 77 + static_cast<unsigned>(i));
      Call b = make_call(twin, p, 77 + static_cast<unsigned>(i));
      tier.call(a.tensors, p.scalars);
      twin.call(b.tensors, p.scalars);
      for (const auto& o : d.outputs) {
        const auto& x = a.bf16.at(o.name);
        const auto& y = b.bf16.at(o.name);
        for (size_t j = 0; j < x.size(); ++j) {
          const int ulps = std::abs(int(x[j]) - int(y[j]));  // same sign: adjacent values
          const bool nan = is_nan(x[j]) || is_nan(y[j]);
          const bool same = nan ? is_nan(x[j]) && is_nan(y[j])
                                : (ulps <= 1 && (x[j] & 0x8000) == (y[j] & 0x8000)) ||
                                      (is_subnormal(y[j]) && x[j] == (y[j] & 0x8000));
          off_by_one += !nan && ulps == 1;
          elements += 1;
          if (!same) {
            CHECK_MESSAGE(same, o.name << "[" << j << "]: tier " << int(x[j]) << ", avx512 "
                                       << int(y[j]) << " (bits)");
            break;
          }
        }
      }
      ++compared;
    }
  }
  CHECK(compared >= 10);
  MESSAGE(off_by_one << " of " << elements << " bf16 results one ulp from the avx512 twin's");
  CHECK(off_by_one * 1000 <= elements);  // rare: the same algorithm and schedule
}

TEST_CASE("avx512_bf16 tier: a subnormal result is stored as zero, the twin rounds it") {
  auto reg = Registry::open(test_registry_dir());
  if (!host_isas(*reg, "silu").runs(kTier)) return;
  const std::map<std::string, std::string> bf16 = {{dsl::kActivationDtypeAttr, "bfloat16"}};
  Kernel& tier = reg->select("silu", bf16, kTier);
  Kernel& twin = reg->select("silu", bf16, "avx512");
  // silu(x) = x / (1 + e^-x) ~ x / 2 for tiny x: 1.5 * 2^-126 (a normal bf16) gives a
  // subnormal, 0x0060 rounded; -1.5 * 2^-126 its negative. The last is a normal result.
  const std::vector<uint16_t> x = {0x00c0, 0x80c0, 0x3f80};
  for (Kernel* k : {&tier, &twin}) {
    CAPTURE(k->descriptor().variant);
    std::vector<uint16_t> in = x, y(x.size(), 0x7fc1);
    const int64_t n = static_cast<int64_t>(x.size());
    k->call(
        {{"x", in.data(), registry::DType::bf16, {n}}, {"y", y.data(), registry::DType::bf16, {n}}},
        {});
    const bool is_tier = k == &tier;
    CHECK(y[0] == (is_tier ? 0x0000 : 0x0060));
    CHECK(y[1] == (is_tier ? 0x8000 : 0x8060));
    CHECK(y[2] == 0x3f3b);  // silu(1) = 0.7310586 -> 0x3f3b (0.73046875)
  }
}

}  // namespace
}  // namespace opforge::testing
