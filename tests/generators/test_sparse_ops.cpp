// The sparse (indexed-row) ops against an fp64 reference: for each k in order, the dense
// op's formula (TensorFlow training_ops.cc, written out below from the published formulas)
// is applied to row indices[k] of every state with grad row k, so duplicate indices apply
// one after another. Every row is compared: untouched rows must be bit-identical, touched
// rows within the op's tolerance (times the number of times the row was hit: each update
// may contribute its own rounding).
//
// Also the argument checks: out-of-range indices (nothing written), grad shapes, index rank
// and dtype.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <set>

#include "generators/reference.h"
#include "host_isa.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

// ---- Dense formulas, one element at a time (double) ------------------------------------

double sign(double x) {
  return (x > 0) - (x < 0);
}

// ApplyAdagrad: if update_slots: accum += g^2; var -= g * lr / sqrt(accum)
void adagrad(bool update_slots, double lr, double& var, double& accum, double g) {
  if (update_slots) accum += g * g;
  var -= g * lr / std::sqrt(accum);
}

// ApplyFtrl (multiply_linear_by_lr false / true), n' = accum + g^2,
// pw(x) = sqrt(x) if lr_power == -0.5 else x^(-lr_power):
//   false: linear += g - (pw(n') - pw(n)) / lr * var
//          var = |linear| > l1 ? (l1 * sign(linear) - linear) / (pw(n') / lr + 2 * l2) : 0
//   true:  linear += g * lr - (pw(n') - pw(n)) * var
//          var = |linear| > l1 * lr ? (l1 * lr * sign(linear) - linear) / (pw(n') + 2 * l2 * lr)
//                                   : 0
//   accum = n'
void ftrl(bool mul_lr, double lr, double l1, double l2, double lr_power, double& var, double& accum,
          double& linear, double g) {
  auto pw = [&](double x) { return lr_power == -0.5 ? std::sqrt(x) : std::pow(x, -lr_power); };
  const double n = accum, n1 = accum + g * g;
  if (mul_lr) {
    linear += g * lr - (pw(n1) - pw(n)) * var;
    const double x = l1 * lr * sign(linear) - linear, y = pw(n1) + 2 * l2 * lr;
    var = std::fabs(linear) > l1 * lr ? x / y : 0.0;
  } else {
    linear += g - (pw(n1) - pw(n)) / lr * var;
    const double x = l1 * sign(linear) - linear, y = pw(n1) / lr + 2 * l2;
    var = std::fabs(linear) > l1 ? x / y : 0.0;
  }
  accum = n1;
}

// ApplyMomentum: accum = accum * momentum + g;
//   var -= lr * accum  |  nesterov: var -= g * lr + accum * momentum * lr
void momentum(bool nesterov, double lr, double mom, double& var, double& accum, double g) {
  accum = accum * mom + g;
  var -= nesterov ? g * lr + accum * mom * lr : lr * accum;
}

// ApplyProximalAdagrad: accum += g^2; lr_t = lr / sqrt(accum); v = var - g * lr_t;
//   var = l1 > 0 ? sign(v) * max(|v| - lr_t * l1, 0) / (1 + l2 * lr_t) : v / (1 + l2 * lr_t)
void proximal_adagrad(double lr, double l1, double l2, double& var, double& accum, double g) {
  accum += g * g;
  const double lr_t = lr / std::sqrt(accum);
  const double v = var - g * lr_t;
  var = l1 > 0 ? sign(v) * std::max(std::fabs(v) - lr_t * l1, 0.0) / (1 + l2 * lr_t)
               : v / (1 + l2 * lr_t);
}

// ApplyAdam: m += (g - m) * (1 - b1); v += (g^2 - v) * (1 - b2);
//   num = nesterov ? g * (1 - b1) + b1 * m : m
//   epsilon_mode tf:    var -= lr * sqrt(1 - b2p) / (1 - b1p) * num / (sqrt(v) + eps)
//   epsilon_mode torch: var -= lr / (1 - b1p) * num / (sqrt(v) / sqrt(1 - b2p) + eps)
void adam(bool nesterov, bool eps_torch, const Scalars& s, double& var, double& m, double& v,
          double g) {
  const double b1 = s.at("beta1"), b2 = s.at("beta2"), b1p = s.at("beta1_power"),
               b2p = s.at("beta2_power"), lr = s.at("lr"), eps = s.at("epsilon");
  m += (g - m) * (1 - b1);
  v += (g * g - v) * (1 - b2);
  const double num = nesterov ? g * (1 - b1) + b1 * m : m;
  if (eps_torch) {
    var -= lr / (1 - b1p) * num / (std::sqrt(v) / std::sqrt(1 - b2p) + eps);
  } else {
    var -= lr * std::sqrt(1 - b2p) / (1 - b1p) * num / (std::sqrt(v) + eps);
  }
}

