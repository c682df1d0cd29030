// Every NN variant of the registry (each algorithm, each ISA this CPU runs) against its op's
// fp64 reference (nn_reference.h) on every registered problem its algorithm applies to: odd
// shapes, batch 1 and > 1, 1x1 spatial, channels off the vector width. A variant that applies
// to fewer than two problems fails: its algorithm would be untested. bf16 activations
// (attr "dtype"): every problem runs in each dtype; bf16 inputs are the fp32 draws rounded to
// nearest even (ieee_half.h, written from IEEE 754, not the kernels' conversion), the reference
// sees exactly those values, and bf16 outputs are widened exactly before the comparison.
// bool inputs (a byte each) are true for 80% of the draws; the reference sees 1 or 0. int32
// inputs (1-bit codes' sign words) are uniform over all 2^32 bit patterns. An output element
// is right when it is NaN where the reference's is NaN (an attention row whose keys are all
// masked), else within the tolerance; int32 outputs (sign words) must be equal.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

#include "dsl/nn_op_decl.h"
#include "generators/nn_reference.h"
#include "host_isa.h"
#include "ieee_half.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

bool attrs_match(const registry::Descriptor& d, const NnAttrs& want) {
  for (const auto& a : d.attrs) {
    auto it = want.find(a.name);
    // Problems run in every activation dtype unless they name one.
    if (a.name == dsl::kActivationDtypeAttr && it == want.end()) continue;
    if ((it == want.end() ? a.default_value : it->second) != a.value) return false;
  }
  return true;
}

std::string shapes_text(const NnShapes& s, const NnScalars& sc) {
  std::string t;
  for (const auto& [n, shape] : s) {
    t += n + "=[";
    for (size_t k = 0; k < shape.size(); ++k) t += (k ? "," : "") + std::to_string(shape[k]);
    t += "] ";
  }
  for (const auto& [n, v] : sc) {
    char b[64];
    std::snprintf(b, sizeof b, "%s=%g ", n.c_str(), v);
    t += b;
  }
  return t;
}

