// 8-bit blockwise optimizer states (storage q8s / q8ls / bf16mq8s, dsl/quant8.h): every such
// variant of the op table, on every ISA the CPU runs, against the op's own fp64 reference
// (reference.h) wrapped in the paper's blockwise quantization (quant8_reference.h):
//   - the initial states are quantized by the reference, so kernel and reference start from
//     the same codes and absmaxes; the reference then updates the dequantized states in fp64;
//   - the parameter (and the fp32 master) is held to the op's tolerance: both compute it from
//     the new states before they are quantized;
//   - each new absmax is the block's max |new state| within the op's tolerance;
//   - each code is the nearest map value to the reference's state / absmax, or a neighbour
//     the kernel's fp32 state (within tolerance of the reference) may round to: the slack is
//     the op's tolerance plus the absmax's, in units of the absmax;
//   - each dequantized state is within half a code step (plus that slack) of the reference.
// Sizes hit every tail block (1, 5, 17, 1000, 65543); edge cases below: all-zero blocks, a
// huge gradient, NaN/inf gradients, the skipped step of loss scaling, slices.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "fp8_reference.h"
#include "generators/op_table.h"
#include "generators/quant8_reference.h"
#include "generators/reference.h"
#include "host_isa.h"
#include "ieee_half.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

using registry::DType;
using registry::Input;

const std::vector<size_t> kSizes = {1, 5, 17, 1000, 65543};

// What a q8 variant's arguments are.
struct Layout {
  int block = 0;
  std::string master, model;                     // first state; bf16m's copy
  std::map<std::string, std::string> quantized;  // uint8 state -> quant_map
  std::map<std::string, DType> dtype;
};

Layout layout_of(const registry::Descriptor& d) {
  Layout l;
  l.block = static_cast<int>(d.shape.block);
  for (const auto& in : d.inputs) {
    if (in.role == Input::Role::scalar) continue;
    l.dtype[in.name] = in.dtype;
    if (in.role != Input::Role::state) continue;
    if (in.name == "model") {
      l.model = in.name;
    } else if (l.master.empty()) {
      l.master = in.name;
    } else if (in.dtype == DType::u8) {
      l.quantized[in.name] = in.quant_map;
    }
  }
  return l;
}

// The kernel's buffers for one call, and what the reference starts from.
struct Call {
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<uint16_t>> bf16;
  std::map<std::string, std::vector<uint8_t>> fp8;  // FP8 gradients (e4m3gq8s)
  std::map<std::string, Quantized> q;
  Tensors start;         // the reference's inputs: dequantized states, rounded gradients
  double scale_inv = 1;  // grad_scale_inv of FP8 gradients

  std::vector<Tensor> tensors(const Layout& l, size_t n) {
    std::vector<Tensor> t;
    for (auto& [name, v] : f32)
      t.push_back({name, v.data(), DType::f32, {static_cast<int64_t>(v.size())}});
    for (auto& [name, v] : bf16) t.push_back({name, v.data(), DType::bf16, {int64_t(n)}});
    for (auto& [name, v] : fp8) t.push_back({name, v.data(), l.dtype.at(name), {int64_t(n)}});
    for (auto& [name, v] : q) {
      t.push_back({name, v.codes.data(), DType::u8, {int64_t(n)}});
      t.push_back(
          {name + "_absmax", v.absmax.data(), DType::f32, {static_cast<int64_t>(v.absmax.size())}});
    }
    (void)l;
    return t;
  }
};

