// opforge check OP: a registered kernel against the fp64 golden of its declaration (C++ op or
// rule) on seeded random data; exits 1 when an element exceeds the op's tolerance.
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "dsl/quant8.h"
#include "opforge/fp8.h"
#include "opforge/runtime.hpp"
#include "opforge/scalar_domain.h"
#include "opforge/suggest.hpp"
#include "registry/builder/golden.h"
#include "registry/builder/registry_builder.h"
#include "registry/cli/bench/bench_workload.h"
#include "registry/cli/commands.h"
#include "registry/cli/user_rules.h"

namespace opforge::cli {

namespace fs = std::filesystem;

namespace {

bool narrow(registry::DType t) {
  return t == registry::DType::f16 || t == registry::DType::bf16;
}
uint16_t to_bits(registry::DType t, float x) {
  return t == registry::DType::bf16 ? Halide::bfloat16_t(x).to_bits()
                                    : Halide::float16_t(x).to_bits();
}
float widen(registry::DType t, uint16_t h) {
  return t == registry::DType::bf16 ? float(Halide::bfloat16_t::make_from_bits(h))
                                    : float(Halide::float16_t::make_from_bits(h));
}

// The declarations of `op` (a C++ op or a rule), one per storage (f32, bf16m, bf16s, ...);
// rule declarations are owned by `keep`. Throws UsageError for an unknown op (naming the
// nearest) or an NN op.
std::vector<const dsl::OptimizerDecl*> declarations_of(
    const std::string& op, const std::vector<std::string>& rules,
    std::vector<std::unique_ptr<dsl::OptimizerDecl>>& keep, std::vector<std::string> names) {
  std::vector<const dsl::OptimizerDecl*> decls;
  for (const auto& row : builder::table_with_rules(rules, keep)) {
    names.push_back(row.decl->name());
    if (row.decl->name() != op) continue;
    const auto* opt = dynamic_cast<const dsl::OptimizerDecl*>(row.decl);
    if (!opt)
      throw UsageError("op '" + op +
                       "' is an NN op: opforge check compares optimizer ops with "
                       "their fp64 golden (tests/generators/test_nn_kernels.cpp checks NN ops)");
    decls.push_back(opt);
  }
  if (decls.empty()) throw UsageError("unknown op '" + op + "'" + did_you_mean(op, names));
  return decls;
}

// A rule op's declaration is its rule file: --rules, else the file its descriptor names when
// it still exists (the user registry keeps the sources of rules given as text).
std::vector<std::string> rule_files(const Args& a, Registry& reg, const std::string& op) {
  std::vector<std::string> rules = a.all("rules");
  if (!rules.empty()) return rules;
  const std::string prefix = "rule file ";
  try {
    const std::string ref = reg.variants(op).front().reference;
    std::error_code ec;
    if (ref.rfind(prefix, 0) == 0 && fs::exists(ref.substr(prefix.size()), ec))
      rules.push_back(ref.substr(prefix.size()));
  } catch (const Error&) {
    // not a registered op: declarations_of says so
  }
  return rules;
}

// The one in the kernel's storage: the golden evaluates it in fp64 from the same (rounded)
// narrow inputs.
const dsl::OptimizerDecl& in_storage_of(const std::vector<const dsl::OptimizerDecl*>& decls,
                                        const registry::Descriptor& d) {
  for (const auto* x : decls) {
    if (x->storage().tag() == storage_tag(d)) return *x;
  }
  return *decls.front();
}

// The 256 values of a descriptor's quant_map ("dynamic_signed", ...), as the kernels decode.
std::array<float, 256> quant_table(const std::string& name) {
  const bool dynamic = name.rfind("dynamic", 0) == 0;
  const bool is_signed = name.find("unsigned") == std::string::npos;
  return dsl::StateQuant{dynamic ? dsl::QuantMap::dynamic : dsl::QuantMap::linear, is_signed}
      .table();
}

// One check's data: the kernel's buffers (fp32, or narrow bits) and the golden's fp64 copies
// of the same values.
struct CheckData {
  builder::GoldenData golden;
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<uint16_t>> half;
  std::map<std::string, std::vector<uint8_t>> bytes;  // FP8 gradients' bits, 8-bit codes
  std::vector<int32_t> idx32;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::vector<Tensor> tensors;
  std::map<std::string, double> scalars;
  // The same declaration evaluated in fp32 (Tolerance::conditioning), by state.
  std::map<std::string, std::vector<double>> fp32_golden;
};

// One output's row of the report.
nlohmann::json errors_json(const builder::GoldenErrors& e) {
  return {{"max_abs_error", e.max_abs},
          {"max_rel_error", e.max_rel},
          {"max_ulp", e.max_ulp},
          {"exceeding", e.exceeding},
          {"elements", e.elements}};
}

// An 8-bit state against the golden (as tests/generators/test_quant8_states.cpp judges it):
// each block's new absmax is max |golden| within the op's tolerance; each decoded value
// (map value times the kernel's absmax) is within half the map's gap around its code, plus
// that tolerance, of the golden. Errors are relative to the block's absmax.
nlohmann::json compare_quantized(const registry::Descriptor& d, const registry::Input& in,
                                 const CheckData& c) {
  const bool scales = in.role == registry::Input::Role::block_scale;
  const std::string suffix = "_absmax";  // dsl::absmax_arg
  const std::string state = scales ? in.name.substr(0, in.name.size() - suffix.size()) : in.name;
  const registry::Input& q = *d.find_input(state);
  const std::vector<double>& golden = c.golden.tensors.at(state);
  const std::vector<float>& absmax = c.f32.at(state + suffix);
  const int64_t block = d.shape.block;
  const double rtol = d.tolerance.rtol, atol = d.tolerance.atol;
  builder::GoldenErrors e;
  auto note = [&](double err, double allowed, double scale) {
    ++e.elements;
    e.max_abs = std::max(e.max_abs, err);
    if (scale > 0) e.max_rel = std::max(e.max_rel, err / scale);
    if (!(err <= allowed)) ++e.exceeding;
  };
  if (scales) {
    for (size_t b = 0; b < absmax.size(); ++b) {
      double want = 0;
      for (size_t i = b * block; i < std::min(golden.size(), (b + 1) * block); ++i)
        want = std::max(want, std::fabs(golden[i]));
      note(std::fabs(absmax[b] - want), atol + rtol * want, want);
    }
    return errors_json(e);
  }
  const std::array<float, 256> map = quant_table(q.quant_map);
  const std::vector<uint8_t>& codes = c.bytes.at(state);
  for (size_t i = 0; i < codes.size(); ++i) {
    const int k = codes[i];
    const double a = absmax[i / block];
    const double gap = std::max(k > 0 ? double(map[k]) - map[k - 1] : 0.0,
                                k < 255 ? double(map[k + 1]) - map[k] : 0.0);
    const double slack = rtol + (a > 0 ? atol / a : 0);
    note(std::fabs(double(map[k]) * a - golden[i]), (gap / 2 + 2 * slack) * a + atol, a);
  }
  return errors_json(e);
}

// A random value inside `in`'s domain, near its typical value: uniform over a bounded
// interval; above a lower bound lo, lo + (typical - lo) * 2^u with u in [-3, 3] (so a learning
// rate stays a learning rate), or lo + 10^u, u in [-4, 0], when the typical value is lo (a
// weight decay of 0); unbounded, typical * 2^u (or u in [-1, 1] without one).
double random_scalar(const registry::Input& in, std::mt19937& rng) {
  const registry::ScalarDomain dom =
      registry::ScalarDomain::parse(in.domain.empty() ? "finite" : in.domain);
  const double typical = default_scalar(in);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int attempt = 0; attempt < 100; ++attempt) {
    double v;
    const bool lo = !dom.any && std::isfinite(dom.lo), hi = !dom.any && std::isfinite(dom.hi);
    if (lo && hi) {
      v = dom.lo + (dom.hi - dom.lo) * u(rng);
    } else if (lo) {
      v = typical > dom.lo ? dom.lo + (typical - dom.lo) * std::exp2(6 * u(rng) - 3)
                           : dom.lo + std::pow(10.0, 4 * u(rng) - 4);
    } else if (hi) {
      v = typical < dom.hi ? dom.hi - (dom.hi - typical) * std::exp2(6 * u(rng) - 3)
                           : dom.hi - std::pow(10.0, 4 * u(rng) - 4);
    } else {
      v = typical != 0 ? typical * std::exp2(4 * u(rng) - 2) : 2 * u(rng) - 1;
    }
    if (in.dtype == registry::DType::f32) v = double(float(v));
    if (dom.contains(v)) return v;
  }
  return typical;  // a domain too narrow for fp32 draws: its typical value
}

// Seeded data for every argument of `d`: states in [0.1, 1) (accumulators stay positive),
// other tensors in [-1, 1), narrow tensors (FP8 gradients too) the same draws rounded to
// nearest even, 8-bit states any code with absmaxes in [0.1, 1); scalars from --scalar, else
// (--scalars typical, the default) the descriptor's typical value, else the rule's default,
// else 0.5 (1 for integer scalars), or (--scalars random) a seeded draw inside the scalar's
// domain; fp32 ones rounded to fp32 for the golden too.
void make_inputs(const Args& a, const registry::Descriptor& d, CheckData& c) {
  std::mt19937 rng(static_cast<unsigned>(a.get_int("seed", 1)));
  std::uniform_real_distribution<float> state(0.1f, 1.0f), other(-1.0f, 1.0f);
  builder::GoldenData& g = c.golden;
  g.n = a.get_int("n", 100000);
  g.rows = a.get_int("rows", 1000);
  g.cols = a.get_int("cols", 17);
  g.count = a.get_int("indices", 500);
  if (g.n < 1 || g.rows < 1 || g.cols < 1 || g.count < 0) {
    throw UsageError("--n, --rows, --cols must be positive");
  }
  const std::map<std::string, double> given = scalar_options(a);
  const std::string how = a.get("scalars", "typical");
  if (how != "typical" && how != "random")
    throw UsageError("--scalars " + how + ": expected typical or random");
  std::mt19937 scalar_rng(static_cast<unsigned>(a.get_int("seed", 1)) * 7919u + 1u);
  std::map<std::string, registry::DType> dtypes;
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::scalar) {
      const bool integer = in.dtype == registry::DType::i64 || in.dtype == registry::DType::i32;
      const double v = given.count(in.name)          ? given.at(in.name)
                       : how == "random" && !integer ? random_scalar(in, scalar_rng)
                                                     : default_scalar(in);
      // The kernel reads an fp32 scalar rounded (0.9 as 0.899999976): the golden reads the
      // same value, as it reads narrow tensors' rounded values. Else a row that a sparse
      // call updates k times (duplicate indices) drifts by k times the rounding.
      g.scalars[in.name] = in.dtype == registry::DType::f32 ? double(float(v)) : v;
      continue;
    }
    if (!d.shape.elementwise && in.name == d.shape.indices) {
      std::uniform_int_distribution<int64_t> pick(0, g.rows - 1);
      auto& v = g.indices[in.name];
      for (int64_t k = 0; k < g.count; ++k) v.push_back(pick(rng));
      c.idx32.assign(v.begin(), v.end());
      c.shapes[in.name] = {g.count};
      const bool wide = in.dtype == registry::DType::i64;
      c.tensors.push_back({in.name, wide ? static_cast<void*>(v.data()) : c.idx32.data(), in.dtype,
                           c.shapes[in.name]});
      continue;
    }
    if (in.role == registry::Input::Role::result) {  // one element, starting clear
      c.shapes[in.name] = {1};
      c.f32[in.name] = {0.f};
      g.tensors[in.name] = {0.0};
      continue;
    }
    if (in.role == registry::Input::Role::block_scale) {  // 8-bit states' absmaxes, [0.1, 1)
      const int64_t blocks = (g.n + d.shape.block - 1) / d.shape.block;
      c.shapes[in.name] = {blocks};
      dtypes[in.name] = in.dtype;
      for (int64_t k = 0; k < blocks; ++k) c.f32[in.name].push_back(state(rng));
      continue;  // not the golden's: it reads the decoded states
    }
    const bool is_state = in.role == registry::Input::Role::state;
    const int64_t n = d.shape.elementwise ? g.n : (is_state ? g.rows : g.count) * g.cols;
    c.shapes[in.name] =
        d.shape.elementwise ? std::vector<int64_t>{n} : std::vector<int64_t>{n / g.cols, g.cols};
    dtypes[in.name] = in.dtype;
    if (narrow(in.dtype)) {
      auto& h = c.half[in.name];
      for (int64_t k = 0; k < n; ++k)
        h.push_back(to_bits(in.dtype, is_state ? state(rng) : other(rng)));
      for (uint16_t x : h) g.tensors[in.name].push_back(widen(in.dtype, x));
      continue;
    }
    if (!in.quant_map.empty()) {  // an 8-bit state: any code (decoded after the absmaxes)
      std::uniform_int_distribution<int> code(0, 255);
      for (int64_t k = 0; k < n; ++k) c.bytes[in.name].push_back(static_cast<uint8_t>(code(rng)));
      continue;
    }
    if (in.dtype == registry::DType::f8e4m3 || in.dtype == registry::DType::f8e5m2) {
      auto& b = c.bytes[in.name];  // the draws rounded to the nearest FP8 value
      for (int64_t k = 0; k < n; ++k) b.push_back(registry::fp8_from_float(other(rng), in.dtype));
      for (uint8_t x : b) g.tensors[in.name].push_back(registry::fp8_to_float(x, in.dtype));
      continue;
    }
    auto& v = c.f32[in.name];
    for (int64_t k = 0; k < n; ++k) v.push_back(is_state ? state(rng) : other(rng));
    g.tensors[in.name].assign(v.begin(), v.end());
  }
  // The golden's 8-bit states: each code's map value times its block's absmax.
  for (const auto& in : d.inputs) {
    if (in.quant_map.empty()) continue;
    const std::array<float, 256> map = quant_table(in.quant_map);
    const std::vector<float>& absmax = c.f32.at(in.name + "_absmax");
    auto& v = g.tensors[in.name];
    for (size_t k = 0; k < c.bytes.at(in.name).size(); ++k)
      v.push_back(double(map[c.bytes.at(in.name)[k]]) * absmax[k / d.shape.block]);
  }
  for (auto& [name, v] : c.f32)
    c.tensors.push_back({name, v.data(), registry::DType::f32, c.shapes[name]});
  for (auto& [name, v] : c.half)
    c.tensors.push_back({name, v.data(), dtypes.at(name), c.shapes[name]});
  for (auto& [name, v] : c.bytes)
    c.tensors.push_back({name, v.data(), dtypes.at(name), c.shapes[name]});
  c.scalars.insert(g.scalars.begin(), g.scalars.end());
}