double f32(double x) {
  return static_cast<float>(x);
}

// ---- The sparse ops ----------------------------------------------------------------------

// FTRL state as FTRL leaves it: accum in [0.1, 2], linear in [-3, 3] (times lr with
// multiply_linear_by_lr) and var the closed form of (linear, accum); every 4th element a fresh
// slot (accum 0.1, linear 0, an initial var in [-0.05, 0.05]). An unrelated var would make
// linear += g - (pw(n') - pw(n)) / lr * var cancel catastrophically in fp32, an error no
// kernel can avoid and training never sees.
void ftrl_init(std::mt19937& rng, size_t n, const Attrs& a, const Scalars& s, Tensors& t) {
  const bool mul = a.count("multiply_linear_by_lr") && a.at("multiply_linear_by_lr") == "true";
  const double lr = s.at("lr"), l1 = s.at("l1"), l2 = s.at("l2"), lr_power = s.at("lr_power");
  std::vector<double> accum = uniform(rng, n, 0.1, 2), linear = uniform(rng, n, -3, 3),
                      var = uniform(rng, n, -0.05, 0.05);
  for (size_t i = 0; i < n; ++i) {
    if (i % 4 == 3) {
      accum[i] = f32(0.1);
      linear[i] = 0;
      continue;
    }
    if (mul) linear[i] = f32(linear[i] * lr);
    const double pw = lr_power == -0.5 ? std::sqrt(accum[i]) : std::pow(accum[i], -lr_power);
    const double l1e = mul ? l1 * lr : l1, y = mul ? pw + 2 * l2 * lr : pw / lr + 2 * l2;
    var[i] = f32(std::fabs(linear[i]) > l1e ? (l1e * sign(linear[i]) - linear[i]) / y : 0.0);
  }
  t["var"] = var;
  t["accum"] = accum;
  t["linear"] = linear;
}

using Row = std::map<std::string, double*>;  // state name -> its row

struct SparseOp {
  std::string name;
  std::vector<std::string> args;    // argument order, as the op spec states it
  std::vector<std::string> states;  // in argument order
  std::set<std::string> attrs;      // besides Tindices
  // Fills the states (n elements each, from the op's domain).
  std::function<void(std::mt19937&, size_t n, const Attrs&, const Scalars&, Tensors&)> init;
  std::vector<Scalars> scalar_sets;  // each run once
  // Updates one row (cols elements) with gradient row g.
  std::function<void(const Attrs&, const Scalars&, Row&, const double* g, size_t cols)> row;
};

bool attr_true(const Attrs& a, const std::string& name) {
  auto it = a.find(name);
  return it != a.end() && it->second == "true";
}

