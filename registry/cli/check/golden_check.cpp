#include "registry/cli/check/golden_check.h"

#include <Halide.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "dsl/quant8.h"
#include "opforge/suggest.hpp"
#include "registry/builder/nn_golden/nn_reference.h"
#include "registry/builder/registry_builder.h"
#include "registry/cli/commands.h"

namespace opforge::cli::check {

namespace fs = std::filesystem;

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
                       "' is an NN op: its golden is its fp64 reference (check_nn.h), not a "
                       "declaration");
    decls.push_back(opt);
  }
  if (decls.empty()) throw UsageError("unknown op '" + op + "'" + did_you_mean(op, names));
  return decls;
}

std::vector<std::string> rule_files(const Args& a, const registry::Descriptor& d) {
  std::vector<std::string> rules = a.all("rules");
  if (!rules.empty()) return rules;
  const std::string prefix = "rule file ";
  std::error_code ec;
  if (d.reference.rfind(prefix, 0) == 0 && fs::exists(d.reference.substr(prefix.size()), ec))
    rules.push_back(d.reference.substr(prefix.size()));
  return rules;
}

std::vector<std::string> rule_files(const Args& a, Registry& reg, const std::string& op) {
  try {
    return rule_files(a, reg.variants(op).front());
  } catch (const Error&) {
    return a.all("rules");  // not a registered op: declarations_of says so
  }
}

namespace {

// The one in the kernel's storage: the golden evaluates it in fp64 from the same (rounded)
// narrow inputs.
const dsl::OptimizerDecl& in_storage_of(const std::vector<const dsl::OptimizerDecl*>& decls,
                                        const registry::Descriptor& d) {
  for (const auto* x : decls) {
    if (x->storage().tag() == storage_tag(d)) return *x;
  }
  return *decls.front();
}

}  // namespace

// The 256 values of a descriptor's quant_map ("dynamic_signed", ...), as the kernels decode.
std::array<float, 256> quant_table(const std::string& name) {
  const bool dynamic = name.rfind("dynamic", 0) == 0;
  const bool is_signed = name.find("unsigned") == std::string::npos;
  return dsl::StateQuant{dynamic ? dsl::QuantMap::dynamic : dsl::QuantMap::linear, is_signed}
      .table();
}

std::vector<double> decoded_states(const std::string& quant_map, const std::vector<uint8_t>& codes,
                                   const std::vector<float>& absmax, int64_t block) {
  const std::array<float, 256> map = quant_table(quant_map);
  std::vector<double> v;
  v.reserve(codes.size());
  for (size_t k = 0; k < codes.size(); ++k)
    v.push_back(double(map[codes[k]]) * absmax.at(k / block));
  return v;
}

// One output's row of the report.
nlohmann::json errors_json(const builder::GoldenErrors& e) {
  return {{"max_abs_error", e.max_abs},
          {"max_rel_error", e.max_rel},
          {"max_ulp", e.max_ulp},
          {"exceeding", e.exceeding},
          {"elements", e.elements}};
}

namespace {

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

// Every output against the golden (builder::compare_with_golden). A narrow output (the model copy,
// bf16 states) is the golden's fp64 value rounded once more: its tolerance adds half an ulp of its
// dtype (at most 2^-8 bf16, 2^-11 f16, relative) and f16's smallest subnormal. test_kernels checks
// the copy bit-exactly against the kernel's own master.
nlohmann::json compare(const registry::Descriptor& d, const CheckData& c) {
  nlohmann::json states = nlohmann::json::object();
  const bool quantized = d.shape.block > 0;  // 8-bit states
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
    const auto spread = c.fp32_spread.find(out.aliases);
    const builder::GoldenErrors e = builder::compare_with_golden(
        k, c.golden.tensors.at(out.aliases), rtol, atol,
        spread == c.fp32_spread.end() || (narrow(out.dtype) && !quantized) ? std::vector<double>{}
                                                                           : spread->second,
        d.tolerance.conditioning);
    states[out.name] = errors_json(e);
  }
  return states;
}

}  // namespace