Call prepare(const Layout& l, const Tensors& t, size_t n) {
  Call c;
  for (const auto& [name, v] : t) {
    REQUIRE_MESSAGE(l.dtype.count(name), "reference input " << name);
    if (l.quantized.count(name)) {
      const std::vector<double> map = quant_map_values(l.quantized.at(name));
      c.q[name] = quantize_blockwise(map, v, l.block);
      c.start[name] = dequantize_blockwise(map, c.q[name], l.block);
    } else if (l.dtype.at(name) == DType::f8e4m3) {  // the draws / a power of two, in E4M3
      c.scale_inv = fp8_scale_inv(kE4M3, finite_amax(v));
      for (double x : v) c.fp8[name].push_back(fp8_encode(kE4M3, x / c.scale_inv));
      for (uint8_t b : c.fp8[name]) c.start[name].push_back(fp8_value(kE4M3, b) * c.scale_inv);
    } else if (l.dtype.at(name) == DType::bf16) {
      for (double x : v) c.bf16[name].push_back(ref_bf16_bits(static_cast<float>(x)));
      for (uint16_t h : c.bf16[name]) c.start[name].push_back(bf16_to_float(h));
    } else {
      c.f32[name].assign(v.begin(), v.end());
      c.start[name].assign(c.f32[name].begin(), c.f32[name].end());
    }
  }
  if (!l.model.empty()) c.bf16[l.model].assign(n, 0x5555);  // write-only
  return c;
}