// Every output against the golden (builder::compare_with_golden). A narrow output (the model copy,
// bf16 states) is the golden's fp64 value rounded once more: its tolerance adds half an ulp of its
// dtype (at most 2^-8 bf16, 2^-11 f16, relative) and f16's smallest subnormal. test_kernels checks
// the copy bit-exactly against the kernel's own master.
nlohmann::json compare(const registry::Descriptor& d, const CheckData& c) {
  nlohmann::json states = nlohmann::json::object();
  for (const auto& out : d.outputs) {
    const registry::Input* in = d.find_input(out.aliases);
    if (in && (in->role == registry::Input::Role::block_scale || !in->quant_map.empty())) {
      states[out.name] = compare_quantized(d, *in, c);
      continue;
    }
    std::vector<float> widened;
    double rtol = d.tolerance.rtol, atol = d.tolerance.atol;
    if (narrow(out.dtype)) {
      for (uint16_t x : c.half.at(out.aliases)) widened.push_back(widen(out.dtype, x));
      rtol += out.dtype == registry::DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
      atol += std::ldexp(1.0, -24);
    }
    const std::vector<float>& k = narrow(out.dtype) ? widened : c.f32.at(out.aliases);
    const auto f32 = c.fp32_golden.find(out.aliases);
    const builder::GoldenErrors e = builder::compare_with_golden(
        k, c.golden.tensors.at(out.aliases), rtol, atol,
        f32 == c.fp32_golden.end() ? std::vector<double>{} : f32->second, d.tolerance.conditioning);
    states[out.name] = errors_json(e);
  }
  return states;
}