const std::vector<SparseOp>& sparse_ops() {
  static const std::vector<SparseOp> ops = {
      {"sparse_apply_adagrad",
       {"var", "accum", "lr", "grad", "indices"},
       {"var", "accum"},
       {"update_slots"},
       [](std::mt19937& rng, size_t n, const Attrs&, const Scalars&, Tensors& t) {
         t["var"] = uniform(rng, n, -1, 1);
         t["accum"] = uniform(rng, n, 0.1, 1);
       },
       {{{"lr", f32(0.05)}}, {{"lr", f32(0.003)}}},
       [](const Attrs& a, const Scalars& s, Row& r, const double* g, size_t cols) {
         const bool slots = !a.count("update_slots") || a.at("update_slots") == "true";
         for (size_t c = 0; c < cols; ++c)
           adagrad(slots, s.at("lr"), r["var"][c], r["accum"][c], g[c]);
       }},
      {"sparse_apply_ftrl",
       {"var", "accum", "linear", "grad", "indices", "lr", "l1", "l2", "lr_power"},
       {"var", "accum", "linear"},
       {"multiply_linear_by_lr"},
       ftrl_init,
       {{{"lr", f32(0.05)}, {"l1", f32(0.5)}, {"l2", f32(0.1)}, {"lr_power", -0.5}},
        {{"lr", f32(0.2)}, {"l1", 0.0}, {"l2", f32(0.01)}, {"lr_power", f32(-0.3)}},
        {{"lr", f32(0.3)}, {"l1", f32(1.5)}, {"l2", 0.0}, {"lr_power", f32(-0.7)}}},
       [](const Attrs& a, const Scalars& s, Row& r, const double* g, size_t cols) {
         const bool mul = attr_true(a, "multiply_linear_by_lr");
         for (size_t c = 0; c < cols; ++c) {
           ftrl(mul, s.at("lr"), s.at("l1"), s.at("l2"), s.at("lr_power"), r["var"][c],
                r["accum"][c], r["linear"][c], g[c]);
         }
       }},
      {"sparse_apply_momentum",
       {"var", "accum", "lr", "grad", "indices", "momentum"},
       {"var", "accum"},
       {"use_nesterov"},
       [](std::mt19937& rng, size_t n, const Attrs&, const Scalars&, Tensors& t) {
         t["var"] = uniform(rng, n, -1, 1);
         t["accum"] = uniform(rng, n, -1, 1);
       },
       {{{"lr", f32(0.01)}, {"momentum", f32(0.9)}}, {{"lr", f32(0.1)}, {"momentum", f32(0.5)}}},
       [](const Attrs& a, const Scalars& s, Row& r, const double* g, size_t cols) {
         const bool nesterov = attr_true(a, "use_nesterov");
         for (size_t c = 0; c < cols; ++c) {
           momentum(nesterov, s.at("lr"), s.at("momentum"), r["var"][c], r["accum"][c], g[c]);
         }
       }},
      {"sparse_apply_proximal_adagrad",
       {"var", "accum", "lr", "l1", "l2", "grad", "indices"},
       {"var", "accum"},
       {},
       [](std::mt19937& rng, size_t n, const Attrs&, const Scalars&, Tensors& t) {
         t["var"] = uniform(rng, n, -1, 1);
         t["accum"] = uniform(rng, n, 0.1, 1);
       },
       {{{"lr", f32(0.05)}, {"l1", f32(0.01)}, {"l2", f32(0.02)}},
        {{"lr", f32(0.1)}, {"l1", 0.0}, {"l2", f32(0.01)}},
        {{"lr", f32(0.2)}, {"l1", f32(0.5)}, {"l2", 0.0}}},
       [](const Attrs&, const Scalars& s, Row& r, const double* g, size_t cols) {
         for (size_t c = 0; c < cols; ++c) {
           proximal_adagrad(s.at("lr"), s.at("l1"), s.at("l2"), r["var"][c], r["accum"][c], g[c]);
         }
       }},
      {"sparse_adam",
       {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad",
        "indices"},
       {"var", "m", "v"},
       {"use_nesterov", "epsilon_mode"},
       [](std::mt19937& rng, size_t n, const Attrs&, const Scalars&, Tensors& t) {
         t["var"] = uniform(rng, n, -1, 1);
         t["m"] = uniform(rng, n, -0.1, 0.1);
         t["v"] = uniform(rng, n, 0, 0.01);
       },
       {{{"beta1_power", f32(std::pow(0.9, 3))},
         {"beta2_power", f32(std::pow(0.999, 3))},
         {"lr", f32(0.001)},
         {"beta1", f32(0.9)},
         {"beta2", f32(0.999)},
         {"epsilon", f32(1e-7)}},
        {{"beta1_power", f32(std::pow(0.85, 200))},
         {"beta2_power", f32(std::pow(0.995, 200))},
         {"lr", f32(0.01)},
         {"beta1", f32(0.85)},
         {"beta2", f32(0.995)},
         {"epsilon", f32(1e-3)}}},
       [](const Attrs& a, const Scalars& s, Row& r, const double* g, size_t cols) {
         const bool nesterov = attr_true(a, "use_nesterov");
         const bool eps_torch = a.count("epsilon_mode") && a.at("epsilon_mode") == "torch";
         for (size_t c = 0; c < cols; ++c)
           adam(nesterov, eps_torch, s, r["var"][c], r["m"][c], r["v"][c], g[c]);
       }},
  };
  return ops;
}

int64_t product(const std::vector<int64_t>& s, size_t from) {
  int64_t p = 1;
  for (size_t k = from; k < s.size(); ++k) p *= s[k];
  return p;
}

// One call's data: fp32 states, grad and indices (as the variant's dtype).
struct Call {
  std::map<std::string, std::vector<float>> states;
  std::vector<int64_t> state_shape;
  std::vector<float> grad;
  std::vector<int64_t> grad_shape;
  std::vector<int64_t> idx;  // the values
  std::vector<int64_t> idx_shape;
  registry::DType idx_dtype = registry::DType::i32;
  std::vector<int32_t> idx32;
  std::vector<int64_t> idx64;