// The kernel's results against the reference's (`expected`, fp64), as the file header says.
// `skipped`: the step was skipped (loss scaling): codes and absmaxes must be unchanged.
void compare_q8(const registry::Descriptor& d, const Layout& l, size_t n, const Call& before,
                const Call& got, const Tensors& expected, bool skipped, int* flips = nullptr) {
  const double rtol = d.tolerance.rtol, atol = d.tolerance.atol;
  for (const auto& [name, v] : got.f32) {
    const std::vector<double>& want = expected.at(name);
    for (size_t i = 0; i < v.size(); ++i) {
      if (double(v[i]) == want[i] || (std::isnan(want[i]) && std::isnan(v[i]))) continue;
      const double err = std::fabs(v[i] - want[i]);
      if (!(err <= atol + rtol * std::fabs(want[i]))) {
        FAIL(d.variant << " n=" << n << ": " << name << "[" << i << "] = " << v[i]
                       << ", fp64 reference " << want[i]);
      }
    }
  }
  if (!l.model.empty()) {
    const std::vector<float>& m = got.f32.at(l.master);
    for (size_t i = 0; i < n; ++i) {
      REQUIRE_MESSAGE(got.bf16.at(l.model)[i] == ref_bf16_bits(m[i]),
                      d.variant << " n=" << n << ": model[" << i << "] is not master rounded");
    }
  }
  for (const auto& [name, q] : got.q) {
    const Quantized& q0 = before.q.at(name);
    if (skipped) {
      CHECK_MESSAGE(q.codes == q0.codes, d.variant << ": a skipped step changed " << name);
      CHECK_MESSAGE(std::memcmp(q.absmax.data(), q0.absmax.data(), 4 * q.absmax.size()) == 0,
                    d.variant << ": a skipped step changed " << name << "_absmax");
      continue;
    }
    const std::vector<double> map = quant_map_values(l.quantized.at(name));
    const Quantized want = quantize_blockwise(map, expected.at(name), l.block);
    for (size_t b = 0; b < q.absmax.size(); ++b) {
      const double a = want.absmax[b];
      if (std::isnan(a)) {
        CHECK_MESSAGE(std::isnan(q.absmax[b]), d.variant << " n=" << n << ": " << name << " block "
                                                         << b << " absmax " << q.absmax[b]
                                                         << ", want NaN");
        continue;
      }
      const double allowed = atol + rtol * a;
      if (!(std::fabs(q.absmax[b] - a) <= allowed)) {
        FAIL(d.variant << " n=" << n << ": " << name << "_absmax[" << b << "] = " << q.absmax[b]
                       << ", reference " << a);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const double a = want.absmax[i / l.block];
      if (!(a > 0)) {  // NaN block (checked above) or all zero
        if (a == 0) REQUIRE(q.codes[i] == want.codes[i]);
        continue;
      }
      const double x = expected.at(name)[i];
      // The kernel's state may differ from x by the op's tolerance, its absmax from a by as
      // much: y = x / a moves by at most this.
      const double slack = (atol + rtol * std::fabs(x)) / a + (atol + rtol * a) / a;
      if (!code_within(map, x / a, q.codes[i], slack)) {
        FAIL(d.variant << " n=" << n << ": " << name << "[" << i << "] code " << int(q.codes[i])
                       << " (" << map[q.codes[i]] << "), reference " << x / a << " -> code "
                       << int(want.codes[i]));
      }
      if (flips && q.codes[i] != want.codes[i]) ++*flips;
      // Dequantized: within half the wider neighbouring gap (plus the slack) of x.
      const int c = q.codes[i];
      const double gap =
          std::max(c > 0 ? map[c] - map[c - 1] : 0.0, c < 255 ? map[c + 1] - map[c] : 0.0);
      CHECK(std::fabs(map[c] * q.absmax[i / l.block] - x) <= (gap / 2 + 2 * slack) * a);
    }
  }
}

// 8-bit states' own rule (dsl/op_decl.cpp): a gradient element that is not finite counts
// as 0; not with loss scaling's unscale or skip, which handle it themselves.
void zero_nonfinite_gradients(const registry::Descriptor& d, Tensors& t) {
  for (const char* attr : {"skip_if_nonfinite", "unscale"}) {
    const registry::Attr* a = d.find_attr(attr);
    if (a && a->value == "true") return;
  }
  for (const auto& g : d.inputs) {
    if (g.role != Input::Role::gradient) continue;
    for (double& x : t.at(g.name)) x = std::isfinite(x) ? x : 0.0;
  }
}

// One call of the kernel and of the reference on the same starting point.
void run_q8(Kernel& k, const Reference& ref, const Tensors& t, Scalars s, size_t n,
            int* flips = nullptr) {
  const registry::Descriptor& d = k.descriptor();
  const Layout l = layout_of(d);
  REQUIRE(l.block > 0);
  REQUIRE(!l.quantized.empty());
  Call c = prepare(l, t, n);
  if (d.find_input("grad_scale_inv")) s["grad_scale_inv"] = c.scale_inv;
  const Call before = c;
  k.call(c.tensors(l, n), s);
  Tensors expected = c.start;
  zero_nonfinite_gradients(d, expected);
  ref.update(d.attr_values(), s, expected);
  for (const auto& in : d.inputs) {  // the gradients as the kernel saw them (it reads them only)
    if (in.role == Input::Role::gradient) expected.at(in.name) = c.start.at(in.name);
  }
  const bool skipped = d.find_attr("skip_if_nonfinite") &&
                       d.find_attr("skip_if_nonfinite")->value == "true" &&
                       expected.count("found_inf") && expected.at("found_inf")[0] != 0;
  compare_q8(d, l, n, before, c, expected, skipped, flips);
}

bool is_q8(const generators::VariantSpec& row) {
  return row.storage.quant.has_value();
}

const Reference& reference_for(const registry::Descriptor& d, Reference& scaled) {
  const Reference* ref = find_reference(d.op);
  REQUIRE_MESSAGE(ref, "no fp64 reference registered for op " << d.op);
  if (!has_grad_scaling(d)) return *ref;
  scaled = with_grad_scaling(*ref, d);
  return scaled;
}

TEST_CASE("8-bit states: every q8 variant against its fp64 reference, quantized blockwise") {
  auto reg = Registry::open(test_registry_dir());
  const std::vector<std::string> isas = runnable_isas();
  const std::set<std::string> runnable(isas.begin(), isas.end());
  int rows = 0;
  for (const auto& row : generators::op_table()) {
    if (!is_q8(row)) continue;
    ++rows;
    const dsl::ResolvedOp op = row.resolve();
    Attrs wanted = op.attrs;
    wanted["storage"] = row.storage.tag();
    for (const auto& isa : row.isas) {
      if (!runnable.count(isa)) continue;
      Kernel& k = reg->select(row.decl->name(), wanted, isa);
      CAPTURE(k.descriptor().variant);
      CHECK(k.descriptor().variant == op.variant_id(isa));
      Reference scaled;
      const Reference& ref = reference_for(k.descriptor(), scaled);
      int flips = 0;
      size_t elements = 0;
      for (size_t n : kSizes) {
        std::mt19937 rng(static_cast<unsigned>(7919 * n + 3));
        Tensors t;
        Scalars s;
        ref.inputs(rng, n, k.descriptor().attr_values(), t, s);
        run_q8(k, ref, t, s, n, &flips);
        elements += n;
      }
      // Codes off the reference's nearest only next to a decision boundary: few.
      CHECK_MESSAGE(flips * 100 <= static_cast<int>(elements), flips << " flipped codes");
      MESSAGE(k.descriptor().variant << ": " << flips << " of " << elements
                                     << " codes at a boundary took the neighbour");
    }
  }
  CHECK(rows >= 8);
}

// The 8-bit kernels prefetch their wider inputs from the size their schedule names (2^21
// elements by default, scripts/BENCHMARKS.md): one size above it, so that those loops run.
TEST_CASE("8-bit states: above the prefetch size, against the reference") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : host_isas(*reg, "apply_adam").runnable) {
    for (const char* storage : {"q8s", "q8ls"}) {
      Kernel& k = reg->select("apply_adam", {{"storage", storage}}, isa);
      CAPTURE(k.descriptor().variant);
      const auto& params = k.descriptor().schedule.params;
      REQUIRE(params.count("prefetch_from"));
      CHECK(std::stoll(params.at("prefetch")) > 0);
      const size_t n = std::stoull(params.at("prefetch_from")) + 4097;
      const Reference& ref = *find_reference("apply_adam");
      std::mt19937 rng(17);
      Tensors t;
      Scalars s;
      ref.inputs(rng, n, k.descriptor().attr_values(), t, s);
      int flips = 0;
      run_q8(k, ref, t, s, n, &flips);
      CHECK_MESSAGE(flips * 100 <= static_cast<int>(n), flips << " flipped codes");
    }
  }
}