// Runs one problem on `k`; false when the variant's algorithm does not apply to it.
bool check_problem(Kernel& k, const NnReference& ref, const NnProblem& p, unsigned seed,
                   double& worst, std::string& worst_at) {
  const registry::Descriptor& d = k.descriptor();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(static_cast<float>(p.lo), static_cast<float>(p.hi));
  std::map<std::string, std::vector<float>> bufs;
  std::map<std::string, std::vector<uint16_t>> bf16_bufs;  // the bf16 tensors' bits
  std::map<std::string, std::vector<uint8_t>> bool_bufs;
  std::map<std::string, std::vector<int32_t>> int_bufs;
  std::uniform_int_distribution<int32_t> any_int(INT32_MIN, INT32_MAX);
  NnTensors in64;
  std::vector<Tensor> tensors;
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::scalar) continue;
    REQUIRE_MESSAGE(p.shapes.count(in.name), d.op << ": problem lacks a shape for " << in.name);
    const auto& shape = p.shapes.at(in.name);
    auto& b = bufs[in.name];
    b.resize(elements(shape));
    for (auto& v : b) v = u(rng);
    if (in.dtype == registry::DType::i32) {
      auto& w = int_bufs[in.name];
      for (size_t i = 0; i < b.size(); ++i) w.push_back(any_int(rng));
      tensors.push_back({in.name, w.data(), registry::DType::i32, shape});
      in64[in.name].assign(w.begin(), w.end());
      continue;
    }
    if (in.dtype == registry::DType::b8) {
      auto& m = bool_bufs[in.name];
      for (float& v : b) m.push_back(v >= p.lo + 0.2 * (p.hi - p.lo)), v = m.back();
      tensors.push_back({in.name, m.data(), registry::DType::b8, shape});
    } else if (in.dtype == registry::DType::bf16) {
      auto& h = bf16_bufs[in.name];
      for (float& v : b) h.push_back(ref_bf16_bits(v)), v = bf16_to_float(h.back());
      tensors.push_back({in.name, h.data(), registry::DType::bf16, shape});
    } else {
      REQUIRE(in.dtype == registry::DType::f32);
      tensors.push_back({in.name, b.data(), registry::DType::f32, shape});
    }
    in64[in.name].assign(b.begin(), b.end());
  }
  const auto out_shapes = k.output_shapes(tensors, p.scalars);
  for (size_t j = 0; j < d.outputs.size(); ++j) {
    const auto& o = d.outputs[j];
    if (o.dtype == registry::DType::bf16) {  // NaN bits: every element must be written
      auto& h = bf16_bufs[o.name];
      h.assign(elements(out_shapes[j]), uint16_t{0x7fc0});
      tensors.push_back({o.name, h.data(), registry::DType::bf16, out_shapes[j]});
      continue;
    }
    if (o.dtype == registry::DType::i32) {
      auto& w = int_bufs[o.name];
      w.assign(elements(out_shapes[j]), 0x5a5a5a5a);  // a pattern no reference gives everywhere
      tensors.push_back({o.name, w.data(), registry::DType::i32, out_shapes[j]});
      continue;
    }
    auto& b = bufs[o.name];
    b.assign(elements(out_shapes[j]), std::nanf(""));  // every element must be written
    tensors.push_back({o.name, b.data(), registry::DType::f32, out_shapes[j]});
  }
  try {
    k.call(tensors, p.scalars);
  } catch (const Error& e) {
    if (std::string(e.what()).find("applies only when") != std::string::npos) return false;
    throw;
  }
  for (const auto& o : d.outputs) {
    if (o.dtype != registry::DType::bf16) continue;
    auto& b = bufs[o.name];
    b.clear();
    for (uint16_t h : bf16_bufs.at(o.name)) b.push_back(bf16_to_float(h));
  }
  const NnTensors want = ref.outputs(p.shapes, in64, p.scalars, p.attrs);
  const auto [rtol, atol] =
      ref.tolerance ? ref.tolerance(p) : std::make_pair(d.tolerance.rtol, d.tolerance.atol);
  for (const auto& o : d.outputs) {
    REQUIRE_MESSAGE(want.count(o.name), "reference gives no " << o.name);
    if (o.dtype == registry::DType::i32) {  // exact
      const auto& got = int_bufs.at(o.name);
      const auto& w = want.at(o.name);
      REQUIRE(w.size() == got.size());
      for (size_t i = 0; i < got.size(); ++i) {
        if (static_cast<double>(got[i]) == w[i]) continue;
        worst = INFINITY;
        worst_at = shapes_text(p.shapes, p.scalars) + o.name + "[" + std::to_string(i) + "]: got " +
                   std::to_string(got[i]) + " want " + std::to_string(w[i]);
        break;
      }
      continue;
    }
    const auto& got = bufs.at(o.name);
    const auto& w = want.at(o.name);
    REQUIRE(w.size() == got.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(w[i]) && std::isnan(got[i])) continue;
      const double err = std::fabs(static_cast<double>(got[i]) - w[i]);
      const double ratio = err == 0 ? 0 : err / (atol + rtol * std::fabs(w[i]));
      if (!(ratio <= worst)) {  // NaN counts as the worst
        worst = std::isnan(ratio) ? INFINITY : ratio;
        char b[160];
        std::snprintf(b, sizeof b, "%s[%zu]: got %.7g want %.7g", o.name.c_str(), i,
                      static_cast<double>(got[i]), w[i]);
        worst_at = shapes_text(p.shapes, p.scalars) + b;
      }
    }
  }
  return true;
}

TEST_CASE("every NN variant matches its fp64 reference on the problems it applies to") {
  auto reg = Registry::open(test_registry_dir());
  int variants = 0;
  for (const auto& op : reg->ops()) {
    const auto vs = reg->variants(op);
    if (!vs.front().shape.named_dims) continue;
    const NnReference* ref = find_nn_reference(op);
    REQUIRE_MESSAGE(ref, op << " has no fp64 reference (tests/generators/test_nn_*.cpp)");
    for (const auto& d : vs) {
      if (!runs_here(d)) continue;
      CAPTURE(d.variant);
      Kernel& k = reg->load(d.variant);
      int ran = 0;
      double worst = 0;
      std::string worst_at;
      for (size_t i = 0; i < ref->problems.size(); ++i) {
        const NnProblem& p = ref->problems[i];
        if (!attrs_match(d, p.attrs)) continue;
        CAPTURE(shapes_text(p.shapes, p.scalars));
        ran += check_problem(k, *ref, p, static_cast<unsigned>(1000 + i), worst, worst_at);
      }
      MESSAGE(d.variant << ": " << ran << " problems, worst error " << worst << "x of tolerance at "
                        << worst_at);
      CHECK_MESSAGE(ran >= 2, d.variant << " applies to " << ran << " of the problems");
      CHECK_MESSAGE(worst <= 1.0, d.variant << ": " << worst << "x of tolerance at " << worst_at);
      ++variants;
    }
  }
  CHECK(variants > 0);
}

}  // namespace
}  // namespace opforge::testing