  std::vector<Tensor> tensors() {
    std::vector<Tensor> t;
    for (auto& [name, v] : states) t.push_back({name, v.data(), registry::DType::f32, state_shape});
    t.push_back({"grad", grad.data(), registry::DType::f32, grad_shape});
    void* data;
    if (idx_dtype == registry::DType::i64) {
      idx64.assign(idx.begin(), idx.end());
      data = idx64.data();
    } else {
      idx32.assign(idx.begin(), idx.end());
      data = idx32.data();
    }
    t.push_back({"indices", data, idx_dtype, idx_shape});
    return t;
  }
};

registry::DType tindices(const registry::Descriptor& d) {
  return d.attr_values().at("Tindices") == "int64" ? registry::DType::i64 : registry::DType::i32;
}

struct Stats {
  double worst = 0;  // max |err| / (hits * (atol + rtol*|ref|))
  std::string where;
  double worst_once = 0;  // max |err| / (atol + rtol*|ref|) over rows hit once
  int64_t checked = 0;
};

// Runs one configuration on kernel k and compares every row with the reference.
void run_case(Kernel& k, const SparseOp& op, const std::vector<int64_t>& state_shape, int64_t len,
              const Scalars& s, unsigned seed, Stats& stats) {
  const registry::Descriptor& d = k.descriptor();
  const Attrs attrs = d.attr_values();
  const int64_t rows = state_shape[0], cols = product(state_shape, 1);
  std::mt19937 rng(seed);
  Tensors ref;
  op.init(rng, static_cast<size_t>(rows * cols), attrs, s, ref);
  const std::vector<double> grad = uniform(rng, static_cast<size_t>(len * cols), -1, 1);
  std::vector<int64_t> idx(static_cast<size_t>(len));
  std::uniform_int_distribution<int64_t> pick(0, rows - 1);
  for (auto& i : idx) i = pick(rng);
  if (len >= 3) idx[2] = idx[0];      // a duplicate at least
  if (len >= 37) idx[36] = rows - 1;  // the last row

  Call c;
  for (const auto& [name, v] : ref) c.states[name].assign(v.begin(), v.end());
  const auto before = c.states;
  c.state_shape = state_shape;
  c.grad.assign(grad.begin(), grad.end());
  c.grad_shape = state_shape;
  c.grad_shape[0] = len;
  c.idx = idx;
  c.idx_shape = {len};
  c.idx_dtype = tindices(d);
  k.call(c.tensors(), s);

  std::vector<int> hits(static_cast<size_t>(rows), 0);
  for (int64_t j = 0; j < len; ++j) {
    const int64_t r = idx[static_cast<size_t>(j)];
    ++hits[static_cast<size_t>(r)];
    Row row;
    for (auto& [name, v] : ref) row[name] = v.data() + r * cols;
    op.row(attrs, s, row, grad.data() + j * cols, static_cast<size_t>(cols));
  }

  const std::string config = d.variant + " shape " +
                             [&] {
                               std::string t;
                               for (auto x : state_shape)
                                 t += (t.empty() ? "[" : ", ") + std::to_string(x);
                               return t + "]";
                             }() +
                             " len " + std::to_string(len) + " seed " + std::to_string(seed);
  int failures = 0;
  for (const auto& kv : ref) {
    const std::string& name = kv.first;
    const std::vector<double>& want = kv.second;
    const std::vector<float>& got = c.states.at(name);
    const std::vector<float>& old = before.at(name);
    for (int64_t r = 0; r < rows; ++r) {
      const int h = hits[static_cast<size_t>(r)];
      for (int64_t col = 0; col < cols; ++col) {
        const size_t i = static_cast<size_t>(r * cols + col);
        ++stats.checked;
        if (h == 0) {
          if (std::memcmp(&got[i], &old[i], sizeof(float)) != 0 && failures++ < 3) {
            FAIL_CHECK(config << ": untouched row " << r << " of " << name << " changed at col "
                              << col << ": " << old[i] << " -> " << got[i]);
          }
          continue;
        }
        const double err = std::fabs(got[i] - want[i]);
        const double allowed = d.tolerance.atol + d.tolerance.rtol * std::fabs(want[i]);
        const double excess = std::isnan(err) ? INFINITY : err / (h * allowed);
        if (h == 1) stats.worst_once = std::max(stats.worst_once, excess);
        if (excess > stats.worst) {
          stats.worst = excess;
          stats.where = config + " " + name + "[" + std::to_string(r) + ", " + std::to_string(col) +
                        "] hit " + std::to_string(h) + "x";
        }
        if (!(err <= h * allowed) && failures++ < 3) {
          FAIL_CHECK(config << ": " << name << "[" << r << ", " << col << "] (row hit " << h
                            << "x) = " << got[i] << ", fp64 reference " << want[i] << ", error "
                            << err << " > " << h << " x " << allowed);
        }
      }
    }
  }
}