// Adam with hand-made blocks: block 0 all zero (states and gradient), block 1 one huge
// gradient among small ones, block 2 a NaN gradient, block 3 an inf one, a 5-element tail.
Tensors edge_inputs(size_t n, bool nonfinite) {
  Tensors t;
  std::mt19937 rng(5);
  t["var"] = uniform(rng, n, -1, 1);
  t["m"] = uniform(rng, n, -0.1, 0.1);
  t["v"] = uniform(rng, n, 0, 0.01);
  t["grad"] = uniform(rng, n, -1e-3, 1e-3);
  for (size_t i = 0; i < 256; ++i) t["m"][i] = t["v"][i] = t["grad"][i] = 0;
  t["grad"][256 + 77] = 1e4;
  if (nonfinite) {
    t["grad"][512 + 3] = std::nan("");
    t["grad"][768 + 200] = -INFINITY;
  }
  return t;
}

// fp32 values, as the kernel sees them: 1 - 0.999 in fp32 is 1.3e-5 off 1 - 0.999 in fp64,
// which a gradient of 1e4 makes visible in v.
const Scalars kAdamScalars = {{"lr", float(1e-3)},          {"beta1", float(0.9)},
                              {"beta2", float(0.999)},      {"epsilon", float(1e-8)},
                              {"beta1_power", float(0.81)}, {"beta2_power", float(0.998001)}};

