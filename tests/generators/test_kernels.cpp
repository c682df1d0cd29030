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

#include "fp8_reference.h"
#include "generators/auto_schedules.h"
#include "generators/op_table.h"
#include "generators/reference.h"
#include "host_isa.h"
#include "ieee_half.h"
#include "opforge/runtime.hpp"
#include "registry/builder/nn_golden/nn_reference.h"
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

const Fp8Spec* fp8_spec(registry::DType t) {
  return t == registry::DType::f8e4m3 ? &kE4M3 : t == registry::DType::f8e5m2 ? &kE5M2 : nullptr;
}
// FP8 gradients are passed as the reference's draws divided by grad_scale_inv (fp8_scale_inv),
// encoded; the reference sees each code's value times grad_scale_inv, exact in fp32 too: the
// kernel's product rounds nothing, and the op's tolerance stands.

// Half an ulp of a narrow dtype, relative: the most that rounding to nearest moves a value.
double half_ulp(registry::DType t) {
  return std::ldexp(1.0, t == registry::DType::bf16 ? -8 : -11);
}

// A variant with narrow storage (dsl::Storage): f16/bf16 gradients; an fp32 master `var` with a
// write-only `model` copy (bf16m/f16m); bf16 optimizer states after the first (bf16s, bf16ms).
// In place with buffers of the descriptor's dtypes. The narrow inputs are the reference's draws
// rounded to their dtype, and the fp64 reference computes from those same values. The fp32
// states are held to the op's tolerance: the master too when the other states are narrow (the
// kernel computes it from their fp32 new values, before rounding; from the rounded ones it
// would be off by about 2^-9 of the step). The model copy must EQUAL the reference rounding of
// the kernel's own fp32 master (bit for bit). A narrow state is the rounding of an fp32 value
// the kernel never exposes, so it cannot be checked bit for bit: it is held to the op's
// tolerance plus half an ulp of its dtype (below). With `nonfinite`, some gradients are NaN /
// +-inf: NaN must stay NaN in the master, the copy and the narrow states (never inf).
// FP8 gradients (e4m3g / e5m2g): the reference's draws rounded to FP8 as above (E4M3 turns
// +-inf into NaN, having no infinity).
void check_narrow_storage(Kernel& k, const Reference& ref, Tensors t, Scalars s, size_t n,
                          Worst& worst, bool nonfinite) {
  const registry::Descriptor& d = k.descriptor();
  std::map<std::string, registry::DType> dtype;
  std::set<std::string> grads, narrow_states;
  std::string master, model;
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::scalar) continue;
    dtype[in.name] = in.dtype;
    if (in.role == registry::Input::Role::gradient) grads.insert(in.name);
    if (in.role != registry::Input::Role::state) continue;
    if (in.name == "model") {
      model = in.name;
    } else if (master.empty()) {
      master = in.name;
    } else if (narrow(in.dtype)) {
      narrow_states.insert(in.name);
    }
  }
  // A results-only op (global_norm) has no master: its result is compared like a state.
  REQUIRE((master.empty() || !narrow(dtype.at(master))));
  std::vector<size_t> nan_at;
  if (nonfinite) {
    for (size_t i = 1; i < n; i += 5) nan_at.push_back(i);
  }
  std::map<std::string, std::vector<uint8_t>> fp8;
  double amax = 0, scale_inv = 1;  // over every FP8 gradient: one scalar scales them all
  for (const auto& [name, v] : t) {
    if (!fp8_spec(dtype.at(name))) continue;
    amax = std::max(amax, finite_amax(v));
    scale_inv = fp8_scale_inv(*fp8_spec(dtype.at(name)), amax);
  }
  for (auto& [name, v] : t) {
    REQUIRE_MESSAGE(dtype.count(name), d.variant << ": reference input " << name);
    const Fp8Spec* f8 = fp8_spec(dtype.at(name));
    const bool bad_grads = nonfinite && grads.count(name), rounded = narrow(dtype.at(name));
    if (!bad_grads && !rounded && !f8) continue;
    for (size_t i = 0; i < n; ++i) {
      float x = static_cast<float>(v[i]);
      if (bad_grads && i % 5 == 1) x = (i % 2 ? 1 : -1) * std::nanf("");
      if (bad_grads && i % 5 == 3) x = i % 2 ? INFINITY : -INFINITY;
      if (f8) {
        fp8[name].push_back(fp8_encode(*f8, x / scale_inv));
        v[i] = fp8_value(*f8, fp8[name].back()) * scale_inv;
        continue;
      }
      v[i] = rounded ? widen(dtype.at(name), round_to(dtype.at(name), x)) : x;
    }
  }
  if (!fp8.empty()) {
    REQUIRE_MESSAGE(d.find_input("grad_scale_inv"), d.variant << ": FP8 without grad_scale_inv");
    s["grad_scale_inv"] = scale_inv;
  }
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<uint16_t>> half;
  for (const auto& [name, v] : t) {
    if (fp8.count(name)) continue;
    if (narrow(dtype.at(name))) {
      for (double x : v) half[name].push_back(round_to(dtype.at(name), static_cast<float>(x)));
    } else {
      f32[name].assign(v.begin(), v.end());
    }
  }
  if (!model.empty()) half[model].assign(n, 0x5555);  // write-only: must be overwritten
  std::vector<Tensor> tensors;
  for (auto& [name, v] : f32)
    tensors.push_back({name, v.data(), dtype.at(name), {static_cast<int64_t>(v.size())}});
  for (auto& [name, v] : half) tensors.push_back({name, v.data(), dtype.at(name), {int64_t(n)}});
  for (auto& [name, v] : fp8) tensors.push_back({name, v.data(), dtype.at(name), {int64_t(n)}});
  k.call(tensors, s);
  Tensors expected = t;
  ref.update(d.attr_values(), s, expected);
  compare(d, n, f32, expected, worst, nonfinite);
  // Narrow states: |rounded - x| <= u|x| (u = half_ulp) for the kernel's fp32 value x, which
  // is within atol + rtol|ref| of the reference; so the bound is u|ref| + (1 + u)(atol +
  // rtol|ref|). f16 adds half its smallest subnormal (2^-25); bf16's (2^-134) is below atol.
  for (const auto& name : narrow_states) {
    const registry::DType t = dtype.at(name);
    const double u = half_ulp(t);
    registry::Descriptor wide = d;
    wide.tolerance.rtol = u + (1 + u) * d.tolerance.rtol;
    wide.tolerance.atol = (1 + u) * d.tolerance.atol + (t == registry::DType::f16 ? 0x1p-25 : 0);
    std::map<std::string, std::vector<float>> got;
    for (uint16_t h : half.at(name)) got[name].push_back(widen(t, h));
    compare(wide, n, got, {{name, expected.at(name)}}, worst, nonfinite);
  }
  if (master.empty()) return;
  const std::vector<float>& m = f32.at(master);
  for (size_t i : nan_at) {
    if (!std::isnan(expected.at(master)[i])) continue;  // a skipped step (skip_if_nonfinite)
    CHECK_MESSAGE(std::isnan(m[i]),
                  d.variant << " n=" << n << ": NaN gradient at " << i << " gave master " << m[i]);
  }
  if (model.empty()) return;
  // Master/copy consistency, bit-exact.
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
    CHECK_MESSAGE(std::isnan(widen(dtype.at(model), c[i])),
                  d.variant << " n=" << n << ": NaN gradient at " << i << " gave copy "
                            << widen(dtype.at(model), c[i]));
  }
}