void print_errors_table(const char* what, const nlohmann::json& states) {
  std::printf("  %-28s %12s %12s %8s %10s\n", what, "max abs", "max rel", "max ulp", "exceeding");
  for (const auto& [name, e] : states.items()) {
    std::printf("  %-28s %12.3g %12.3g %8lld %10lld\n", name.c_str(),
                e["max_abs_error"].get<double>(), e["max_rel_error"].get<double>(),
                e["max_ulp"].get<long long>(), e["exceeding"].get<long long>());
  }
}

void print_report(const registry::Descriptor& d, const nlohmann::json& report) {
  std::printf("%s vs fp64 golden (tolerance |err| <= %g + %g*|golden|", d.variant.c_str(),
              d.tolerance.atol, d.tolerance.rtol);
  if (d.tolerance.conditioning > 0)
    std::printf(" + %g*(|fp32 evaluation - golden| + its one-ulp input sensitivity)",
                d.tolerance.conditioning);
  std::printf(")\n");
  if (report.contains("set"))
    std::printf("  preview with %s (not the registered schedule)\n",
                report["set"].get<std::string>().c_str());
  std::string scalars;  // as --scalar options, to repeat a random draw
  for (const auto& [name, v] : report["scalars"].items()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s=%.9g", name.c_str(), v.get<double>());
    scalars += buf;
  }
  if (!scalars.empty()) std::printf("  scalars:%s\n", scalars.c_str());
  print_errors_table("state", report["states"]);
  std::printf("%s\n", report["ok"].get<bool>() ? "ok: within tolerance"
                                               : "FAILED: elements exceed the tolerance");
}

nlohmann::json judge(const std::vector<const dsl::OptimizerDecl*>& decls,
                     const registry::Descriptor& d, CheckData& c, Goldens* goldens) {
  const dsl::OptimizerDecl& decl = in_storage_of(decls, d);
  std::string golden_key = d.op + "|" + storage_tag(d);
  for (const auto& [k, v] : d.attr_values()) golden_key += "|" + k + "=" + v;
  if (auto it = goldens ? goldens->find(golden_key) : Goldens::iterator();
      goldens && it != goldens->end()) {
    c.golden.tensors = it->second;
    if (auto f = goldens->find(golden_key + "#fp32"); f != goldens->end())
      c.fp32_spread = f->second;
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
    if (goldens) (*goldens)[golden_key] = c.golden.tensors;
    // Every storage: compare() applies the spread to the fp32 outputs (the parameter of
    // master-weights, narrow-state and FP8-gradient variants too: AdamW with bf16 master
    // weights at step 4.1, beta2 0.85, `--scalars random --seed 4`, had var 3.4e-7 off at 14
    // of 100000 elements where it cancels to near 0, as its fp32 evaluation does), and to
    // 8-bit-state variants' narrow model copy, as before; other narrow outputs' tolerance
    // already adds half their dtype's ulp, and 8-bit states are judged per block.
    if (d.tolerance.conditioning > 0) {
      builder::Sensitivity sensitivity;
      builder::run_golden(resolved, fp32, /*fp32=*/true, &sensitivity);
      for (const auto& out : d.outputs) {
        const auto values = fp32.tensors.find(out.aliases);
        if (values == fp32.tensors.end()) continue;  // 8-bit codes and absmaxes
        const auto s = sensitivity.find(out.aliases);
        c.fp32_spread[out.aliases] =
            builder::fp32_spread(c.golden.tensors.at(out.aliases), values->second,
                                 s == sensitivity.end() ? std::vector<double>{} : s->second);
      }
      if (goldens) (*goldens)[golden_key + "#fp32"] = c.fp32_spread;
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
  // The NN bandwidth kernels (copy, add) have references; the others only measure.
  if (d.kind == "bandwidth" && !(d.shape.named_dims && nn_golden::find_nn_reference(d.op)))
    return "bandwidth kernel: a measuring stick, no formula";
  return "";
}

}  // namespace opforge::cli::check