void print_report(const registry::Descriptor& d, const nlohmann::json& report) {
  std::printf("%s vs fp64 golden (tolerance |err| <= %g + %g*|golden|", d.variant.c_str(),
              d.tolerance.atol, d.tolerance.rtol);
  if (d.tolerance.conditioning > 0)
    std::printf(" + %g*|fp32 evaluation - golden|", d.tolerance.conditioning);
  std::printf(")\n");
  std::string scalars;  // as --scalar options, to repeat a random draw
  for (const auto& [name, v] : report["scalars"].items()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s=%.9g", name.c_str(), v.get<double>());
    scalars += buf;
  }
  if (!scalars.empty()) std::printf("  scalars:%s\n", scalars.c_str());
  std::printf("  %-28s %12s %12s %8s %10s\n", "state", "max abs", "max rel", "max ulp",
              "exceeding");
  for (const auto& [name, e] : report["states"].items()) {
    std::printf("  %-28s %12.3g %12.3g %8lld %10lld\n", name.c_str(),
                e["max_abs_error"].get<double>(), e["max_rel_error"].get<double>(),
                e["max_ulp"].get<long long>(), e["exceeding"].get<long long>());
  }
  std::printf("%s\n", report["ok"].get<bool>() ? "ok: within tolerance"
                                               : "FAILED: elements exceed the tolerance");
}