// `variant` empty: the variant select() picks for (op, attrs, isa); else that variant by id.
// The rows test_kernels checks element by element against the fp64 reference.
// 8-bit states (q8 storage) and the bandwidth kernels with byte states that stand for them have
// their own checks: test_quant8_states.cpp.
bool is_dense_optimizer(const generators::VariantSpec& row) {
  const auto* d = dynamic_cast<const dsl::OptimizerDecl*>(row.decl);
  if (!d || d->sparse() || d->is_multi_tensor() || row.storage.quant) return false;
  for (const auto& a : d->args()) {
    if (a.dtype == registry::DType::u8) return false;
  }
  return true;
}

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
  const std::vector<std::string> isas = runnable_isas();  // says what it skips
  const std::set<std::string> runnable(isas.begin(), isas.end());
  REQUIRE_MESSAGE(runnable.count("avx2"), "this CPU cannot run the AVX2 baseline");
  int checked_auto = 0;
  std::map<std::string, int> checked;  // per ISA
  for (const auto& row : generators::op_table()) {
    // Sparse forms: test_sparse_ops.cpp applies the dense formula row by row; multi-tensor
    // forms: test_multi_tensor_ops.cpp, per model tensor; NN ops: test_nn_kernels.cpp.
    if (!is_dense_optimizer(row)) continue;
    const dsl::ResolvedOp op = row.resolve();
    const Attrs& attrs = op.attrs;
    // Narrow-storage rows are selected with the "storage" pseudo-attr; fp32 is the default.
    Attrs wanted = attrs;
    if (!row.storage.is_f32()) wanted["storage"] = row.storage.tag();
    for (const auto& isa : row.isas) {
      if (!runnable.count(isa)) continue;
      const std::string id = op.variant_id(isa);
      CHECK(reg->select(row.decl->name(), wanted, isa).descriptor().variant == id);
      Worst worst;
      check_variant(*reg, row.decl->name(), wanted, isa, worst);
      MESSAGE(id << ": worst error " << worst.excess << "x of tolerance at " << worst.where);
      ++checked[isa];
    }
    for (const auto& isa : row.autoschedule) {
      if (!runnable.count(isa)) continue;
      const std::string hand = op.variant_id(isa);
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
  for (const auto& row : generators::op_table()) dense_rows += is_dense_optimizer(row);
  // Per ISA that runs here: every dense row but at most one (a row may lack an ISA).
  for (const auto& isa : runnable) {
    CAPTURE(isa);
    CHECK(checked[isa] >= dense_rows - 1);
  }
}

// A bf16 state must be the reference rounding (tests/ieee_half.h) of the fp32 value the kernel
// computed. An optimizer never exposes that value; the bandwidth kernels with bf16 states do:
// they narrow through the same with_storage wrapper, and s_k + g is exact in fp32 for these
// inputs. So every stored state equals ref_bf16_bits(s_k + g) bit for bit: ties to even, fp32
// subnormals (vcvtneps2bf16 would flush them), overflow to inf at the bf16 tie above its
// largest value; NaN stays NaN.
TEST_CASE("bf16 states: the reference rounding of the fp32 result, bit for bit") {
  auto reg = Registry::open(test_registry_dir());
  const double nan = std::nan("");
  // (state, gradient) pairs; the states are bf16 values.
  const std::vector<std::pair<double, double>> cases = {
      {1, 0x1p-8},                      // tie: stays at the even 1.0
      {1, 3 * 0x1p-8},                  // tie: up to the even 1.015625
      {1, 0x1p-9},                      // below half an ulp: down
      {-1, -5 * 0x1p-10},               // above half an ulp: away from zero
      {0, 0x1p-130},                    // fp32 and bf16 subnormal, exact
      {0x1p-126, 0x1p-134 + 0x1p-140},  // subnormal range (f32 gradient): rounds up
      {0x1p-126, -0x1p-134},            // a subnormal tie (f32 gradient)
      {0x1.fep127, 0x1p119},            // bf16's max + half an ulp: a tie, to inf
      {-0x1.fep127, 0x1p110},           // stays the largest finite
      {1, nan},                         // NaN
      {0.5, 0.25}};                     // exact
  int checked = 0;
  for (const auto& e : reg->index().variants) {
    const registry::Descriptor d = reg->descriptor(e.variant);
    const std::string tag = storage_tag(d);
    if (d.kind != "bandwidth" || tag.back() != 's') continue;
    // fp16 narrow states (f16s, compress_ef's): checked bit for bit by test_compress_ef.cpp.
    if (tag.rfind("f16", 0) == 0) continue;
    // With a read pass (`_r`, loss-scaled rows) the kernel adds total*1e-30: s + g is then not
    // exact. The plain kernels of the same storage cover the rounding.
    if (d.op.find("_r") != std::string::npos) continue;
    if (!runs_here(d)) continue;
    CAPTURE(d.variant);
    Kernel& k = reg->load(d.variant);
    const size_t n = cases.size();
    std::map<std::string, std::vector<float>> f32;
    std::map<std::string, std::vector<uint16_t>> half;  // bf16 bits
    std::vector<double> sum(n);
    std::set<std::string> states;  // the bf16 states
    for (const auto& in : d.inputs) {
      if (in.role == registry::Input::Role::scalar) continue;
      if (in.role == registry::Input::Role::state && in.dtype == registry::DType::bf16 &&
          in.name != "model")
        states.insert(in.name);
      REQUIRE((in.dtype == registry::DType::f32 || in.dtype == registry::DType::bf16));
      const bool grad = in.role == registry::Input::Role::gradient;
      for (size_t i = 0; i < n; ++i) {
        float x = static_cast<float>(grad ? cases[i].second : cases[i].first);
        if (in.dtype == registry::DType::bf16) {
          half[in.name].push_back(in.name == "model" ? 0 : ref_bf16_bits(x));
          x = bf16_to_float(half[in.name].back());
        } else {
          f32[in.name].push_back(x);
        }
        if (grad) sum[i] = double(static_cast<float>(cases[i].first)) + x;
      }
    }
    std::vector<Tensor> tensors;
    for (auto& [name, v] : f32)
      tensors.push_back({name, v.data(), registry::DType::f32, {int64_t(n)}});
    for (auto& [name, v] : half)
      tensors.push_back({name, v.data(), registry::DType::bf16, {int64_t(n)}});
    k.call(tensors, {});
    CHECK_FALSE(states.empty());
    for (const auto& name : states) {
      const std::vector<uint16_t>& h = half.at(name);
      for (size_t i = 0; i < n; ++i) {
        CAPTURE(name);
        CAPTURE(i);
        if (std::isnan(sum[i])) {
          CHECK(std::isnan(bf16_to_float(h[i])));
          continue;
        }
        REQUIRE(double(static_cast<float>(sum[i])) == sum[i]);  // exact in fp32
        CHECK(hex(h[i]) == hex(ref_bf16_bits(static_cast<float>(sum[i]))));
      }
    }
    ++checked;
  }
  CHECK(checked > 0);
}

TEST_CASE("every op in the registry has an fp64 reference") {
  auto reg = Registry::open(test_registry_dir());
  for (const auto& op : reg->ops()) {
    // A sparse op is checked against its dense twin's formula, applied row by row.
    std::string dense = op;
    if (op.rfind("sparse_apply_", 0) == 0) dense = op.substr(7);
    if (op == "sparse_adam") dense = "apply_adam";
    if (op.rfind("multi_tensor_", 0) == 0) dense = op.substr(13);
    // Rule-file ops (the test registry builds generators/rules too): their fp64 golden is the
    // rule itself, checked at odd sizes on every ISA by tests/registry/cli/test_cmd_check.cpp;
    // the example rules against hand-written formulas by test_registry_builder_rules.cpp.
    if (reg->variants(op).front().reference.rfind("rule file ", 0) == 0) continue;
    // NN ops have their own references (registry/builder/nn_golden, test_nn_kernels.cpp).
    if (reg->variants(op).front().shape.named_dims) {
      CHECK_MESSAGE(nn_golden::find_nn_reference(op), op);
      continue;
    }
    CHECK_MESSAGE(find_reference(dense), op);
  }
}

}  // namespace
}  // namespace opforge::testing
