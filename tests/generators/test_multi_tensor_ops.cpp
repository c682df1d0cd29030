// Multi-tensor forms (OptimizerDecl::multi_tensor): one call over flat buffers holding many
// model tensors, each starting on a chunk boundary, must give every tensor what the op's fp64
// reference gives that tensor alone (its own LAMB / LARS norms), leave the zero padding zero,
// and, with loss scaling, skip the whole model when any tensor's gradient is not finite.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

#include "generators/op_table.h"
#include "generators/reference.h"
#include "host_isa.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

// Odd sizes: a single element, vector tails, a serial-sized and a many-chunk tensor.
const std::vector<size_t> kTensorSizes = {1, 5, 17, 1000, 65543, 3, 4096};

struct Model {
  size_t chunk = 0;
  std::vector<size_t> offset, size;
  std::vector<int32_t> segments;
  size_t total = 0;
  Model(const std::vector<size_t>& sizes, size_t c) : chunk(c), size(sizes) {
    for (size_t t = 0; t < sizes.size(); ++t) {
      offset.push_back(total);
      const size_t chunks = (sizes[t] + c - 1) / c;
      for (size_t k = 0; k < chunks; ++k) segments.push_back(static_cast<int32_t>(t));
      total += chunks * c;
    }
  }
};

// Runs variant `id` of `op` over the model laid out with chunk `c`, per-tensor inputs from the
// single-tensor op's reference, and checks each tensor against that reference.
void check_against_reference(Registry& reg, const std::string& id, const std::string& single,
                             size_t c, unsigned seed) {
  Kernel& k = reg.load(id);
  const registry::Descriptor& d = k.descriptor();
  const Reference* ref = find_reference(single);
  REQUIRE(ref);
  Reference scaled;
  if (has_grad_scaling(d)) {
    scaled = with_grad_scaling(*ref, d);
    ref = &scaled;
  }
  const Model model(kTensorSizes, c);
  std::mt19937 rng(seed);
  std::vector<Tensors> per_tensor(model.size.size());
  Scalars scalars;
  for (size_t t = 0; t < model.size.size(); ++t) {
    Scalars s;
    ref->inputs(rng, model.size[t], d.attr_values(), per_tensor[t], s);
    if (t == 0) scalars = s;  // one call: the first tensor's scalars for every tensor
  }
  // Flat fp32 buffers, zero padding.
  std::map<std::string, std::vector<float>> flat;
  for (const auto& [name, v] : per_tensor[0]) {
    if (name == "found_inf") continue;
    auto& f = flat[name];
    f.assign(model.total, 0.f);
    for (size_t t = 0; t < model.size.size(); ++t) {
      const std::vector<double>& src = per_tensor[t].at(name);
      for (size_t i = 0; i < src.size(); ++i) f[model.offset[t] + i] = static_cast<float>(src[i]);
    }
  }
  std::vector<float> found_inf = {0.f};
  std::vector<int32_t> segments = model.segments;
  std::vector<Tensor> tensors;
  for (auto& [name, v] : flat) {
    tensors.push_back({name, v.data(), registry::DType::f32, {int64_t(model.total)}});
  }
  tensors.push_back(
      {"segments", segments.data(), registry::DType::i32, {int64_t(segments.size())}});
  if (d.find_input("found_inf")) {
    tensors.push_back({"found_inf", found_inf.data(), registry::DType::f32, {1}});
  }
  k.call(tensors, scalars);
  const registry::Tolerance tol = d.tolerance;
  for (size_t t = 0; t < model.size.size(); ++t) {
    Tensors want = per_tensor[t];
    ref->update(d.attr_values(), scalars, want);
    for (const auto& [name, w] : want) {
      if (name == "found_inf") {
        CHECK(found_inf[0] == w[0]);
        continue;
      }
      for (size_t i = 0; i < w.size(); ++i) {
        const float got = flat.at(name)[model.offset[t] + i];
        if (!(std::fabs(got - w[i]) <= tol.atol + tol.rtol * std::fabs(w[i]))) {
          FAIL_CHECK(id << " C=" << c << " tensor " << t << " (" << model.size[t] << ") " << name
                        << "[" << i << "] = " << got << ", fp64 reference " << w[i]);
          break;
        }
      }
    }
    // Padding after the tensor stays zero.
    const size_t end = t + 1 < model.size.size() ? model.offset[t + 1] : model.total;
    for (const auto& [name, f] : flat) {
      for (size_t i = model.offset[t] + model.size[t]; i < end; ++i) {
        if (f[i] != 0.f) {
          FAIL_CHECK(id << ": padding " << name << "[" << i << "] = " << f[i]);
          break;
        }
      }
    }
  }
}