// `kernel` against the fp64 golden of its declaration: the report (op, variant, scalars,
// tolerance, per-state errors, ok). The golden of a declaration (op, attrs, storage) is computed
// once per `goldens` and reused for the other ISAs' variants (same seeded inputs).
nlohmann::json check_kernel(
    const Args& a, const std::vector<const dsl::OptimizerDecl*>& decls, Kernel& kernel,
    std::map<std::string, std::map<std::string, std::vector<double>>>& goldens) {
  const registry::Descriptor& d = kernel.descriptor();
  const dsl::OptimizerDecl& decl = in_storage_of(decls, d);
  CheckData c;
  make_inputs(a, d, c);
  std::string golden_key = d.op + "|" + storage_tag(d);
  for (const auto& [k, v] : d.attr_values()) golden_key += "|" + k + "=" + v;
  kernel.call(c.tensors, c.scalars);
  if (auto it = goldens.find(golden_key); it != goldens.end()) {
    c.golden.tensors = it->second;
    if (auto f = goldens.find(golden_key + "#fp32"); f != goldens.end()) c.fp32_golden = f->second;
  } else {
    // 8-bit states: the golden is the declaration without the quantization, in fp64, from the
    // decoded states; compare() judges the new codes and absmaxes against it.
    std::unique_ptr<dsl::OptimizerDecl> plain;
    const dsl::OptimizerDecl* golden_decl = &decl;
    if (decl.storage().quant) {
      dsl::Storage st = decl.storage();
      st.quant.reset();
      golden_decl = nullptr;
      for (const auto* x : decls) {
        if (x->storage().tag() == st.tag()) golden_decl = x;
      }
      if (!golden_decl) {
        plain = std::make_unique<dsl::OptimizerDecl>(decls.front()->with_storage(st));
        golden_decl = plain.get();
      }
    }
    const dsl::ResolvedOp resolved = dsl::resolve(*golden_decl, d.attr_values());
    builder::GoldenData fp32 = c.golden;  // the inputs, before the fp64 run updates them
    builder::run_golden(resolved, c.golden);
    goldens[golden_key] = c.golden.tensors;
    // fp32 storage only: a narrow state's tolerance already adds half its dtype's ulp, far
    // above any fp32 conditioning term (and the fp32 evaluation would round it to bf16).
    if (d.tolerance.conditioning > 0 && storage_tag(d) == "f32") {
      builder::run_golden(resolved, fp32, /*fp32=*/true);
      c.fp32_golden = fp32.tensors;
      goldens[golden_key + "#fp32"] = fp32.tensors;
    }
  }
  nlohmann::json report = {{"op", d.op},
                           {"variant", d.variant},
                           {"scalars", c.golden.scalars},
                           {"rtol", d.tolerance.rtol},
                           {"atol", d.tolerance.atol},
                           {"conditioning", d.tolerance.conditioning},
                           {"states", compare(d, c)}};
  bool ok = true;
  for (const auto& [name, e] : report["states"].items()) ok = ok && e["exceeding"] == 0;
  report["ok"] = ok;
  return report;
}

