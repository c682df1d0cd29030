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
#include "opforge/suggest.hpp"
#include "registry/builder/golden.h"
#include "registry/builder/registry_builder.h"
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

// Seeded data for every argument of `d`: states in [0.1, 1) (accumulators stay positive),
// other tensors in [-1, 1), narrow tensors (FP8 gradients too) the same draws rounded to
// nearest even, 8-bit states any code with absmaxes in [0.1, 1); scalars from --scalar, else
// the rule's default, else 0.1 (1 for integer scalars), fp32 ones rounded to fp32 for the
// golden too.
void make_inputs(const Args& a, const registry::Descriptor& d, const dsl::OptimizerDecl& decl,
                 CheckData& c) {
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
  std::map<std::string, double> defaults;
  for (const auto& arg : decl.args()) {
    if (arg.default_value) defaults[arg.name] = *arg.default_value;
  }
  std::map<std::string, registry::DType> dtypes;
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::scalar) {
      const bool integer = in.dtype == registry::DType::i64 || in.dtype == registry::DType::i32;
      const double v = given.count(in.name)      ? given.at(in.name)
                       : defaults.count(in.name) ? defaults.at(in.name)
                       : integer                 ? 1.0
                                                 : 0.1;
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
    const builder::GoldenErrors e =
        builder::compare_with_golden(k, c.golden.tensors.at(out.aliases), rtol, atol);
    states[out.name] = errors_json(e);
  }
  return states;
}

void print_report(const registry::Descriptor& d, const nlohmann::json& report) {
  std::printf("%s vs fp64 golden (tolerance |err| <= %g + %g*|golden|)\n", d.variant.c_str(),
              d.tolerance.atol, d.tolerance.rtol);
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

}  // namespace

int cmd_check(const Args& a) {
  const std::string op = a.positional.at(0);
  std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
  build_rule_op_if_missing(a, op);
  auto reg = Registry::open(registry_dir(a));
  const auto decls = declarations_of(op, rule_files(a, *reg, op), keep, reg->ops());
  Kernel& kernel = op_kernel(*reg, a, op);
  const registry::Descriptor& d = kernel.descriptor();
  const dsl::OptimizerDecl& decl = in_storage_of(decls, d);
  CheckData c;
  make_inputs(a, d, decl, c);
  kernel.call(c.tensors, c.scalars);
  // 8-bit states: the golden is the declaration without the quantization, in fp64, from the
  // decoded states; compare() judges the new codes and absmaxes against it.
  std::unique_ptr<dsl::OptimizerDecl> plain;
  const dsl::OptimizerDecl* golden_decl = &decl;
  if (decl.storage().quant) {
    dsl::Storage s = decl.storage();
    s.quant.reset();
    golden_decl = nullptr;
    for (const auto* x : decls) {
      if (x->storage().tag() == s.tag()) golden_decl = x;
    }
    if (!golden_decl) {
      plain = std::make_unique<dsl::OptimizerDecl>(decls.front()->with_storage(s));
      golden_decl = plain.get();
    }
  }
  builder::run_golden(dsl::resolve(*golden_decl, d.attr_values()), c.golden);
  nlohmann::json report = {{"op", op},
                           {"variant", d.variant},
                           {"rtol", d.tolerance.rtol},
                           {"atol", d.tolerance.atol},
                           {"states", compare(d, c)}};
  bool ok = true;
  for (const auto& [name, e] : report["states"].items()) ok = ok && e["exceeding"] == 0;
  report["ok"] = ok;
  if (a.has("json")) {
    std::cout << report.dump(2) << "\n";
  } else {
    print_report(d, report);
  }
  return ok ? 0 : 1;
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
            {"scalar", "NAME=VALUE", "a scalar (default: the rule's, else 0.1; integers 1)", true},
            rules_option(),
            cache_option(),
            json_option()}},
          cmd_check};
}

}  // namespace opforge::cli
