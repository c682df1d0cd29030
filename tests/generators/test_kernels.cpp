// Every variant of the op table, for every ISA the CPU can run, against its fp64 reference:
// in place (states are updated where they lie, as the runtime passes them aliased), on
// random data with fixed seeds, at sizes that hit every tail (1, 5, 17), the serial path
// (1000), the parallel path with ragged chunks (65543) and a large tensor (1 << 20).
// Autoscheduled twins ("__auto", Adams2019 schedules) are loaded by id and run the same
// checks, plus a size ragged across their fixed 131072-element parallel tiles.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <set>

#include "generators/auto_schedules.h"
#include "generators/op_table.h"
#include "generators/reference.h"
#include "ieee_half.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

const std::vector<size_t> kSizes = {1, 5, 17, 1000, 65543, 1 << 20};
// Adams2019 tiles the 1<<20 estimate into parallel chunks of 131072: three and a ragged tail.
const size_t kAutoExtraSize = 3 * 131072 + 17;

struct Worst {
  double excess = 0;  // max of |err| / (atol + rtol*|ref|)
  std::string where;
};

// The kernel's states against the fp64 reference, |err| <= atol + rtol * |ref|. With
// `nonfinite`, a NaN reference wants NaN and an infinite one the same infinity.
template <class Got>
void compare(const registry::Descriptor& d, size_t n, const Got& got_all, const Tensors& expected,
             Worst& worst, bool nonfinite = false) {
  for (const auto& [name, want] : expected) {
    if (!got_all.count(name)) continue;
    const std::vector<float>& got = got_all.at(name);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {  // n, or 1 for a result (found_inf)
      if (nonfinite && !std::isfinite(want[i])) {
        const bool ok = std::isnan(want[i]) ? std::isnan(got[i]) : double(got[i]) == want[i];
        if (!ok) {
          FAIL(d.variant << " n=" << n << ": " << name << "[" << i << "] = " << got[i]
                         << ", fp64 reference " << want[i]);
        }
        continue;
      }
      // Exact matches (infinities included), and NaN where NaN is due.
      if (double(got[i]) == want[i] || (std::isnan(want[i]) && std::isnan(got[i]))) continue;
      const double err = std::fabs(got[i] - want[i]);
      const double allowed = d.tolerance.atol + d.tolerance.rtol * std::fabs(want[i]);
      const double excess = err / allowed;
      if (!(excess <= worst.excess)) {  // NaN lands here too
        worst.excess = std::isnan(err) ? INFINITY : excess;
        worst.where = d.variant + " n=" + std::to_string(n) + " " + name + "[" + std::to_string(i) +
                      "]: got " + std::to_string(got[i]) + " want " + std::to_string(want[i]);
      }
      if (!(err <= allowed)) {
        FAIL(d.variant << " n=" << n << ": " << name << "[" << i << "] = " << got[i]
                       << ", fp64 reference " << want[i] << ", error " << err << " > " << allowed);
      }
    }
  }
}

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

bool narrow(registry::DType t) {
  return t == registry::DType::f16 || t == registry::DType::bf16;
}
uint16_t round_to(registry::DType t, float x) {
  return t == registry::DType::bf16 ? ref_bf16_bits(x) : ref_f16_bits(x);
}
float widen(registry::DType t, uint16_t h) {
  return t == registry::DType::bf16 ? bf16_to_float(h) : f16_to_float(h);
}

