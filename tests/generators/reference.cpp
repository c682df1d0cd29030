#include "generators/reference.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "generators/isa.h"
#include "host_isa.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {

std::vector<std::string> runnable_isas() {
  std::vector<generators::Isa> table = generators::isas();
  std::stable_sort(table.begin(), table.end(),
                   [](const auto& a, const auto& b) { return a.priority < b.priority; });
  std::vector<std::pair<std::string, std::vector<std::string>>> isas;
  for (const auto& i : table) {
    if (i.every_op) isas.emplace_back(i.name, i.cpu_features);
  }
  return host_isas(isas).runnable;
}

std::map<std::string, Reference>& references() {
  static std::map<std::string, Reference> m;
  return m;
}

bool has_grad_scaling(const registry::Descriptor& d) {
  const registry::Attr* u = d.find_attr("unscale");
  const registry::Attr* k = d.find_attr("skip_if_nonfinite");
  return (u && u->value == "true") || (k && k->value == "true");
}

Reference with_grad_scaling(const Reference& r, const registry::Descriptor& d) {
  std::vector<std::string> grads;
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::gradient) grads.push_back(in.name);
  }
  const bool unscale = d.find_attr("unscale")->value == "true";
  const bool skip = d.find_attr("skip_if_nonfinite")->value == "true";
  Reference out;
  out.inputs = [=](std::mt19937& rng, size_t n, const Attrs& a, Tensors& t, Scalars& s) {
    r.inputs(rng, n, a, t, s);
    if (unscale) {
      for (const auto& g : grads) {
        for (double& x : t.at(g)) x *= 1024;
      }
      s["inv_scale"] = 1.0 / 1024;
    }
    t["found_inf"] = {0.0};
  };
  out.update = [=](const Attrs& a, const Scalars& s, Tensors& t) {
    Tensors work = t;
    const double old = t.at("found_inf").at(0);
    bool found = old != 0 || std::isnan(old);
    for (const auto& g : grads) {
      for (double& x : work.at(g)) {
        if (unscale) x *= s.at("inv_scale");
        found = found || !std::isfinite(x);
      }
    }
    if (!(skip && found)) {
      r.update(a, s, work);
      for (auto& [name, v] : t) {
        if (name != "found_inf" && std::find(grads.begin(), grads.end(), name) == grads.end())
          v = work.at(name);
      }
    }
    t["found_inf"] = {found ? 1.0 : old};
  };
  return out;
}

std::vector<double> uniform(std::mt19937& rng, size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = static_cast<float>(u(rng));  // representable in fp32
  return v;
}

std::vector<double> tile(const std::vector<double>& pattern, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern[i % pattern.size()];
  return v;
}

std::vector<std::map<std::string, std::vector<float>>> check_kernel(
    const std::string& op, const Attrs& attrs, const Tensors& in, const Scalars& s,
    void (*update)(const Attrs&, const Scalars&, Tensors&)) {
  auto reg = Registry::open(test_registry_dir());
  std::vector<std::map<std::string, std::vector<float>>> results;
  for (const std::string& isa : runnable_isas()) {
    CAPTURE(isa);
    Kernel& k = reg->select(op, attrs, isa);
    std::map<std::string, std::vector<float>> got;
    std::vector<Tensor> tensors;
    for (const auto& [name, v] : in) got[name].assign(v.begin(), v.end());
    for (auto& [name, v] : got) {
      tensors.push_back({name, v.data(), registry::DType::f32, {static_cast<int64_t>(v.size())}});
    }
    k.call(tensors, s);
    Tensors want = in;
    update(k.descriptor().attr_values(), s, want);
    const registry::Tolerance tol = k.descriptor().tolerance;
    for (const auto& [name, w] : want) {
      for (size_t i = 0; i < w.size(); ++i) {
        CHECK_MESSAGE(std::fabs(got[name][i] - w[i]) <= tol.atol + tol.rtol * std::fabs(w[i]),
                      name << "[" << i << "] = " << got[name][i] << ", fp64 reference " << w[i]);
      }
    }
    results.push_back(std::move(got));
  }
  return results;
}

void sign_inputs(std::mt19937& rng, size_t n, Tensors& t, double& beta) {
  const int k = static_cast<int>(rng() % 3) + 2;  // 2: random beta, 3: 0.875, 4: 0.9375
  beta = k == 2 ? uniform(rng, 1, 0.8, 0.99)[0] : 1 - std::ldexp(1.0, -k);
  t["var"] = uniform(rng, n, -1, 1);
  t["m"] = uniform(rng, n, -1, 1);
  t["grad"] = uniform(rng, n, -1, 1);
  std::uniform_int_distribution<int> q(-1024, 1024);
  for (size_t i = 0; i < n; ++i) {
    double &m = t["m"][i], &g = t["grad"][i];
    switch (i % 10) {
      case 0:
        g = 0;
        break;
      case 1:
        m = 0;
        break;
      case 2:
        m = g = 0;
        break;
      case 3:
        if (k != 2) {
          m = std::ldexp(q(rng), -14);
          g = -(std::ldexp(1.0, k) - 1) * m;
          break;
        }
        [[fallthrough]];
      default:
        while (m * g < 0 && std::fabs(m * beta + g * (1 - beta)) < 1e-4)
          m = uniform(rng, 1, -1, 1)[0];
    }
  }
}

const Reference* find_reference(const std::string& op) {
  auto it = references().find(op);
  if (it != references().end()) return &it->second;
  int s = 0, g = 0, reads = 0;
  if (std::sscanf(op.c_str(), "bandwidth_s%d_g%d_r%d", &s, &g, &reads) < 2) return nullptr;
  static std::map<std::string, Reference> bw;
  Reference& r = bw[op];
  r.inputs = [s, g](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars&) {
    for (int k = 0; k < s; ++k) t["s" + std::to_string(k)] = uniform(rng, n, -1, 1);
    for (int k = 0; k < g; ++k) t["g" + std::to_string(k)] = uniform(rng, n, -1, 1);
  };
  if (s == 0) {  // a read pass alone: its sum in the result `total`
    r.inputs = [g](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars&) {
      for (int k = 0; k < g; ++k) t["g" + std::to_string(k)] = uniform(rng, n, -1, 1);
      t["total"] = {0.0};
    };
    r.update = [reads](const Attrs&, const Scalars&, Tensors& t) {
      double total = 0;
      for (int k = 0; k < reads; ++k) {
        for (double x : t["g" + std::to_string(k)]) total += x;
      }
      t["total"] = {total};
    };
    return &r;
  }
  r.update = [s, g, reads](const Attrs&, const Scalars&, Tensors& t) {
    const size_t n = t["s0"].size();
    auto arg = [&](int k) -> std::vector<double>& {
      return k < s ? t["s" + std::to_string(k)] : t["g" + std::to_string(k - s)];
    };
    double total = 0;  // the read pass, over the old values
    for (int k = 0; k < reads; ++k) {
      for (double x : arg(k)) total += x;
    }
    for (size_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int k = 0; k < g; ++k) sum += t["g" + std::to_string(k)][i];
      if (reads) sum += total * 1e-30;
      for (int k = 0; k < s; ++k) t["s" + std::to_string(k)][i] += g ? sum : 1.0;
    }
  };
  return &r;
}

}  // namespace opforge::testing
