#include "registry/builder/golden.h"

#include <Halide.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <type_traits>

#include "dsl/optimizer_pipeline.h"
#include "dsl/ulp.h"

namespace opforge::builder {

using registry::Input;

namespace {

// A multi-tensor op: each model tensor's chunks gathered, its single-tensor form run on them
// (LAMB's and LARS's norms per tensor, as the segmented kernel reduces), scattered back.
// Results (found_inf) are whole-call flags each tensor may set and every tensor's update
// reads: a first pass finds what any tensor sets; where that differs from the flag's value
// before the call, a second pass starts every tensor from it (all skip, as the kernel does).
void run_per_tensor(const dsl::ResolvedOp& op, GoldenData& d, bool fp32) {
  const int64_t chunks = static_cast<int64_t>(d.segments.size());
  if (chunks == 0 || d.n % chunks != 0) {
    throw std::invalid_argument("op '" + op.name() + "': the golden needs a segment table of K " +
                                "chunks dividing the " + std::to_string(d.n) + " elements");
  }
  const int64_t c = d.n / chunks;
  const dsl::OptimizerDecl single = op.as_optimizer().per_tensor();
  const dsl::ResolvedOp per_tensor = dsl::resolve(single, op.attrs);
  std::map<int32_t, std::vector<int64_t>> chunks_of;  // model tensor -> its chunks, in order
  for (int64_t k = 0; k < chunks; ++k) chunks_of[d.segments[k]].push_back(k);
  std::map<std::string, double> results;  // one-element tensors: their values before the call
  for (const auto& r : op.results) {
    if (d.tensors.count(r)) results[r] = d.tensors.at(r).at(0);
  }
  // Every tensor's update from `start` (result values); the results each tensor left, max'd.
  auto pass = [&](const std::map<std::string, double>& start, GoldenData& out) {
    std::map<std::string, double> set = start;
    for (const auto& [t, ks] : chunks_of) {
      GoldenData sub;
      sub.scalars = d.scalars;
      sub.n = static_cast<int64_t>(ks.size()) * c;
      for (const auto& [name, v] : d.tensors) {
        auto& w = sub.tensors[name];
        if (results.count(name)) {
          w = {start.at(name)};
          continue;
        }
        if (static_cast<int64_t>(v.size()) != d.n)
          throw std::invalid_argument("op '" + op.name() + "': tensor '" + name +
                                      "' is neither a flat model buffer nor a result");
        for (int64_t k : ks) w.insert(w.end(), v.begin() + k * c, v.begin() + (k + 1) * c);
      }
      run_golden(per_tensor, sub, fp32);
      for (auto& [name, v] : out.tensors) {
        const std::vector<double>& w = sub.tensors.at(name);
        if (results.count(name)) {
          set[name] = std::max(set[name], w.at(0));
          continue;
        }
        for (size_t j = 0; j < ks.size(); ++j)
          std::copy(w.begin() + j * c, w.begin() + (j + 1) * c, v.begin() + ks[j] * c);
      }
    }
    for (const auto& [name, v] : set) out.tensors.at(name) = {v};
    return set;
  };
  GoldenData first = d;
  const std::map<std::string, double> set = pass(results, first);
  if (set == results) {
    d.tensors = std::move(first.tensors);
    return;
  }
  pass(set, d);
}

}  // namespace

void run_golden(const dsl::ResolvedOp& op, GoldenData& d, bool fp32, Sensitivity* sensitivity) {
  const dsl::OptimizerDecl& decl = op.as_optimizer();
  if (sensitivity) sensitivity->clear();
  if (decl.is_multi_tensor()) return run_per_tensor(op, d, fp32);
  if (decl.storage().quant) {
    throw std::invalid_argument("op '" + decl.name() + "': storage " + decl.storage().tag() +
                                " (8-bit states) is not in the fp64 golden yet; "
                                "tests/generators/test_kernels.cpp checks it against a "
                                "blockwise-quantizing fp64 reference");
  }
  dsl::Bindings in;
  const Halide::Type real = fp32 ? Halide::Float(32) : Halide::Float(64);
  in.compute = real;
  in.scheduled = false;
  in.root_reductions = true;
  std::vector<Halide::ImageParam> images;
  std::vector<Halide::Param<>> params;
  std::map<std::string, Halide::Buffer<>> buffers;      // keeps the data views alive
  std::map<std::string, std::vector<float>> narrowed;   // fp32: the inputs as float
  std::map<std::string, Halide::Param<>> float_params;  // fp32 scalars, to nudge
  std::vector<std::string> nudged;                      // fp32 states and gradients, to nudge
  for (const auto& [a, dims] : dsl::argument_layout(op)) {
    if (a.role == Input::Role::scalar) {
      const bool integer = a.dtype == registry::DType::i64;
      Halide::Param<> p(integer ? Halide::Int(64) : real, a.name);
      if (integer) {
        p.set<int64_t>(static_cast<int64_t>(d.scalars.at(a.name)));
      } else if (fp32) {
        p.set<float>(static_cast<float>(d.scalars.at(a.name)));
        float_params.emplace(a.name, p);
      } else {
        p.set<double>(d.scalars.at(a.name));
      }
      in.scalars[a.name] = p;
      params.push_back(p);
      continue;
    }
    Halide::Buffer<> b;
    if (decl.sparse() && a.name == "indices") {
      b = Halide::Buffer<int64_t>(d.indices.at(a.name).data(), static_cast<int>(d.count));
    } else {
      std::vector<int> shape;
      if (decl.sparse()) {
        const int64_t rows = a.role == Input::Role::state ? d.rows : d.count;
        shape = {static_cast<int>(d.cols), static_cast<int>(rows)};
      } else {
        // A result holds one element whatever n is.
        shape = {a.role == Input::Role::result ? 1 : static_cast<int>(d.n)};
      }
      std::vector<double>& t = d.tensors.at(a.name);
      int64_t need = 1;
      for (int e : shape) need *= e;
      if (static_cast<int64_t>(t.size()) < need)
        throw std::invalid_argument("golden: tensor '" + a.name + "' is too short");
      if (fp32) {
        std::vector<float>& f = narrowed[a.name];
        f.assign(t.begin(), t.begin() + need);
        if (a.role == Input::Role::state || a.role == Input::Role::gradient)
          nudged.push_back(a.name);
        b = Halide::Buffer<float>(f.data(), shape);
      } else {
        b = Halide::Buffer<double>(t.data(), shape);
      }
    }
    Halide::ImageParam im(b.type(), dims, a.name);
    im.set(b);
    for (int k = 0; k < dims; ++k) in.extents[a.name].push_back(im.dim(k).extent());
    in.tensors[a.name] = im;
    images.push_back(im);
    buffers[a.name] = b;
  }
  Halide::Func out{Halide::Internal::Function("golden")};
  const dsl::Definition def = dsl::define_optimizer(op, in, out, {});
  // Outputs are fresh copies of the states (the sparse form only rewrites indexed rows).
  const std::vector<std::string> states = dsl::output_order(op);  // the Tuple's order
  std::vector<Halide::Func> funcs;
  if (!states.empty()) funcs.push_back(out);
  funcs.insert(funcs.end(), def.results.begin(), def.results.end());
  std::vector<Halide::Type> types;  // per output, in the order below
  for (const Halide::Func& f : funcs) {
    for (const Halide::Type& t : f.output_types()) types.push_back(t);
  }
  const std::vector<std::string>& result_names = op.results;
  std::vector<std::string> names = states;
  names.insert(names.end(), result_names.begin(), result_names.end());
  // Fresh output buffers: copies of the states (the sparse form rewrites indexed rows only).
  auto fresh_outputs = [&] {
    std::vector<Halide::Buffer<>> outs;
    for (size_t k = 0; k < names.size(); ++k) {
      const Halide::Buffer<>& in_buf = buffers.at(names[k]);
      if (in_buf.type() == types.at(k)) {
        outs.push_back(in_buf.copy());
        continue;
      }
      // fp32: a narrow output (an 8-bit-state op's bf16 model copy; dense, so every element
      // is written) is realized in its own type and widened below.
      std::vector<int> shape;
      for (int dim = 0; dim < in_buf.dimensions(); ++dim) shape.push_back(in_buf.dim(dim).extent());
      outs.emplace_back(types.at(k), shape);
    }
    return outs;
  };
  // Output k's elements, widened exactly to fp64 (the 16-bit types through fp32).
  auto read_back = [&](const Halide::Buffer<>& out, std::vector<double>& dst) {
    const int64_t n = out.number_of_elements();
    dst.resize(std::max<size_t>(dst.size(), n));
    auto widen = [&](auto type_tag) {
      using T = decltype(type_tag);
      const T* src = Halide::Buffer<T>(out).data();
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
          dst[i] = src[i];
        } else {
          dst[i] = static_cast<float>(src[i]);
        }
      }
    };
    const Halide::Type t = out.type();
    if (t == Halide::BFloat(16)) {
      widen(Halide::bfloat16_t());
    } else if (t == Halide::Float(16)) {
      widen(Halide::float16_t());
    } else if (fp32) {
      widen(float());
    } else {
      widen(double());
    }
  };
  Halide::Pipeline pipeline(funcs);
  const Halide::Target jit = Halide::get_jit_target_from_environment();
  std::vector<Halide::Buffer<>> outs = fresh_outputs();
  pipeline.realize(Halide::Realization(outs), jit);
  for (size_t k = 0; k < names.size(); ++k) read_back(outs[k], d.tensors.at(names[k]));
  if (!fp32 || !sensitivity) return;

  // Sensitivity: the same compiled pipeline rerun with one input one ulp up at a time (every
  // element of a state or gradient tensor, or one fp32 scalar), summing how far each output
  // element moves. Results (flags) are not nudged: one ulp above 0 is a set flag.
  for (const std::string& name : names) (*sensitivity)[name].assign(d.tensors.at(name).size(), 0.0);
  std::vector<double> moved;
  auto add_moves = [&] {
    std::vector<Halide::Buffer<>> again = fresh_outputs();
    pipeline.realize(Halide::Realization(again), jit);
    for (size_t k = 0; k < names.size(); ++k) {
      read_back(again[k], moved);
      const std::vector<double>& base = d.tensors.at(names[k]);
      std::vector<double>& s = sensitivity->at(names[k]);
      for (size_t i = 0; i < s.size() && i < moved.size(); ++i) {
        const double delta = std::fabs(moved[i] - base[i]);
        if (std::isfinite(delta)) s[i] += delta;  // an overflow allows nothing extra
      }
    }
  };
  for (auto& entry : float_params) {
    Halide::Param<>& p = entry.second;
    const float v = p.get<float>();
    p.set<float>(std::nextafter(v, std::numeric_limits<float>::infinity()));
    add_moves();
    p.set<float>(v);
  }
  for (const std::string& name : nudged) {
    std::vector<float>& f = narrowed.at(name);
    const std::vector<float> saved = f;
    for (float& x : f) x = std::nextafter(x, std::numeric_limits<float>::infinity());
    add_moves();
    f = saved;
  }
}