std::vector<std::string> multi_variants(Registry& reg, const std::string& op) {
  std::vector<std::string> ids;
  for (const auto& e : reg.index().variants) {
    if (e.op == op && runs_here(reg.descriptor(e.variant))) ids.push_back(e.variant);
  }
  return ids;
}

TEST_CASE("multi-tensor LAMB and LARS: every tensor gets its own trust ratio") {
  auto reg = Registry::open(test_registry_dir());
  int checked = 0;
  for (const auto& [multi, single] : std::vector<std::pair<std::string, std::string>>{
           {"multi_tensor_apply_lamb", "apply_lamb"}, {"multi_tensor_apply_lars", "apply_lars"}}) {
    const auto ids = multi_variants(*reg, multi);
    REQUIRE_MESSAGE(!ids.empty(), multi);
    for (const auto& id : ids) {
      CAPTURE(id);
      for (size_t c : {16, 2048}) check_against_reference(*reg, id, single, c, 7 + c);
      ++checked;
    }
  }
  CHECK(checked >= 3);
}

TEST_CASE("multi-tensor LAMB with loss scaling: one non-finite gradient skips the whole model") {
  auto reg = Registry::open(test_registry_dir());
  int checked = 0;
  for (const auto& id : multi_variants(*reg, "multi_tensor_apply_lamb")) {
    Kernel& k = reg->load(id);
    if (!has_grad_scaling(k.descriptor())) continue;
    const Model model(kTensorSizes, 16);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1, 1);
    std::map<std::string, std::vector<float>> flat;
    for (const char* name : {"var", "m", "v", "grad"}) {
      flat[name].assign(model.total, 0.f);
      for (size_t t = 0; t < model.size.size(); ++t) {
        for (size_t i = 0; i < model.size[t]; ++i)
          flat[name][model.offset[t] + i] = std::string(name) == "v" ? std::fabs(u(rng)) : u(rng);
      }
    }
    flat["grad"][model.offset[4] + 77] = INFINITY;  // in the 65543-element tensor only
    const auto before = flat;
    std::vector<float> found_inf = {0.f};
    std::vector<int32_t> segments = model.segments;
    std::vector<Tensor> tensors;
    for (auto& [name, v] : flat)
      tensors.push_back({name, v.data(), registry::DType::f32, {int64_t(model.total)}});
    tensors.push_back(
        {"segments", segments.data(), registry::DType::i32, {int64_t(segments.size())}});
    tensors.push_back({"found_inf", found_inf.data(), registry::DType::f32, {1}});
    k.call(tensors, {{"lr", 0.01},
                     {"beta1", 0.9},
                     {"beta2", 0.999},
                     {"epsilon", 1e-6},
                     {"weight_decay", 0.01},
                     {"step", 1},
                     {"inv_scale", 0.5}});
    CHECK(found_inf[0] == 1.0f);
    for (const char* name : {"var", "m", "v"}) CHECK_MESSAGE(flat[name] == before.at(name), name);
    ++checked;
  }
  CHECK(checked >= 1);
}

TEST_CASE("multi-tensor calls refuse bad chunk tables, naming the argument") {
  auto reg = Registry::open(test_registry_dir());
  Kernel& k = reg->select("multi_tensor_apply_lars", {{"use_nesterov", "false"}});
  const int64_t n = 64;
  std::vector<float> var(n, 1.f), m(n, 0.f), grad(n, 0.5f);
  auto call = [&](std::vector<int32_t> seg) {
    try {
      k.call({{"var", var.data(), registry::DType::f32, {n}},
              {"m", m.data(), registry::DType::f32, {n}},
              {"grad", grad.data(), registry::DType::f32, {n}},
              {"segments", seg.data(), registry::DType::i32, {int64_t(seg.size())}}},
             {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0}, {"eta", 0.001}, {"epsilon", 0}});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<accepted>");
  };
  CHECK(call({0, 0, 1}).find("64 elements") != std::string::npos);  // 64/3 not whole
  CHECK(call({0, 0, 0, 0, 0, 0, 0, 0}).find("multiple of 16") != std::string::npos);  // C = 8
  CHECK(call({0, 5}).find("segments[1] = 5 is out of range [0, 2)") != std::string::npos);
  CHECK(call({0, 1}) == "<accepted>");
  CHECK(var == std::vector<float>(n, var[0]));  // both chunks got the same (uniform) update
}

}  // namespace
}  // namespace opforge::testing
