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
#include "registry/cli/check/check_nn.h"
#include "registry/cli/check/golden_check.h"
#include "registry/cli/check/replay.h"
#include "registry/cli/commands.h"
#include "registry/cli/inspected_kernel.h"
#include "registry/cli/preview_kernel.h"
#include "registry/cli/user_rules.h"

namespace opforge::cli {

namespace fs = std::filesystem;

namespace {

using namespace check;  // golden_check.h: declarations, call data, golden, comparison

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

// Multi-tensor ops: the chunk size of the models check lays out (a multiple of 16).
constexpr int64_t kChunk = 256;

// The chunk table of a model of n elements in kChunk-element chunks: tensors of 1 to 3
// chunks each, in order (so some tensors share nothing, and norms differ per tensor).
std::vector<int32_t> random_segments(int64_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> chunks(1, 3);
  std::vector<int32_t> table;
  for (int32_t t = 0; static_cast<int64_t>(table.size()) < n / kChunk; ++t) {
    for (int k = chunks(rng); k > 0 && static_cast<int64_t>(table.size()) < n / kChunk; --k)
      table.push_back(t);
  }
  return table;
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
  // Multi-tensor: whole chunks of kChunk elements (the flat buffers of a model laid out with
  // that alignment).
  if (!d.shape.segments.empty()) g.n = (g.n + kChunk - 1) / kChunk * kChunk;
  g.rows = a.get_int("rows", 1000);
  g.cols = a.get_int("cols", 17);
  g.count = a.get_int("indices", 500);
  if (g.n < 1 || g.rows < 1 || g.cols < 1 || g.count < 0) {
    throw UsageError("--n, --rows, --cols must be positive");
  }
  const std::map<std::string, double> given = scalar_options(a);
  check_scalar_names(d, given);
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
    if (in.name == d.shape.segments) {  // multi-tensor: a random model's chunk table
      c.segments = random_segments(g.n, rng);
      g.segments = c.segments;
      c.shapes[in.name] = {static_cast<int64_t>(c.segments.size())};
      c.tensors.push_back({in.name, c.segments.data(), in.dtype, c.shapes[in.name]});
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
    g.tensors[in.name] = decoded_states(in.quant_map, c.bytes.at(in.name),
                                        c.f32.at(in.name + "_absmax"), d.shape.block);
  }
  for (auto& [name, v] : c.f32)
    c.tensors.push_back({name, v.data(), registry::DType::f32, c.shapes[name]});
  for (auto& [name, v] : c.half)
    c.tensors.push_back({name, v.data(), dtypes.at(name), c.shapes[name]});
  for (auto& [name, v] : c.bytes)
    c.tensors.push_back({name, v.data(), dtypes.at(name), c.shapes[name]});
  c.scalars.insert(g.scalars.begin(), g.scalars.end());
}

// `kernel` against the fp64 golden of its declaration: the report (op, variant, scalars,
// tolerance, per-state errors, ok). The golden of a declaration (op, attrs, storage) is computed
// once per `goldens` and reused for the other ISAs' variants (same seeded inputs).
nlohmann::json check_kernel(const Args& a, const std::vector<const dsl::OptimizerDecl*>& decls,
                            Kernel& kernel, Goldens& goldens) {
  CheckData c;
  make_inputs(a, kernel.descriptor(), c);
  kernel.call(c.tensors, c.scalars);
  return judge(decls, kernel.descriptor(), c, &goldens);
}

// An NN variant against its reference: --random-shapes (default `random_shapes`), --seed,
// --example.
nlohmann::json nn_report(const Args& a, Kernel& k, int random_shapes) {
  return check_nn(k, a.has("example"),
                  static_cast<int>(a.get_int("random-shapes", random_shapes, 0, 1000)),
                  static_cast<unsigned>(a.get_int("seed", 1)));
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
  // --set: each variant's preview under those params instead (a variant whose schedule has
  // none of them is skipped, with the reason).
  const std::map<std::string, int64_t> set = set_options(a);
  nlohmann::json rows = nlohmann::json::array();
  int passed = 0, failed = 0, skipped = 0;
  auto row = [&](const std::string& status, const std::string& variant, const std::string& what) {
    ++(status == "ok" ? passed : status == "skipped" ? skipped : failed);
    rows.push_back({{"status", status}, {"variant", variant}, {"detail", what}});
    if (!a.has("json"))
      std::printf("%-7s %-90s %s\n", status.c_str(), variant.c_str(), what.c_str());
    std::fflush(stdout);
  };
  for (const auto& [op, variants] : by_op) {
    std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
    std::vector<const dsl::OptimizerDecl*> decls;
    Goldens goldens;
    for (const auto& id : variants) {
      const registry::Descriptor d = reg->descriptor(id);
      std::string why = not_checked(d);
      bool runs = true;
      for (const auto& f : d.target.cpu_features) runs = runs && cpu_supports(f);
      if (why.empty() && !runs) why = "this CPU lacks " + d.target.isa;
      if (!why.empty()) {
        row("skipped", id, why);
        continue;
      }
      Kernel* kernel = nullptr;
      try {
        kernel = set.empty() ? &reg->load(id)
                             : load_preview(*reg, d, set, cache_dir(a), rule_files(a, d)).kernel;
      } catch (const std::invalid_argument& e) {  // the schedule has no such param
        row("skipped", id, e.what());
        continue;
      } catch (const std::exception& e) {
        row("FAILED", id, e.what());
        continue;
      }
      try {
        if (d.shape.named_dims) {  // NN ops (and the NN bandwidth kernels): their references
          const nlohmann::json r = nn_report(a, *kernel, 0);
          char what[160];
          std::snprintf(what, sizeof what, "%d problems, worst %.3gx of the bound",
                        r["ran"].get<int>(), r["worst"].get<double>());
          if (r["ran"] == 0) {
            row("skipped", id, "NN op: no reference problem applies to this variant");
          } else {
            row(r["ok"].get<bool>() ? "ok" : "FAILED", id,
                r["ok"].get<bool>() ? what : what + (" at " + r["worst_at"].get<std::string>()));
          }
          continue;
        }
        if (decls.empty()) decls = declarations_of(op, rule_files(a, *reg, op), keep, reg->ops());
        const nlohmann::json r = check_kernel(a, decls, *kernel, goldens);
        int64_t worst_ulp = 0;
        std::string bad;
        for (const auto& [name, e] : r["states"].items()) {
          worst_ulp = std::max<int64_t>(worst_ulp, e["max_ulp"].get<int64_t>());
          if (e["exceeding"] != 0)
            bad += " " + name + ": " + std::to_string(e["exceeding"].get<int64_t>()) + " elements";
        }
        if (r["ok"].get<bool>()) {
          row("ok", id, "max " + std::to_string(worst_ulp) + " ulp");
        } else {
          row("FAILED", id, "past the tolerance:" + bad);
        }
      } catch (const std::exception& e) {
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
  if (a.has("replay")) return check::replay(a);
  if (a.has("all")) return check_all(a);
  if (a.positional.empty()) throw UsageError("name an OP, or --all");
  const std::string op = a.positional.at(0);
  std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
  build_rule_op_if_missing(a, op);
  auto reg = Registry::open(registry_dir(a));
  bool nn = false;
  try {
    nn = reg->variants(op).front().kind == "nn";
  } catch (const Error&) {
    // not registered: declarations_of names the nearest op
  }
  // --set: the variant's preview under those schedule params (compile cache only).
  const std::map<std::string, int64_t> set = set_options(a);
  auto chosen = [&]() -> Kernel& {
    Kernel& k = op_kernel(*reg, a, op);
    if (set.empty()) return k;
    return *load_preview(*reg, k.descriptor(), set, cache_dir(a), rule_files(a, k.descriptor()))
                .kernel;
  };
  if (nn) {
    nlohmann::json report = nn_report(a, chosen(), 4);
    if (!set.empty()) report["set"] = set_text(set);
    if (a.has("json")) {
      std::cout << report.dump(2) << "\n";
    } else {
      print_nn_report(report);
    }
    return report["ok"].get<bool>() ? 0 : 1;
  }
  const auto decls = declarations_of(op, rule_files(a, *reg, op), keep, reg->ops());
  Kernel& kernel = chosen();
  Goldens goldens;
  nlohmann::json report = check_kernel(a, decls, kernel, goldens);
  report["op"] = op;
  if (!set.empty()) report["set"] = set_text(set);
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
             "each and a summary; exit 1 when any fails (NN ops on their reference problems; "
             "bandwidth kernels are listed as skipped)",
             false, true},
            {"random-shapes", "K",
             "NN ops: also K seeded redraws of the reference problems' dims that the op's checks "
             "accept (default 4; with --all 0)"},
            {"example", "",
             "NN ops: also the op's example call (the shapes bench times; fp64 references of "
             "large examples take seconds)"},
            {"replay", "DIR",
             "re-run every call a precision dump holds (opforge run --dump, Python dump_dir=, "
             "$OPFORGE_DUMP_DIR) through its fp64 golden: per call and output the max "
             "abs/rel/ulp error, the first call past its bound; exit 1 when any is",
             false, true},
            {"set", "NAME=VALUE",
             "check a preview of the variant with this schedule param changed (e.g. "
             "double_buffer=1; compile cache only, the registry untouched); with --all, every "
             "variant whose schedule has the params (the others are listed as skipped)",
             true},
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