// A variant with narrow storage (f16/bf16 gradients, fp32 master `var` + write-only `model`
// copy), in place with buffers of the descriptor's dtypes. The narrow inputs are the reference's
// draws rounded to their dtype, and the fp64 reference computes from those same values; the fp32
// states are held to the op's tolerance; the model copy must EQUAL the reference rounding of the
// kernel's own fp32 master (bit for bit). With `nonfinite`, some gradients are NaN / +-inf:
// NaN must stay NaN in the master and the copy (never inf).
void check_narrow_storage(Kernel& k, const Reference& ref, Tensors t, const Scalars& s, size_t n,
                          Worst& worst, bool nonfinite) {
  const registry::Descriptor& d = k.descriptor();
  std::map<std::string, registry::DType> dtype;
  std::string master, model;
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::scalar) continue;
    dtype[in.name] = in.dtype;
    if (in.role == registry::Input::Role::state && master.empty()) master = in.name;
    if (in.role == registry::Input::Role::state && in.name == "model") model = in.name;
  }
  REQUIRE_MESSAGE(!model.empty(), d.variant << ": narrow storage without a model copy");
  REQUIRE(!narrow(dtype.at(master)));
  std::vector<size_t> nan_at;
  for (auto& [name, v] : t) {
    REQUIRE_MESSAGE(dtype.count(name), d.variant << ": reference input " << name);
    if (!narrow(dtype.at(name))) continue;
    for (size_t i = 0; i < n; ++i) {
      float x = static_cast<float>(v[i]);
      if (nonfinite && i % 5 == 1) x = (i % 2 ? 1 : -1) * std::nanf("");
      if (nonfinite && i % 5 == 3) x = i % 2 ? INFINITY : -INFINITY;
      v[i] = widen(dtype.at(name), round_to(dtype.at(name), x));
    }
    if (nonfinite) {
      for (size_t i = 1; i < n; i += 5) nan_at.push_back(i);
    }
  }
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<uint16_t>> half;
  for (const auto& [name, v] : t) {
    if (narrow(dtype.at(name))) {
      for (double x : v) half[name].push_back(round_to(dtype.at(name), static_cast<float>(x)));
    } else {
      f32[name].assign(v.begin(), v.end());
    }
  }
  half[model].assign(n, 0x5555);  // write-only: whatever it held must be overwritten
  std::vector<Tensor> tensors;
  for (auto& [name, v] : f32)
    tensors.push_back({name, v.data(), dtype.at(name), {static_cast<int64_t>(v.size())}});
  for (auto& [name, v] : half) tensors.push_back({name, v.data(), dtype.at(name), {int64_t(n)}});
  k.call(tensors, s);
  Tensors expected = t;
  ref.update(d.attr_values(), s, expected);
  compare(d, n, f32, expected, worst, nonfinite);
  // Master/copy consistency, bit-exact.
  const std::vector<float>& m = f32.at(master);
  const std::vector<uint16_t>& c = half.at(model);
  int bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t want = round_to(dtype.at(model), m[i]);
    if (c[i] != want && bad++ < 5) {
      FAIL_CHECK(d.variant << " n=" << n << ": model[" << i << "] = " << hex(c[i])
                           << ", reference rounding of master " << m[i] << " is " << hex(want));
    }
  }
  CHECK_MESSAGE(bad == 0, d.variant << " n=" << n << ": " << bad << " model copies differ");
  for (size_t i : nan_at) {
    if (!std::isnan(expected.at(master)[i])) continue;  // a skipped step (skip_if_nonfinite)
    const float copy = widen(dtype.at(model), c[i]);
    CHECK_MESSAGE((std::isnan(m[i]) && std::isnan(copy)),
                  d.variant << " n=" << n << ": NaN gradient at " << i << " gave master " << m[i]
                            << ", copy " << copy);
  }
}

// `variant` empty: the variant select() picks for (op, attrs, isa); else that variant by id.
void check_variant(Registry& reg, const std::string& op, const Attrs& attrs, const std::string& isa,
                   Worst& worst, const std::string& variant = "") {
  Kernel& k = variant.empty() ? reg.select(op, attrs, isa) : reg.load(variant);
  const registry::Descriptor& d = k.descriptor();
  const Reference* ref = find_reference(op);
  REQUIRE_MESSAGE(ref, "no fp64 reference registered for op " << op);
  Reference scaled;
  if (has_grad_scaling(d)) {  // the op's reference under torch GradScaler semantics
    scaled = with_grad_scaling(*ref, d);
    ref = &scaled;
  }
  std::vector<size_t> sizes = kSizes;
  if (!variant.empty()) sizes.push_back(kAutoExtraSize);
  for (size_t n : sizes) {
    std::mt19937 rng(static_cast<unsigned>(1000003 * n + 17));
    Tensors t;
    Scalars s;
    ref->inputs(rng, n, d.attr_values(), t, s);
    if (storage_tag(d) != "f32") {
      check_narrow_storage(k, *ref, t, s, n, worst, false);
      if (n >= 5) check_narrow_storage(k, *ref, t, s, n, worst, true);
      continue;
    }
    // fp32 copies the kernel updates in place.
    std::map<std::string, std::vector<float>> f32;
    std::vector<Tensor> tensors;
    for (auto& [name, v] : t) f32[name].assign(v.begin(), v.end());
    for (auto& [name, v] : f32) {
      tensors.push_back({name, v.data(), registry::DType::f32, {static_cast<int64_t>(v.size())}});
    }
    k.call(tensors, s);
    Tensors expected = t;
    ref->update(d.attr_values(), s, expected);
    compare(d, n, f32, expected, worst);
  }
}