TEST_CASE("8-bit states: zero blocks, a huge gradient, NaN/inf gradients, per ISA") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    for (const char* storage : {"q8s", "q8ls"}) {
      Kernel& k = reg->select("apply_adam", {{"storage", storage}}, isa);
      CAPTURE(k.descriptor().variant);
      const Reference& ref = *find_reference("apply_adam");
      const size_t n = 4 * 256 + 5;
      run_q8(k, ref, edge_inputs(n, false), kAdamScalars, n);
      // A NaN / inf gradient element counts as 0 (run_q8's reference too): its block's
      // absmax stays finite, and so does every parameter.
      run_q8(k, ref, edge_inputs(n, true), kAdamScalars, n);
      const Layout l = layout_of(k.descriptor());
      Call c = prepare(l, edge_inputs(n, true), n);
      k.call(c.tensors(l, n), kAdamScalars);
      for (const char* s : {"m", "v"}) {
        CAPTURE(s);
        const std::vector<float>& a = c.q.at(s).absmax;
        CHECK(a[0] == 0.f);  // the all-zero block stays zero
        for (size_t b = 1; b < a.size(); ++b) CHECK(std::isfinite(a[b]));
      }
      for (float x : c.f32.at("var")) REQUIRE(std::isfinite(x));
      // The zero block's codes are the map's zero.
      const std::vector<double> map_m = quant_map_values(l.quantized.at("m"));
      for (size_t i = 0; i < 256; ++i) REQUIRE(map_m[c.q.at("m").codes[i]] == 0.0);
    }
  }
}

TEST_CASE("8-bit states with loss scaling: a non-finite gradient skips the step bit for bit") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    Kernel& k =
        reg->select("apply_adam",
                    {{"storage", "q8s"}, {"unscale", "true"}, {"skip_if_nonfinite", "true"}}, isa);
    CAPTURE(k.descriptor().variant);
    Reference scaled;
    const Reference& ref = reference_for(k.descriptor(), scaled);
    const size_t n = 1000;
    std::mt19937 rng(11);
    Tensors t;
    Scalars s;
    ref.inputs(rng, n, k.descriptor().attr_values(), t, s);
    t["grad"][421] = std::nan("");
    run_q8(k, ref, t, s, n);  // compare_q8 wants the codes and absmaxes unchanged
    t["grad"][421] = 0.5;
    run_q8(k, ref, t, s, n);  // and a finite step goes through
  }
}

// apply_adam's reference inputs for n elements (seed 3), quantized for a q8 variant's layout.
Call adam_call(const Layout& l, size_t n, Scalars& s) {
  std::mt19937 rng(3);
  Tensors t;
  find_reference("apply_adam")->inputs(rng, n, {}, t, s);
  return prepare(l, t, n);
}

TEST_CASE("8-bit states: slices start on block boundaries and give the whole call's result") {
  auto reg = Registry::open(test_registry_dir());
  for (const std::string& isa : runnable_isas()) {
    Kernel& k = reg->select("apply_adam", {{"storage", "q8s"}}, isa);
    CAPTURE(k.descriptor().variant);
    const Layout l = layout_of(k.descriptor());
    const size_t n = 65543;
    Scalars s;
    Call whole = adam_call(l, n, s), sliced = whole;
    k.call(whole.tensors(l, n), s);
    k.call_chunked(sliced.tensors(l, n), s, 1000);  // rounded down to 768 = 3 blocks
    CHECK(whole.f32.at("var") == sliced.f32.at("var"));
    for (const char* st : {"m", "v"}) {
      CHECK(whole.q.at(st).codes == sliced.q.at(st).codes);
      CHECK(whole.q.at(st).absmax == sliced.q.at(st).absmax);
    }
  }
}