// Why `opforge check --all` does not check a variant of this op, or "" when it does.
std::string not_checked(const registry::Descriptor& d) {
  if (d.kind == "nn") return "NN op: no fp64 golden in check yet (tests/generators/test_nn_*.cpp)";
  if (d.kind == "bandwidth") return "bandwidth kernel: a measuring stick, no formula";
  if (!d.shape.segments.empty()) return "multi-tensor op: no segment table in check yet";
  return "";
}

// opforge check --all: every variant the host runs (or --isa's), one line each, a summary;
// exit 1 when any fails.
int check_all(const Args& a) {
  if (!a.positional.empty()) throw UsageError("--all checks every op: name no OP");
  if (a.has("variant") || a.has("attr"))
    throw UsageError("--all checks every variant: drop --variant/--attr");
  auto reg = Registry::open(registry_dir(a));
  const std::string isa = a.get("isa", "");
  std::map<std::string, std::vector<std::string>> by_op;  // op -> variants to check
  for (const auto& e : reg->index().variants) {
    if (!isa.empty() && e.isa != isa) continue;
    by_op[e.op].push_back(e.variant);
  }
  if (by_op.empty()) throw UsageError("no variants" + (isa.empty() ? "" : " for --isa " + isa));
  nlohmann::json rows = nlohmann::json::array();
  int passed = 0, failed = 0, skipped = 0;
  auto row = [&](const std::string& status, const std::string& variant, const std::string& what) {
    rows.push_back({{"status", status}, {"variant", variant}, {"detail", what}});
    if (!a.has("json"))
      std::printf("%-7s %-90s %s\n", status.c_str(), variant.c_str(), what.c_str());
    std::fflush(stdout);
  };
  for (const auto& [op, variants] : by_op) {
    std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
    std::vector<const dsl::OptimizerDecl*> decls;
    std::map<std::string, std::map<std::string, std::vector<double>>> goldens;
    for (const auto& id : variants) {
      const registry::Descriptor d = reg->descriptor(id);
      std::string why = not_checked(d);
      bool runs = true;
      for (const auto& f : d.target.cpu_features) runs = runs && cpu_supports(f);
      if (why.empty() && !runs) why = "this CPU lacks " + d.target.isa;
      if (!why.empty()) {
        ++skipped;
        row("skipped", id, why);
        continue;
      }
      try {
        if (decls.empty()) decls = declarations_of(op, rule_files(a, *reg, op), keep, reg->ops());
        const nlohmann::json r = check_kernel(a, decls, reg->load(id), goldens);
        int64_t worst_ulp = 0;
        std::string bad;
        for (const auto& [name, e] : r["states"].items()) {
          worst_ulp = std::max<int64_t>(worst_ulp, e["max_ulp"].get<int64_t>());
          if (e["exceeding"] != 0)
            bad += " " + name + ": " + std::to_string(e["exceeding"].get<int64_t>()) + " elements";
        }
        if (r["ok"].get<bool>()) {
          ++passed;
          row("ok", id, "max " + std::to_string(worst_ulp) + " ulp");
        } else {
          ++failed;
          row("FAILED", id, "past the tolerance:" + bad);
        }
      } catch (const std::exception& e) {
        ++failed;
        row("FAILED", id, e.what());
      }
    }
  }
  if (a.has("json")) {
    std::cout << nlohmann::json{{"passed", passed},
                                {"failed", failed},
                                {"skipped", skipped},
                                {"variants", rows}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("%d variants: %d passed, %d failed, %d skipped\n", passed + failed + skipped,
                passed, failed, skipped);
  }
  return failed ? 1 : 0;
}

}  // namespace