TEST_CASE("sparse ops: every variant matches the fp64 row-by-row reference") {
  auto reg = Registry::open(test_registry_dir());
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t rows : {1, 5, 100}) {
    for (int64_t cols : {1, 7, 17, 128}) shapes.push_back({rows, cols});
    shapes.push_back({rows});        // rank 1: cols = 1
    shapes.push_back({rows, 3, 5});  // rank 3: cols = 15
  }
  const int64_t lens[] = {0, 1, 3, 37, 1000};
  for (const SparseOp& op : sparse_ops()) {
    CAPTURE(op.name);
    std::vector<registry::Descriptor> variants;
    REQUIRE_NOTHROW(variants = reg->variants(op.name));
    std::set<std::string> tindices_seen;
    for (const registry::Descriptor& d : variants) {
      // The argument order is the op spec's.
      std::vector<std::string> names;
      for (const auto& in : d.inputs) names.push_back(in.name);
      CHECK_MESSAGE(names == op.args, d.variant);
      for (const auto& kv : d.attr_values()) {
        const std::string attr = kv.first;
        CHECK_MESSAGE((attr == "Tindices" || op.attrs.count(attr)),
                      d.variant << ": attr " << attr << " has no reference here");
      }
      tindices_seen.insert(d.attr_values().at("Tindices"));
      if (!runs_here(d)) continue;
      Kernel& k = reg->select(op.name, d.attr_values(), d.target.isa);
      REQUIRE(k.descriptor().variant == d.variant);
      Stats stats;
      unsigned seed = 1;
      for (const auto& shape : shapes) {
        for (int64_t len : lens) {
          for (const Scalars& s : op.scalar_sets) run_case(k, op, shape, len, s, seed++, stats);
        }
      }
      MESSAGE(d.variant << ": " << stats.checked << " values; worst error " << stats.worst_once
                        << "x of tolerance on rows hit once, " << stats.worst
                        << "x of (hits x tolerance) overall, at " << stats.where);
    }
    CHECK(tindices_seen == std::set<std::string>{"int32", "int64"});
  }
}

// ---- Argument errors -------------------------------------------------------------------

// A valid call on [5, 7] states with 3 indices; tests then break one thing.
Call valid_call(const SparseOp& op, registry::DType idx_dtype) {
  std::mt19937 rng(7);
  Tensors t;
  op.init(rng, 35, {}, op.scalar_sets.at(0), t);
  Call c;
  for (const auto& [name, v] : t) c.states[name].assign(v.begin(), v.end());
  c.state_shape = {5, 7};
  const std::vector<double> g = uniform(rng, 21, -1, 1);
  c.grad.assign(g.begin(), g.end());
  c.grad_shape = {3, 7};
  c.idx = {1, 3, 1};
  c.idx_shape = {3};
  c.idx_dtype = idx_dtype;
  return c;
}

// Calls k with c, expects an opforge::Error whose message contains every string in `want`,
// and checks that no state changed (bit for bit).
void expect_error(Kernel& k, Call& c, const Scalars& s, const std::vector<std::string>& want) {
  const auto before = c.states;
  std::string msg;
  try {
    k.call(c.tensors(), s);
  } catch (const Error& e) {
    msg = e.what();
  }
  CAPTURE(msg);
  REQUIRE_MESSAGE(!msg.empty(), "no opforge::Error thrown");
  for (const auto& w : want) CHECK_MESSAGE(msg.find(w) != std::string::npos, "missing: " << w);
  for (const auto& kv : before) {
    const std::string name = kv.first;
    const std::vector<float>& v = kv.second;
    CHECK_MESSAGE(std::memcmp(v.data(), c.states.at(name).data(), v.size() * sizeof(float)) == 0,
                  name << " was written");
  }
}