// The bandwidth kernels that stand for 8-bit states (bandwidth_s<S>_g<G>_b<Q>): fp32 states
// s += sum of the gradients, byte states s += 1 where that sum is positive (mod 256), exactly.
TEST_CASE("8-bit states: the byte-state bandwidth kernels move the bytes they stand for") {
  auto reg = Registry::open(test_registry_dir());
  int checked = 0;
  for (const auto& e : reg->index().variants) {
    const registry::Descriptor d = reg->descriptor(e.variant);
    bool byte_states = false;
    for (const auto& in : d.inputs) byte_states = byte_states || in.dtype == DType::u8;
    if (d.kind != "bandwidth" || !byte_states || !runs_here(d)) continue;
    // With a read pass (`_r`, loss-scaled rows) fp32 states also get total*1e-30: not exact.
    if (d.op.find("_r") != std::string::npos) continue;
    CAPTURE(d.variant);
    const size_t n = 1000;
    std::mt19937 rng(9);
    std::map<std::string, std::vector<float>> f32;
    std::map<std::string, std::vector<uint8_t>> bytes;
    std::map<std::string, std::vector<uint16_t>> bf16;
    std::map<std::string, std::vector<uint8_t>> fp8;
    std::vector<double> sum(n, 0.0);
    for (const auto& in : d.inputs) {
      if (in.role == Input::Role::scalar) continue;
      if (in.dtype == DType::u8) {
        for (size_t i = 0; i < n; ++i) bytes[in.name].push_back(static_cast<uint8_t>(rng()));
      } else if (in.dtype == DType::bf16) {  // bf16m's gradients and model copy: exact halves
        for (size_t i = 0; i < n; ++i) {
          const float x = (static_cast<int>(rng() % 17) - 8) * 0.5f;
          bf16[in.name].push_back(ref_bf16_bits(x));
          if (in.role == Input::Role::gradient) sum[i] += x;
        }
      } else if (in.dtype == DType::f8e4m3) {  // FP8 gradients (e4m3gq8s): exact halves too
        for (size_t i = 0; i < n; ++i) {
          const float x = (static_cast<int>(rng() % 17) - 8) * 0.5f;
          fp8[in.name].push_back(fp8_encode(kE4M3, x));
          REQUIRE(fp8_value(kE4M3, fp8[in.name].back()) == x);
          sum[i] += x;
        }
      } else {
        for (size_t i = 0; i < n; ++i) {
          const float x = (static_cast<int>(rng() % 17) - 8) * 0.5f;
          f32[in.name].push_back(x);
          if (in.role == Input::Role::gradient) sum[i] += x;
        }
      }
    }
    const auto start = bytes;
    const auto start32 = f32;
    std::vector<Tensor> t;
    for (auto& [name, v] : f32) t.push_back({name, v.data(), DType::f32, {int64_t(n)}});
    for (auto& [name, v] : bytes) t.push_back({name, v.data(), DType::u8, {int64_t(n)}});
    for (auto& [name, v] : bf16) t.push_back({name, v.data(), DType::bf16, {int64_t(n)}});
    for (auto& [name, v] : fp8) t.push_back({name, v.data(), DType::f8e4m3, {int64_t(n)}});
    std::map<std::string, double> scalars;
    if (d.find_input("grad_scale_inv")) scalars["grad_scale_inv"] = 1.0;

    reg->load(d.variant).call(t, scalars);
    for (const auto& [name, v] : bytes) {
      for (size_t i = 0; i < n; ++i) {
        const uint8_t want = static_cast<uint8_t>(start.at(name)[i] + (sum[i] > 0 ? 1 : 0));
        REQUIRE_MESSAGE(v[i] == want, name << "[" << i << "]");
      }
    }
    for (const auto& in : d.inputs) {
      if (in.role != Input::Role::state || in.dtype != DType::f32) continue;
      for (size_t i = 0; i < n; ++i)
        REQUIRE(f32.at(in.name)[i] == static_cast<float>(start32.at(in.name)[i] + sum[i]));
    }
    ++checked;
  }
  CHECK(checked >= 2);
}

TEST_CASE("8-bit states: a wrong absmax length is refused, naming it, before anything runs") {
  auto reg = Registry::open(test_registry_dir());
  Kernel& k = reg->select("apply_adam", {{"storage", "q8s"}}, "avx2");
  const Layout l = layout_of(k.descriptor());
  const size_t n = 1000;
  Scalars s;
  Call c = adam_call(l, n, s);
  const Call before = c;
  c.q.at("v").absmax.pop_back();  // 3 instead of ceil(1000 / 256) = 4
  std::string what;
  try {
    k.call(c.tensors(l, n), s);
  } catch (const Error& e) {
    what = e.what();
  }
  CHECK(what.find("v_absmax") != std::string::npos);
  CHECK(what.find("ceil(1000 / 256) = 4") != std::string::npos);
  CHECK(c.f32.at("var") == before.f32.at("var"));
  CHECK(c.q.at("m").codes == before.q.at("m").codes);
}

}  // namespace
}  // namespace opforge::testing