int cmd_check(const Args& a) {
  if (a.has("all")) return check_all(a);
  if (a.positional.empty()) throw UsageError("name an OP, or --all");
  const std::string op = a.positional.at(0);
  std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
  build_rule_op_if_missing(a, op);
  auto reg = Registry::open(registry_dir(a));
  const auto decls = declarations_of(op, rule_files(a, *reg, op), keep, reg->ops());
  Kernel& kernel = op_kernel(*reg, a, op);
  std::map<std::string, std::map<std::string, std::vector<double>>> goldens;
  nlohmann::json report = check_kernel(a, decls, kernel, goldens);
  report["op"] = op;
  if (a.has("json")) {
    std::cout << report.dump(2) << "\n";
  } else {
    print_report(kernel.descriptor(), report);
  }
  return report["ok"].get<bool>() ? 0 : 1;
}

Command check_command() {
  return {{"check",
           "OP",
           "Compare a registered kernel with the fp64 golden of its declaration on random data",
           {registry_option(),
            attr_option(),
            isa_option(),
            variant_option(),
            {"n", "N", "elements per tensor (default 1e5)"},
            {"rows", "R", "sparse ops: rows of the states (default 1000)"},
            {"cols", "C", "sparse ops: columns (default 17)"},
            {"indices", "K", "sparse ops: indexed rows (default 500)"},
            {"seed", "S", "random seed (default 1)"},
            {"all", "",
             "check every variant of every op the CPU runs (with --isa: that ISA's), one line "
             "each and a summary; exit 1 when any fails (NN, bandwidth and multi-tensor ops "
             "are listed as skipped)",
             false, true},
            {"scalar", "NAME=VALUE",
             "a scalar (default: its typical value, declared with the op, else the rule's "
             "default)",
             true},
            {"scalars", "typical|random",
             "scalars not given: their typical values (default), or random draws inside each "
             "scalar's domain near its typical value (seeded by --seed; the report lists them)"},
            rules_option(),
            cache_option(),
            json_option()}},
          cmd_check};
}

}  // namespace opforge::cli