// Every runnable variant's kernel, best ISA (the error paths do not depend on the ISA).
template <typename F>
void for_each_sparse_variant(F f) {
  auto reg = Registry::open(test_registry_dir());
  for (const SparseOp& op : sparse_ops()) {
    for (const registry::Descriptor& d : reg->variants(op.name)) {
      if (!runs_here(d)) continue;
      Kernel& k = reg->select(op.name, d.attr_values(), "");
      if (k.descriptor().variant != d.variant) continue;  // one ISA per attr combination
      CAPTURE(d.variant);
      f(op, k, tindices(d));
    }
  }
}

TEST_CASE("sparse ops: an out-of-range index is an error naming it, and nothing is written") {
  int variants = 0;
  for_each_sparse_variant([&](const SparseOp& op, Kernel& k, registry::DType dt) {
    ++variants;
    const Scalars& s = op.scalar_sets.at(0);
    struct Bad {
      int pos;
      int64_t value;
    };
    std::vector<Bad> bad = {{2, 5}, {0, 5}, {2, -1}, {1, -2147483647 - 1}, {2, 2147483647}};
    if (dt == registry::DType::i64) {
      // Would alias a valid row if narrowed to 32 bits.
      bad.push_back({2, (int64_t{1} << 32) + 1});
      bad.push_back({1, -(int64_t{1} << 32) + 3});
      bad.push_back({0, INT64_MIN});
    }
    for (const Bad& b : bad) {
      CAPTURE(b.pos);
      CAPTURE(b.value);
      Call c = valid_call(op, dt);
      c.idx[static_cast<size_t>(b.pos)] = b.value;
      expect_error(k, c, s, {"[" + std::to_string(b.pos) + "]", std::to_string(b.value)});
    }
  });
  CHECK(variants >= 10);
}

TEST_CASE("sparse ops: grad of the wrong shape is an error naming both shapes") {
  for_each_sparse_variant([&](const SparseOp& op, Kernel& k, registry::DType dt) {
    const Scalars& s = op.scalar_sets.at(0);
    {  // one row too many
      Call c = valid_call(op, dt);
      c.grad.resize(28);
      c.grad_shape = {4, 7};
      expect_error(k, c, s, {"grad", "[4, 7]", "[3, 7]"});
    }
    {  // one row too few
      Call c = valid_call(op, dt);
      c.grad_shape = {2, 7};
      expect_error(k, c, s, {"grad", "[2, 7]", "[3, 7]"});
    }
    {  // wrong trailing dimension
      Call c = valid_call(op, dt);
      c.grad.resize(24);
      c.grad_shape = {3, 8};
      expect_error(k, c, s, {"grad", "[3, 8]", "[3, 7]"});
    }
    {  // wrong rank (same element count)
      Call c = valid_call(op, dt);
      c.grad_shape = {21};
      expect_error(k, c, s, {"grad", "[21]", "[3, 7]"});
    }
  });
}

TEST_CASE("sparse ops: indices must be a vector of the variant's index dtype") {
  for_each_sparse_variant([&](const SparseOp& op, Kernel& k, registry::DType dt) {
    const Scalars& s = op.scalar_sets.at(0);
    {  // [3, 1]
      Call c = valid_call(op, dt);
      c.idx_shape = {3, 1};
      expect_error(k, c, s, {"indices", "[3, 1]"});
    }
    {  // a scalar
      Call c = valid_call(op, dt);
      c.idx.resize(1);
      c.idx_shape = {};
      c.grad.resize(7);
      c.grad_shape = {1, 7};
      expect_error(k, c, s, {"indices"});
    }
    {  // int64 array to an int32 variant and vice versa
      Call c = valid_call(op, dt);
      c.idx_dtype = dt == registry::DType::i32 ? registry::DType::i64 : registry::DType::i32;
      expect_error(k, c, s,
                   {"indices", registry::dtype_name(c.idx_dtype), registry::dtype_name(dt)});
    }
    {  // a state of another shape
      Call c = valid_call(op, dt);
      c.states.at(op.states.back()).resize(40);
      // Only the last state differs: shapes are per call, so give it its own tensor list.
      std::vector<Tensor> t = c.tensors();
      for (auto& x : t) {
        if (x.name == op.states.back()) x.shape = {5, 8};
      }
      const auto before = c.states;
      CHECK_THROWS_AS(k.call(t, s), Error);
      for (const auto& kv : before) CHECK(kv.second == c.states.at(kv.first));
    }
  });
}

}  // namespace
}  // namespace opforge::testing