TEST_CASE("every op-table variant matches its fp64 reference, in place, on every ISA") {
  auto reg = Registry::open(test_registry_dir());
  std::set<std::string> runnable;
  for (const auto& isa : generators::isas()) {
    bool ok = true;
    for (const auto& f : isa.cpu_features) ok = ok && cpu_supports(f);
    if (ok) runnable.insert(isa.name);
  }
  REQUIRE_MESSAGE(runnable.count("avx2"), "this CPU cannot run the AVX2 baseline");
  if (!runnable.count("avx512")) MESSAGE("CPU lacks AVX-512: only AVX2 variants run here");
  int checked = 0, checked_auto = 0;
  for (const auto& row : generators::op_table()) {
    // Sparse forms: test_sparse_ops.cpp applies the dense formula row by row; multi-tensor
    // forms: test_multi_tensor_ops.cpp, per model tensor.
    if (row.decl->sparse() || row.decl->is_multi_tensor()) continue;
    const Attrs attrs = row.decl->resolve_attrs(row.attrs);
    // Narrow-storage rows are selected with the "storage" pseudo-attr; fp32 is the default.
    Attrs wanted = attrs;
    if (!row.storage.is_f32()) wanted["storage"] = row.storage.tag();
    for (const auto& isa : row.isas) {
      if (!runnable.count(isa)) continue;
      const std::string id = generators::variant_id(*row.decl, attrs, isa);
      CHECK(reg->select(row.decl->name(), wanted, isa).descriptor().variant == id);
      Worst worst;
      check_variant(*reg, row.decl->name(), wanted, isa, worst);
      MESSAGE(id << ": worst error " << worst.excess << "x of tolerance at " << worst.where);
      ++checked;
    }
    for (const auto& isa : row.autoschedule) {
      if (!runnable.count(isa)) continue;
      const std::string hand = generators::variant_id(*row.decl, attrs, isa);
      const std::string id = generators::auto_variant_id(hand);
      // Same op, attrs and ISA: select() keeps the hand schedule, by default and forced.
      CHECK(reg->select(row.decl->name(), attrs, isa).descriptor().variant == hand);
      CHECK(reg->load(id).descriptor().schedule.recipe == generators::kAutoRecipe);
      Worst worst;
      check_variant(*reg, row.decl->name(), attrs, isa, worst, id);
      MESSAGE(id << ": worst error " << worst.excess << "x of tolerance at " << worst.where);
      ++checked_auto;
    }
  }
  if (runnable.count("avx512")) {
    int auto_rows = 0;
    for (const auto& row : generators::op_table()) auto_rows += !row.autoschedule.empty();
    CHECK(auto_rows > 0);
    CHECK(checked_auto >= auto_rows);
  }
  int dense_rows = 0;
  for (const auto& row : generators::op_table())
    dense_rows += !row.decl->sparse() && !row.decl->is_multi_tensor();
  CHECK(checked >= 2 * dense_rows - 1);
}

TEST_CASE("every op in the registry has an fp64 reference") {
  auto reg = Registry::open(test_registry_dir());
  for (const auto& op : reg->ops()) {
    // A sparse op is checked against its dense twin's formula, applied row by row.
    std::string dense = op;
    if (op.rfind("sparse_apply_", 0) == 0) dense = op.substr(7);
    if (op == "sparse_adam") dense = "apply_adam";
    if (op.rfind("multi_tensor_", 0) == 0) dense = op.substr(13);
    CHECK_MESSAGE(find_reference(dense), op);
  }
}

}  // namespace
}  // namespace opforge::testing