GoldenErrors compare_with_golden(const std::vector<float>& kernel,
                                 const std::vector<double>& golden, double rtol, double atol) {
  return compare_with_golden(kernel, golden, rtol, atol, {}, 0);
}

std::vector<double> fp32_spread(const std::vector<double>& golden, const std::vector<double>& fp32,
                                const std::vector<double>& sensitivity) {
  if (fp32.size() != golden.size() || (!sensitivity.empty() && sensitivity.size() != golden.size()))
    throw std::invalid_argument("fp32_spread: " + std::to_string(fp32.size()) +
                                " fp32 values and " + std::to_string(sensitivity.size()) +
                                " sensitivities against " + std::to_string(golden.size()) +
                                " fp64 values");
  std::vector<double> spread(golden.size(), 0.0);
  for (size_t i = 0; i < golden.size(); ++i) {
    if (std::isfinite(fp32[i] - golden[i])) spread[i] = std::fabs(fp32[i] - golden[i]);
    if (!sensitivity.empty()) spread[i] += sensitivity[i];
  }
  return spread;
}

GoldenErrors compare_with_golden(const std::vector<float>& kernel,
                                 const std::vector<double>& golden, double rtol, double atol,
                                 const std::vector<double>& spread, double conditioning) {
  if (!spread.empty() && spread.size() != golden.size())
    throw std::invalid_argument("compare_with_golden: spread of another size");
  if (kernel.size() != golden.size())
    throw std::invalid_argument("compare_with_golden: " + std::to_string(kernel.size()) +
                                " kernel values against " + std::to_string(golden.size()));
  GoldenErrors e;
  for (size_t i = 0; i < kernel.size(); ++i) {
    const float k = kernel[i];
    const double g = golden[i];
    ++e.elements;
    if (std::isnan(k) || std::isnan(g)) {
      e.exceeding += std::isnan(k) != std::isnan(g);
      continue;
    }
    const double err = std::fabs(k - g);
    e.max_abs = std::max(e.max_abs, err);
    if (g != 0) e.max_rel = std::max(e.max_rel, err / std::fabs(g));
    e.max_ulp = std::max(e.max_ulp, dsl::ulp_distance(k, static_cast<float>(g)));
    double allowed = atol + rtol * std::fabs(g);
    if (!spread.empty()) allowed += conditioning * spread[i];
    e.exceeding += !(err <= allowed);
  }
  return e;
}

}  // namespace opforge::builder
