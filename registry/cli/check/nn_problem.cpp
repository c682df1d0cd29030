#include "registry/cli/check/nn_problem.h"

#include <Halide.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "dsl/nn_op_decl.h"
#include "dsl/ulp.h"

namespace opforge::nn_golden {

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

namespace {

uint16_t bf16_bits(float x) {
  return Halide::bfloat16_t(x).to_bits();
}
float bf16_value(uint16_t h) {
  return float(Halide::bfloat16_t::make_from_bits(h));
}

}  // namespace

void judge_outputs(const registry::Descriptor& d, const NnReference& ref, const NnProblem& p,
                   const NnTensors& in64, const NnTensors& got, NnProblemCheck& r) {
  r.applied = true;
  const NnTensors want = ref.outputs(p.shapes, in64, p.scalars, p.attrs);
  std::tie(r.rtol, r.atol) =
      ref.tolerance ? ref.tolerance(p) : std::make_pair(d.tolerance.rtol, d.tolerance.atol);
  for (const auto& o : d.outputs) {
    if (!want.count(o.name)) throw std::runtime_error(d.op + ": the reference gives no " + o.name);
    const auto& w = want.at(o.name);
    builder::GoldenErrors& e = r.outputs[o.name];
    auto note = [&](size_t i, double value, bool exact) {
      ++e.elements;
      if (std::isnan(w[i]) && std::isnan(value)) return;
      const double err = std::fabs(value - w[i]);
      const double ratio = exact ? (value == w[i] ? 0 : INFINITY)
                                 : (err == 0 ? 0 : err / (r.atol + r.rtol * std::fabs(w[i])));
      if (!(ratio <= 1)) ++e.exceeding;
      if (!(err <= e.max_abs)) e.max_abs = std::isnan(err) ? INFINITY : err;
      if (w[i] != 0 && err / std::fabs(w[i]) > e.max_rel) e.max_rel = err / std::fabs(w[i]);
      if (!exact && std::isfinite(value) && std::isfinite(w[i]))
        e.max_ulp = std::max<int64_t>(
            e.max_ulp, dsl::ulp_distance(static_cast<float>(value), static_cast<float>(w[i])));
      if (!(ratio <= r.worst)) {  // NaN counts as the worst
        r.worst = std::isnan(ratio) ? INFINITY : ratio;
        char b[160];
        std::snprintf(b, sizeof b, "%s[%zu]: got %.7g want %.7g", o.name.c_str(), i, value, w[i]);
        r.worst_at = shapes_text(p.shapes, p.scalars) + b;
      }
    };
    auto it = got.find(o.name);
    if (it == got.end()) throw std::runtime_error(d.op + ": no kernel output " + o.name);
    const std::vector<double>& k = it->second;
    if (w.size() != k.size())
      throw std::runtime_error(d.op + ": output " + o.name + " has " + std::to_string(k.size()) +
                               " elements, the reference " + std::to_string(w.size()));
    for (size_t i = 0; i < k.size(); ++i) note(i, k[i], o.dtype == registry::DType::i32);
  }
}

NnProblemCheck check_problem(Kernel& k, const NnReference& ref, const NnProblem& p, unsigned seed) {
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
    if (!p.shapes.count(in.name))
      throw std::runtime_error(d.op + ": the problem has no shape for " + in.name);
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
      for (float& v : b) h.push_back(bf16_bits(v)), v = bf16_value(h.back());
      tensors.push_back({in.name, h.data(), registry::DType::bf16, shape});
    } else if (in.dtype == registry::DType::f32) {
      tensors.push_back({in.name, b.data(), registry::DType::f32, shape});
    } else {
      throw std::runtime_error(d.op + ": input " + in.name + " is " +
                               registry::dtype_name(in.dtype) + ", which the check cannot draw");
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
  NnProblemCheck r;
  try {
    k.call(tensors, p.scalars);
  } catch (const Error& e) {
    if (std::string(e.what()).find("applies only when") != std::string::npos) return r;
    throw;
  }
  for (const auto& o : d.outputs) {
    if (o.dtype != registry::DType::bf16) continue;
    auto& b = bufs[o.name];
    b.clear();
    for (uint16_t h : bf16_bufs.at(o.name)) b.push_back(bf16_value(h));
  }
  NnTensors got;
  for (const auto& o : d.outputs) {
    auto& g = got[o.name];
    if (o.dtype == registry::DType::i32) {
      g.assign(int_bufs.at(o.name).begin(), int_bufs.at(o.name).end());
    } else {
      g.assign(bufs.at(o.name).begin(), bufs.at(o.name).end());
    }
  }
  judge_outputs(d, ref, p, in64, got, r);
  return r;
}

}  // namespace opforge::nn_golden
