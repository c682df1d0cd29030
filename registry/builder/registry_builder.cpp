#include "registry/builder/registry_builder.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "dsl/fingerprint.h"
#include "dsl/rules/rule_decl.h"
#include "dsl/rules/rule_parser.h"
#include "generators/auto_schedules.h"
#include "registry/builder/autoscheduler.h"
#include "registry/builder/halide_identity.h"
#include "registry/builder/kernel_compiler.h"
#include "registry/builder/workers.h"
#include "registry/cache/atomic_file.h"
#include "registry/cache/cache_config.h"
#include "registry/cache/cache_key.h"
#include "registry/format/bounded_read.h"
#include "registry/format/file_lock.h"

namespace opforge::builder {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Why a variant missed: which key parts differ from its last build.
std::string explain_miss(const cache::CompileCache& cache, const std::string& id,
                         const cache::KeyBuilder& key, const std::string& why_lookup) {
  auto last = cache.last_variant(id);
  if (!last) return "new variant (no earlier build in this cache)";
  if (last->first == key.hex_digest()) return "same key, entry " + why_lookup;
  std::map<std::string, std::string> old(last->second.begin(), last->second.end());
  std::string out;
  for (const auto& [name, value] : key.parts()) {
    auto it = old.find(name);
    if (it != old.end() && it->second == value) continue;
    out += out.empty() ? "" : "; ";
    if (it == old.end()) {
      out += name + " is new";
    } else if (value.size() <= 96 && it->second.size() <= 96) {
      out += name + " changed: " + it->second + " -> " + value;
    } else {
      out += name + " changed";
    }
  }
  return out.empty() ? "key parts renamed" : out;
}

// The most elements one kernel call takes. The kernels index with 32 bits, and their
// schedules evaluate int32 expressions a little past N: the parallel split's (N + 127) / 128
// overflows from N = 2^31 - 127, where a call of apply_gradient_descent returned 0 and
// updated nothing (measured; 2^31 - 128 was right). 2^30 keeps every such expression (at
// most about 2 N) in range; the runtime updates larger tensors of splittable ops in slices.
constexpr int64_t kMaxElementsPerCall = int64_t(1) << 30;

// Whether any Func of the pipeline has an update definition: a dense op's only updates are
// its whole-tensor reductions (norm2/sum), so this catches one whose terms read no tensor.
bool has_reduction(const Halide::Pipeline& p) {
  if (!p.defined()) return false;
  for (const Halide::Func& out : p.outputs()) {
    for (const auto& [name, f] : Halide::Internal::find_transitive_calls(out.function())) {
      if (f.has_update_definition()) return true;
    }
  }
  return false;
}

}  // namespace

namespace {

// A kernel's target: the ISA's pinned target, without a runtime (one shared runtime per process).
Halide::Target kernel_target(const generators::Isa& isa) {
  return Halide::Target(isa.halide_target).with_feature(Halide::Target::NoRuntime);
}

// What every descriptor takes from its declaration and planned variant alike: identity, texts,
// arguments, attrs, kernel, target, schedule, tolerance, yardstick and key.
registry::Descriptor common_descriptor(const PlannedVariant& v, const std::string& halide_version) {
  const dsl::OpDecl& d = *v.op.decl;
  registry::Descriptor r;
  r.op = d.name();
  r.op_version = d.version();
  r.variant = v.id;
  r.summary = d.summary();
  r.formula = d.formula();
  r.reference = d.reference();
  r.kind = d.kind();
  r.inputs = v.pipeline.inputs;
  r.outputs = v.pipeline.outputs;
  r.attrs = v.pipeline.attrs;
  r.kernel.file = "kernels/" + v.id + ".so";
  r.kernel.entry = v.id;
  r.kernel.args = v.pipeline.kernel_args;
  r.target = {v.isa.name, v.target.to_string(), v.isa.cpu_features, v.isa.priority};
  r.schedule.recipe = v.pipeline.schedule_recipe;
  for (const auto& [k, val] : v.pipeline.schedule_params)
    r.schedule.params[k] = std::to_string(val);
  r.schedule.summary = v.pipeline.schedule_summary;
  r.schedule.tuning_machine = v.tuning_machine;
  r.schedule.tuning_family = v.tuning_family;
  r.tolerance = v.op.tolerance();
  r.bandwidth_op = generators::bandwidth_op_name(v.op);
  r.cache_key = v.key.hex_digest();
  r.halide_version = halide_version;
  return r;
}

// An NN variant's descriptor: named dims, fresh outputs, shape checks, the algorithm and its
// condition, the cost expressions. Traffic per output element: what a kernel reading every
// input once and writing every output once moves, for the row-wise and elementwise ops whose
// inputs besides the first are per-row or smaller (gamma, beta); cost.bytes is exact.
registry::Descriptor make_nn_descriptor(const PlannedVariant& v,
                                        const std::string& halide_version) {
  const dsl::NnOpDecl& d = v.op.as_nn();
  const dsl::NnAlgorithm& algo = v.op.nn_algorithm();
  registry::Descriptor r = common_descriptor(v, halide_version);
  r.shape.elementwise = false;
  r.shape.named_dims = true;
  r.shape.max_elements = std::numeric_limits<int32_t>::max();
  for (const auto& c : d.checks()) r.shape.checks.push_back({c.condition, c.message});
  r.traffic = {0, 0};
  if (!r.inputs.empty() && !r.outputs.empty()) {
    r.traffic = {registry::dtype_bytes(r.inputs.front().dtype),
                 registry::dtype_bytes(r.outputs.front().dtype)};
  }
  r.algorithm = {algo.name, algo.applies_when, algo.priority, algo.description};
  // Element sizes (bytes_<tensor>) as numbers: the descriptor's expressions name dims and int
  // scalars only.
  r.cost = {d.cost_for_variant(d.cost().flops, v.op.attrs),
            d.cost_for_variant(d.cost().bytes, v.op.attrs), d.cost().example};
  return r;
}

}  // namespace

registry::Descriptor make_descriptor(const PlannedVariant& v, const std::string& halide_version) {
  if (v.op.nn()) return make_nn_descriptor(v, halide_version);
  const dsl::OptimizerDecl& d = v.op.as_optimizer();
  registry::Descriptor r = common_descriptor(v, halide_version);
  // check's allowance for the update's conditioning (registry::Tolerance::conditioning): 8x a
  // plain fp32 evaluation's distance from the fp64 one plus its one-ulp input sensitivity
  // (builder::fp32_spread). 8-bit states themselves are judged per block against the
  // quantization step, but their fp32 parameter needs it most: a decoded second moment near
  // zero makes the step several times the parameter, and with it the fp32 bias correction
  // 1 - beta2^t (a cancellation at early steps): AdamW bf16mq8s at t = 10 had var 1.8e-5 off
  // in 2 of 65536 elements, its fp32 evaluation alike.
  r.tolerance.conditioning = 8;
  // A rule's hyper defaults, for callers that name no value (from_rule, check), and each
  // scalar's typical value (check, bench, profile, report).
  for (auto& in : r.inputs) {
    for (const auto& a : d.args()) {
      if (a.name == in.name && in.role == registry::Input::Role::scalar) {
        in.default_value = a.default_value;
        in.typical = a.typical;
      }
    }
  }
  // Traffic in real bytes per element: every tensor read (the write-only model copy of the
  // master-weights mode is not), each reduction read once more, every output written.
  int read_bytes = 0, written_bytes = 0;
  r.shape.elementwise = !d.sparse();
  // A results-only op (global_norm) has no elementwise pass: its reduction reads are all.
  bool pass = false;
  for (const auto& in : r.inputs) pass = pass || in.role == registry::Input::Role::state;
  for (const auto& in : r.inputs) {
    // Results (one element per call) move no bytes per element; block scales 4 per block.
    if (in.role == registry::Input::Role::scalar || in.role == registry::Input::Role::result ||
        in.role == registry::Input::Role::block_scale)
      continue;
    if (d.is_multi_tensor() && in.name == dsl::kSegmentsArg) {  // one entry per chunk
      r.shape.segments = in.name;
      continue;
    }
    const bool write_only = d.storage().model && in.name == dsl::kModelArg;
    if (pass && !write_only && !(d.sparse() && in.name == "indices")) {
      read_bytes += registry::dtype_bytes(in.dtype);
    }
    if (!d.sparse() || in.role == registry::Input::Role::state) {
      r.shape.same_shape.push_back(in.name);
    } else if (in.role == registry::Input::Role::gradient) {
      r.shape.row_slices.push_back(in.name);
    } else if (in.name == "indices") {
      r.shape.indices = in.name;
    }
  }
  r.shape.max_elements = kMaxElementsPerCall;
  // Slices of the flattened tensors may be updated by separate calls when every output
  // element depends only on the same element of the inputs: dense, no whole-tensor reduction.
  // 8-bit states reduce within blocks only: slices that start on a block boundary are fine.
  const bool quantized = d.storage().quant.has_value();
  if (quantized) r.shape.block = d.storage().block;
  r.shape.splittable = !d.sparse() && v.pipeline.reduction_reads.empty() &&
                       (quantized || !has_reduction(v.pipeline.pipeline));
  // Flat buffers of many tensors in one call: no per-tensor reduction, or segmented ones (a
  // block of 8-bit states must not straddle two tensors: single tensors only, for now).
  r.shape.multi_tensor =
      !d.sparse() && !quantized && (d.is_multi_tensor() || !v.pipeline.per_tensor_reductions);
  // A reduction pass reads its tensors once more before the update.
  for (const auto& name : v.pipeline.reduction_reads) {
    for (const auto& in : r.inputs) {
      if (in.name == name) read_bytes += registry::dtype_bytes(in.dtype);
    }
  }
  for (const auto& o : r.outputs) {
    const registry::Input* in = r.find_input(o.aliases);
    if (!in || (in->role != registry::Input::Role::result &&
                in->role != registry::Input::Role::block_scale))
      written_bytes += registry::dtype_bytes(o.dtype);
  }
  r.traffic = {read_bytes, written_bytes};
  return r;
}

cache::KeyBuilder runtime_key(const HalideIdentity& hid) {
  return cache::runtime_key(kernel_artifact_list(), hid.version + " " + hid.sha256, kRuntimeTarget);
}

namespace {

// Writes `bytes` unless the file already holds exactly them.
void install(const std::string& path, const std::string& bytes, unsigned mode) {
  std::error_code ec;
  if (fs::exists(path, ec) && fs::file_size(path, ec) == bytes.size()) {
    try {
      if (cache::read_file(path) == bytes) return;
    } catch (const std::exception&) {
    }
  }
  cache::write_file_atomic(path, bytes, mode);
}

// Written into a registry directory before anything else: a directory holding it is opforge's
// own, so a build that finds it without index.json (killed, or out of disk, before the index
// was written) resumes there instead of refusing.
constexpr const char* kRegistryMarker = ".opforge-registry";
// A user registry's rule texts (Python's opforge.rule), named by content; builds leave it be.
constexpr const char* kRuleSourcesDir = "sources";

void check_registry_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(dir + ": not a directory");
  if (fs::exists(fs::path(dir) / "index.json", ec)) return;
  if (fs::exists(fs::path(dir) / kRegistryMarker, ec)) return;  // our own, half written
  // A user registry's first build finds the rule text it builds already in sources/.
  bool foreign = false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    foreign = foreign || e.path().filename() != kRuleSourcesDir || !e.is_directory(ec);
  }
  if (foreign) {
    throw std::runtime_error(dir + ": exists, is not empty and holds neither index.json nor " +
                             kRegistryMarker + "; refusing to write a registry over it");
  }
}

// Content-addressed file names ("kernels/<variant>-<16 hex>.so", "ops/<variant>-<16 hex>.json",
// the digest of the file's bytes): a build never overwrites a file an index names, so a reader
// of the previous index, or of the index a killed build left, finds every file it names.
std::string addressed(const std::string& sub, const std::string& variant, const std::string& bytes,
                      const std::string& ext) {
  return sub + "/" + variant + "-" + cache::sha256_hex(bytes).substr(0, 16) + ext;
}

// The entries a registry's own descriptors describe (those that parse, whose file is named
// for their variant and whose kernel file is there; of several for one variant, what a killed
// build left, the newest): the index of a registry whose index.json is missing or corrupt.
std::vector<registry::IndexEntry> entries_from_descriptors(const std::string& dir) {
  std::map<std::string, std::pair<fs::file_time_type, registry::IndexEntry>> newest;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(fs::path(dir) / "ops", ec)) {
    if (f.path().extension() != ".json") continue;
    try {
      const std::string text =
          registry::read_regular_file(f.path().string(), registry::kJsonLimits);
      const registry::Descriptor d = registry::descriptor_from_json(text, f.path().string());
      const std::string name = f.path().filename().string();
      // (or "<variant>.json": a registry from before content-addressed names)
      if (name != fs::path(addressed("ops", d.variant, text, ".json")).filename().string() &&
          name != d.variant + ".json")
        continue;
      if (!fs::is_regular_file(fs::path(dir) / d.kernel.file, ec)) continue;
      const fs::file_time_type t = fs::last_write_time(f.path(), ec);
      auto it = newest.find(d.variant);
      if (it != newest.end() && it->second.first >= t) continue;
      newest[d.variant] = {
          t,
          {d.variant, d.op, "ops/" + name, d.target.isa, d.attr_values(), cache::sha256_hex(text)}};
    } catch (const std::exception&) {
      // a damaged descriptor describes nothing; the build rewrites its ops' files
    }
  }
  std::vector<registry::IndexEntry> out;
  for (auto& [variant, e] : newest) out.push_back(std::move(e.second));  // sorted by variant
  return out;
}

// The variants of an existing registry that a partial build keeps: its index's, or, when
// index.json is missing or corrupt, what its descriptors describe.
std::vector<registry::IndexEntry> kept_entries(const std::string& dir,
                                               const std::set<std::string>& rebuilt_ops) {
  const std::string path = dir + "/index.json";
  std::error_code ec;
  std::vector<registry::IndexEntry> old;
  try {
    if (!fs::exists(path, ec)) throw std::runtime_error("no index");
    old = registry::index_from_json(registry::read_regular_file(path, registry::kJsonLimits), path)
              .variants;
  } catch (const std::exception&) {
    old = entries_from_descriptors(dir);
  }
  std::vector<registry::IndexEntry> out;
  for (const auto& e : old) {
    if (!rebuilt_ops.count(e.op) && fs::exists(fs::path(dir) / e.descriptor, ec)) {
      out.push_back(e);
    }
  }
  return out;
}

// Runs `fn` holding the registry's lock (registry::run_locked on <dir>/index.json, as the cache
// locks its counters): concurrent builds into one registry install one at a time, each
// reading the index the previous one wrote. Throws when the lock cannot be made or another
// build holds it for `wait_seconds`.
void with_registry_lock(const std::string& dir, unsigned wait_seconds,
                        const std::function<void()>& fn) {
  const std::string why =
      registry::run_locked(dir + "/index.json", std::chrono::seconds(wait_seconds), fn);
  if (!why.empty()) throw std::runtime_error(dir + ": cannot lock the registry: " + why);
}

// Removes what the index no longer names from kernels/ and ops/ (`keep`: registry-relative
// paths), and the temp files killed builds left there, in lib/ and in the root. Under the
// registry lock, so no temp file is another build's in progress.
void remove_stale(const std::string& dir, const std::set<std::string>& keep) {
  std::error_code ec;
  for (const char* sub : {"kernels", "ops", "lib", ""}) {
    const bool named = *sub && std::string(sub) != "lib";
    for (const auto& f : fs::directory_iterator(fs::path(dir) / sub, ec)) {
      const std::string name = f.path().filename().string();
      const std::string rel = *sub ? std::string(sub) + "/" + name : name;
      const bool temp = name.rfind(".tmp-", 0) == 0;
      // An older opforge's llvm::LockFileManager left "index.json.lock-<random>".
      const bool old_lock = !*sub && name.rfind("index.json.lock-", 0) == 0;
      if (temp || old_lock || (named && f.is_regular_file(ec) && !keep.count(rel))) {
        fs::remove(f.path(), ec);
      }
    }
  }
}

}  // namespace

namespace {

cache::KernelKeyParts key_parts(const HalideIdentity& hid, const Halide::Target& target,
                                const std::string& entry, const dsl::KernelPipeline& p) {
  return {kernel_artifact_list(),
          hid.version + " " + hid.sha256,
          target.to_string(),
          entry,
          p.kernel_args,
          p.algorithm,
          p.schedule_recipe,
          p.schedule_params,
          dsl::sources_fingerprint()};
}

}  // namespace

cache::KeyBuilder kernel_key(const HalideIdentity& hid, const Halide::Target& target,
                             const std::string& entry, const dsl::KernelPipeline& p) {
  return cache::kernel_key(key_parts(hid, target, entry, p));
}

namespace {

// An autoscheduled variant's key parts: kernel_key's, the autoscheduler and its pinned
// settings, then `how` (what else its schedule is a function of).
cache::KeyBuilder autoscheduled_key(const HalideIdentity& hid, const Halide::Target& target,
                                    const std::string& entry, const dsl::KernelPipeline& p,
                                    std::vector<std::pair<std::string, std::string>> how) {
  const generators::AutoscheduleSettings& s = generators::autoschedule_settings();
  cache::KernelKeyParts parts = key_parts(hid, target, entry, p);
  parts.extra = {
      {"autoscheduler", s.autoscheduler},
      {"autoschedule_settings", s.env_text() + "; machine_params=" + s.machine_params_text()}};
  parts.extra.insert(parts.extra.end(), how.begin(), how.end());
  return cache::kernel_key(parts);
}

// The SHA-256 of the Adams2019 plugin, read once: a rule twin's schedule depends on it.
const std::string& plugin_sha256() {
  static const std::string sha = [] {
    const std::string& path = generators::autoschedule_settings().plugin;
    try {
      return cache::sha256_hex(cache::read_file(path));
    } catch (const std::exception& e) {
      throw std::runtime_error(path +
                               ": cannot read the Adams2019 autoscheduler plugin: " + e.what());
    }
  }();
  return sha;
}

}  // namespace

cache::KeyBuilder auto_kernel_key(const HalideIdentity& hid, const Halide::Target& target,
                                  const std::string& entry, const dsl::KernelPipeline& p,
                                  const std::string& schedule_source) {
  return autoscheduled_key(hid, target, entry, p,
                           {{"schedule_file_sha256", cache::sha256_hex(schedule_source)}});
}

cache::KeyBuilder build_time_auto_kernel_key(const HalideIdentity& hid,
                                             const Halide::Target& target, const std::string& entry,
                                             const dsl::KernelPipeline& p) {
  return autoscheduled_key(hid, target, entry, p,
                           {{"autoscheduler_plugin_sha256", plugin_sha256()},
                            {"schedule",
                             "in-process at build time, split tails ShiftInwards/RoundUp/Auto -> "
                             "GuardWithIf"}});
}

void check_autoscheduler(const dsl::rules::RuleOp& op, const std::string& plugin) {
  if (access(plugin.c_str(), R_OK) == 0) return;
  op.fail(op.rule->autoschedule_loc,
          "'autoschedule' runs Halide's Adams2019 autoscheduler at build time, but its plugin " +
              plugin +
              " is not readable (libhalide14-0-dev ships it as libautoschedule_adams2019.so)");
}

namespace {

// Every combination of a rule op's attr values, each one variant per storage: both values of
// a bool attr, every choice of a string attr (a number attr is one compile-time constant).
// Throws, naming the attrs, past kMaxRuleVariantsPerIsa variants per ISA (with the storages,
// and doubled by autoschedule twins).
std::vector<dsl::AttrValues> attr_combinations(const dsl::OptimizerDecl& d,
                                               const std::string& origin, size_t storages,
                                               bool twins) {
  std::vector<std::pair<std::string, std::vector<std::string>>> values;
  std::string names;
  size_t total = storages * (twins ? 2 : 1);
  for (const dsl::AttrDecl& a : d.attrs()) {
    std::vector<std::string> v = {a.default_value};
    if (a.type == registry::Attr::Type::boolean) v = {"false", "true"};
    if (a.type == registry::Attr::Type::string && !a.choices.empty()) v = a.choices;
    // grad_scaling()'s attrs come from the rule's loss_scaling line: say so.
    const bool scaling =
        d.has_grad_scaling() && (a.name == "unscale" || a.name == "skip_if_nonfinite");
    if (v.size() > 1)
      names += (names.empty() ? "" : ", ") + a.name + (scaling ? " (loss_scaling)" : "");
    total = std::min<size_t>(total * v.size(), size_t(1) << 40);
    values.emplace_back(a.name, std::move(v));
  }
  if (total > kMaxRuleVariantsPerIsa) {
    std::vector<std::string> terms;
    if (!names.empty()) terms.push_back("attrs " + names);
    if (storages > 1) terms.push_back(std::to_string(storages) + " storages");
    if (twins) terms.push_back("an autoschedule twin of each");
    std::string why;
    for (size_t k = 0; k < terms.size(); ++k) why += (k ? " and " : "") + terms[k];
    throw std::runtime_error(origin + ": op '" + d.name() + "': " + why + " give " +
                             std::to_string(total) + " variants per ISA; a rule may have at most " +
                             std::to_string(kMaxRuleVariantsPerIsa) +
                             " (each is compiled): make some of them hypers");
  }
  std::vector<dsl::AttrValues> out = {{}};
  for (const auto& [name, vs] : values) {
    std::vector<dsl::AttrValues> next;
    for (const auto& partial : out) {
      for (const auto& v : vs) {
        next.push_back(partial);
        next.back()[name] = v;
      }
    }
    out = std::move(next);
  }
  return out;
}

}  // namespace

std::vector<std::string> rule_op_names(
    const std::vector<std::unique_ptr<dsl::OptimizerDecl>>& keep) {
  std::vector<std::string> out;
  for (const auto& d : keep) {
    if (std::find(out.begin(), out.end(), d->name()) == out.end()) out.push_back(d->name());
  }
  return out;
}

std::vector<generators::VariantSpec> table_with_rules(
    const std::vector<std::string>& paths, std::vector<std::unique_ptr<dsl::OptimizerDecl>>& keep,
    const std::map<std::string, std::string>& reserved) {
  std::vector<generators::VariantSpec> rows = generators::op_table();
  std::set<std::string> names;
  for (const auto& r : rows) names.insert(r.decl->name());
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& f : fs::directory_iterator(p, ec)) {
        if (f.path().extension() == ".rule") found.push_back(f.path().string());
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      throw std::runtime_error(p + ": no such rule file or directory");
    }
  }
  const std::vector<std::string>& all_isas = dsl::rules::isa_names();
  for (const auto& f : files) {
    dsl::rules::RuleOp op = dsl::rules::load_rule_file(f);
    keep.push_back(std::make_unique<dsl::OptimizerDecl>(op.decl));
    const dsl::OptimizerDecl& d = *keep.back();
    if (auto taken = reserved.find(d.name()); taken != reserved.end()) {
      throw std::runtime_error(f + ": op '" + d.name() + "' is already " + taken->second +
                               ": rename the rule");
    }
    if (!names.insert(d.name()).second) {
      throw std::runtime_error(f + ": op '" + d.name() +
                               "' is already defined (built-in or another rule)");
    }
    const bool twins = !op.autoschedule_isas.empty();
    if (twins) check_autoscheduler(op, generators::autoschedule_settings().plugin);
    const std::vector<dsl::AttrValues> combos = attr_combinations(d, f, op.storages.size(), twins);
    for (const dsl::Storage& storage : op.storages) {
      // The narrow-storage declarations live in `keep` too: the rows point at them.
      const dsl::OptimizerDecl* sd = &d;
      if (!storage.is_f32()) {
        keep.push_back(std::make_unique<dsl::OptimizerDecl>(d.with_storage(storage)));
        sd = keep.back().get();
      }
      for (const dsl::AttrValues& attrs : combos) {
        generators::VariantSpec row{sd, attrs, all_isas, {}, op.autoschedule_isas};
        row.autoschedule_at_build = twins;
        row.storage = storage;
        const dsl::OptimizerDecl& bw = generators::bandwidth_for(row.resolve());
        rows.push_back(std::move(row));
        if (names.insert(bw.name()).second) rows.push_back({&bw, {}, all_isas, {}});
      }
    }
    if (!op.sparse) continue;
    if (auto taken = reserved.find(op.sparse->name()); taken != reserved.end()) {
      op.fail(op.rule->sparse_loc, "op '" + op.sparse->name() +
                                       "', the sparse form this line derives, is already " +
                                       taken->second + ": rename the rule");
    }
    if (!names.insert(op.sparse->name()).second) {
      op.fail(op.rule->sparse_loc, "op '" + op.sparse->name() +
                                       "', the sparse form this line derives, is already defined "
                                       "(built-in or another rule)");
    }
    keep.push_back(std::make_unique<dsl::OptimizerDecl>(*op.sparse));
    const dsl::OptimizerDecl* sparse = keep.back().get();
    // No bandwidth kernel: sparse ops are measured in rows/s.
    for (const dsl::AttrValues& attrs : attr_combinations(*sparse, f, 1, false)) {
      rows.push_back({sparse, attrs, all_isas, {}});
    }
  }
  return rows;
}

std::string tuning_family(const dsl::ResolvedOp& op) {
  if (op.nn()) return "";
  const dsl::OptimizerDecl& d = op.as_optimizer();
  if (d.sparse() || d.is_multi_tensor() || d.kind() != "optimizer") return "";
  return generators::tuning_family_name(op);
}

std::vector<PlannedVariant> plan_variants(const std::vector<generators::VariantSpec>& rows,
                                          const std::vector<std::string>& only,
                                          const HalideIdentity& hid, const Tuning* tuning) {
  std::set<std::string> wanted(only.begin(), only.end()), found, ids;
  // A partial build brings the bandwidth kernels its ops are benchmarked against.
  for (const auto& row : rows) {
    if (wanted.count(row.decl->name())) found.insert(generators::bandwidth_op_name(row.resolve()));
  }
  found.erase("");
  wanted.insert(found.begin(), found.end());
  found.clear();
  std::vector<PlannedVariant> out;
  auto add = [&](PlannedVariant v) {
    if (!ids.insert(v.id).second) throw std::runtime_error("op table lists " + v.id + " twice");
    out.push_back(std::move(v));
  };
  for (const auto& row : rows) {
    const std::string& name = row.decl->name();
    if (!wanted.empty() && !wanted.count(name)) continue;
    found.insert(name);
    const dsl::ResolvedOp op = row.resolve();
    for (const auto& isa_name : row.isas) {
      const generators::Isa& isa = generators::isa(isa_name);
      const Halide::Target target = kernel_target(isa);
      std::map<std::string, int64_t> schedule = row.schedule;
      const std::string family = tuning ? tuning_family(op) : "";
      const TunedFamily* tuned = family.empty() ? nullptr : tuning->find(family, isa.name);
      if (tuned) {
        for (const auto& [k, val] : tuned->params) schedule.emplace(k, val);
      }
      PlannedVariant v{
          op.variant_id(isa.name), op, isa, target, dsl::build_pipeline(op, schedule, target), {}};
      if (tuned) v.tuning_machine = tuning->machine.fingerprint(), v.tuning_family = family;
      cache::KernelKeyParts parts = key_parts(hid, target, v.id, v.pipeline);
      // An NN op's hand schedules are in generators/nn_*.cpp, outside the dsl/ fingerprint.
      if (op.nn()) parts.extra = {{"nn_sources", generators::nn_sources_fingerprint()}};
      v.key = cache::kernel_key(parts);
      add(std::move(v));
    }
    // Adams2019 twins: the same algorithm, scheduled by the checked-in schedule file. A row
    // narrowed to fewer ISAs (a preview) drops the twins of the others.
    for (const auto& isa_name : row.autoschedule) {
      if (std::find(row.isas.begin(), row.isas.end(), isa_name) == row.isas.end()) continue;
      generators::Isa isa = generators::isa(isa_name);
      isa.priority = 0;  // below every hand-scheduled variant: select() keeps the hand one
      const Halide::Target target = kernel_target(isa);
      const std::string id = generators::auto_variant_id(op.variant_id(isa.name));
      if (row.autoschedule_at_build) {
        // Scheduled when compiled: a cache hit never runs the autoscheduler.
        PlannedVariant v{id, op, isa, target, dsl::build_pipeline(op, {}, target, false), {}};
        v.pipeline.schedule_recipe = generators::kAutoRecipe;
        v.pipeline.schedule_params.clear();
        v.pipeline.schedule_summary =
            generators::auto_schedule_summary() + "; run at build time (a rule's autoschedule)";
        v.key = build_time_auto_kernel_key(hid, target, v.id, v.pipeline);
        v.autoschedule_at_compile = true;
        add(std::move(v));
        continue;
      }
      PlannedVariant v{id, op, isa, target, generators::auto_scheduled_pipeline(op, target, id),
                       {}};
      v.key = auto_kernel_key(hid, target, v.id, v.pipeline,
                              generators::find_auto_schedule(id)->source);
      add(std::move(v));
    }
  }
  for (const auto& op : wanted) {
    if (!found.count(op)) throw std::runtime_error("unknown op '" + op + "' (not in the op table)");
  }
  return out;
}

namespace {

using Obtain =
    std::function<cache::Entry(const std::string& id, const cache::KeyBuilder& key,
                               const std::function<cache::Entry()>& compile, VariantResult& r)>;

// Every planned kernel from the cache or compiled (`obtain`), `jobs` at a time: each worker
// takes the next variant. Throws naming the variants that failed, once all have finished.
void obtain_kernels(std::vector<PlannedVariant>& plan, int jobs, const Obtain& obtain,
                    const std::function<void(const VariantResult&)>& finished,
                    const std::string& rt_path, std::vector<VariantResult>& results,
                    std::vector<cache::Entry>& entries) {
  std::vector<std::string> errors = run_on_workers(plan.size(), jobs, [&](size_t k) {
    PlannedVariant& v = plan[k];
    VariantResult& r = results[k];
    r.variant = v.id;
    r.op = v.op.name();
    r.isa = v.isa.name;
    r.key = v.key.hex_digest();
    const auto c0 = Clock::now();
    cache::Entry entry = obtain(
        v.id, v.key,
        [&] {
          if (v.autoschedule_at_compile) {  // once: the Funcs keep the schedule
            autoschedule_in_place(v.pipeline.pipeline, v.target);
            v.autoschedule_at_compile = false;
          }
          return compile_kernel(v.pipeline.pipeline, v.pipeline.arguments, v.id, v.target, rt_path);
        },
        r);
    r.compile_ms = ms_since(c0);
    r.kernel_bytes = entry.artifacts.at("kernel.so").size();
    entries[k] = std::move(entry);
    finished(r);
  });
  for (size_t k = 0; k < plan.size(); ++k) {
    if (!errors[k].empty()) errors[k] = plan[k].id + ": " + errors[k];
  }
  for (const auto& e : errors) {
    if (!e.empty()) throw std::runtime_error("compile failed: " + e);
  }
}

// Installs the runtime, the kernels and their descriptors, then index.json (last), and removes
// what the index no longer names. Every descriptor passes the reader's validation before
// anything is installed; a partial build (--only) keeps the other ops' entries.
void install_registry(const BuildOptions& opts, const std::vector<PlannedVariant>& plan,
                      const std::string& halide_version, const cache::Entry& rt_entry,
                      const std::vector<cache::Entry>& entries) {
  install(opts.registry_dir + "/" + kRegistryMarker, "opforge registry\n", 0644);
  registry::Index index;
  index.runtime_library = std::string("lib/") + kRuntimeLibrary;
  index.runtime_sha256 = cache::sha256_hex(rt_entry.artifacts.at("runtime.so"));
  index.halide_version = halide_version;
  std::set<std::string> rebuilt_ops;
  for (const auto& v : plan) rebuilt_ops.insert(v.op.name());
  const bool partial = !opts.only.empty() || opts.rules_only;  // keeps the other ops
  if (partial) index.variants = kept_entries(opts.registry_dir, rebuilt_ops);
  std::vector<registry::Descriptor> descs;
  for (size_t k = 0; k < plan.size(); ++k) {
    descs.push_back(make_descriptor(plan[k], halide_version));
    // What the runtime checks before it dlopens the kernel.
    const std::string& so = entries[k].artifacts.at("kernel.so");
    descs.back().kernel.sha256 = cache::sha256_hex(so);
    descs.back().kernel.file = addressed("kernels", plan[k].id, so, ".so");
    registry::descriptor_from_json(registry::to_json(descs.back()), "descriptor of " + plan[k].id);
  }
  install(opts.registry_dir + "/" + index.runtime_library, rt_entry.artifacts.at("runtime.so"),
          0755);
  for (size_t k = 0; k < plan.size(); ++k) {
    const PlannedVariant& v = plan[k];
    const registry::Descriptor& d = descs[k];
    install(opts.registry_dir + "/" + d.kernel.file, entries[k].artifacts.at("kernel.so"), 0755);
    const std::string text = registry::to_json(d);
    const std::string desc_file = addressed("ops", v.id, text, ".json");
    install(opts.registry_dir + "/" + desc_file, text, 0644);
    index.variants.push_back(
        {v.id, v.op.name(), desc_file, v.isa.name, d.attr_values(), cache::sha256_hex(text)});
  }
  cache::write_file_atomic(opts.registry_dir + "/index.json", registry::to_json(index));
  // What the new index names: its descriptors and their kernels (a kept descriptor that does
  // not parse keeps every kernel file of its variant: the runtime will refuse it by name).
  std::set<std::string> keep;
  std::set<std::string> unreadable;
  for (const auto& d : descs) keep.insert(d.kernel.file);
  for (const auto& e : index.variants) {
    keep.insert(e.descriptor);
    if (rebuilt_ops.count(e.op)) continue;
    try {
      const std::string path = opts.registry_dir + "/" + e.descriptor;
      keep.insert(registry::descriptor_from_json(
                      registry::read_regular_file(path, registry::kJsonLimits), path)
                      .kernel.file);
    } catch (const std::exception&) {
      unreadable.insert(e.variant);
    }
  }
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(fs::path(opts.registry_dir) / "kernels", ec)) {
    const std::string name = f.path().filename().string();
    for (const auto& v : unreadable) {
      if (name.rfind(v + "-", 0) == 0 || name == v + ".so") keep.insert("kernels/" + name);
    }
  }
  remove_stale(opts.registry_dir, keep);
}

}  // namespace

namespace {

// Failed cache writes, one line per reason (the errno text: a full disk fails every write the
// same way), in full for the first, then how many more.
class CacheWarnings {
 public:
  void add(const std::string& what, const std::string& why) {
    const size_t colon = why.rfind(": ");
    const std::string reason = colon == std::string::npos ? why : why.substr(colon + 2);
    auto& [first, more] = by_reason_[reason];
    if (first.empty()) {
      first = what + ": " + why;
      order_.push_back(reason);
    } else {
      ++more;
    }
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    for (const auto& reason : order_) {
      const auto& [first, more] = by_reason_.at(reason);
      out.push_back(first + (more ? " (and " + std::to_string(more) + " more writes)" : ""));
    }
    return out;
  }

 private:
  std::map<std::string, std::pair<std::string, size_t>> by_reason_;
  std::vector<std::string> order_;
};

}  // namespace

BuildReport build_registry(const BuildOptions& opts) {
  if (opts.registry_dir.empty()) throw std::invalid_argument("build_registry: empty registry dir");
  if (opts.jobs < 0) throw std::invalid_argument("build_registry: negative jobs");
  const auto t0 = Clock::now();
  BuildReport report;
  report.registry_dir = opts.registry_dir;
  report.cache_dir = opts.cache_dir.empty() ? cache::CompileCache::default_root() : opts.cache_dir;
  report.cache_mode = opts.cache_mode;
  const bool use_cache = opts.cache_mode != CacheMode::disabled;
  // Rules and the cache settings are read first: a bad rule or setting leaves the registry
  // and the cache untouched.
  std::vector<std::unique_ptr<dsl::OptimizerDecl>> rule_decls;
  const std::vector<generators::VariantSpec> rows =
      table_with_rules(opts.rules, rule_decls, opts.reserved_ops);
  report.rule_ops = rule_op_names(rule_decls);
  // The machine tuning, read with the rules: a bad file leaves the registry and the cache
  // untouched.
  std::optional<Tuning> tuning;
  const Machine here = this_machine();
  if (opts.tuning == "auto") {
    tuning = find_tuning(opts.registry_dir, here);
    if (tuning) report.tuning_path = tuning_path(opts.registry_dir, here);
  } else if (opts.tuning != "none") {
    tuning = read_tuning(opts.tuning, here);
    report.tuning_path = opts.tuning;
  }
  std::vector<std::string> only = opts.only;
  if (opts.rules_only) {
    if (!opts.only.empty()) throw std::invalid_argument("build_registry: rules_only with only");
    if (report.rule_ops.empty()) throw std::runtime_error("no rule files given (--rules PATH)");
    only = report.rule_ops;
  }
  if (use_cache) {
    const cache::EffectiveSize max = cache::effective_max_size(report.cache_dir);
    report.max_cache_size = max.bytes;
    report.max_cache_size_source = max.source;
  }
  check_registry_dir(opts.registry_dir);
  sweep_scratch_dirs(std::chrono::hours(24));  // what killed builds left in the temp dir
  cache::CompileCache cache(report.cache_dir);
  if (use_cache) llvm::sys::fs::create_directories(report.cache_dir);
  const HalideIdentity hid = halide_identity(use_cache ? report.cache_dir : "");
  std::vector<PlannedVariant> plan = plan_variants(rows, only, hid, tuning ? &*tuning : nullptr);
  for (const auto& v : plan) report.tuned_variants += !v.tuning_family.empty();

  std::optional<cache::CompileCache> from;
  if (use_cache && !opts.cache_from.empty() && llvm::sys::fs::is_directory(opts.cache_from))
    from.emplace(opts.cache_from);
  // One variant's entry, from the cache or compiled, as the cache mode says.
  auto obtain = [&](const std::string& id, const cache::KeyBuilder& key,
                    const std::function<cache::Entry()>& compile,
                    VariantResult& r) -> cache::Entry {
    switch (opts.cache_mode) {
      case CacheMode::disabled:
        r.why = "cache disabled (OPFORGE_CACHE_DISABLE)";
        return compile();
      case CacheMode::recache:
        r.why = "--recache";
        return cache.rebuild(key.hex_digest(), compile, &r.not_cached);
      case CacheMode::use:
        break;
    }
    std::string why;
    bool copied = false;
    auto copy_or_compile = [&]() -> cache::Entry {
      if (from) {
        if (std::optional<cache::Entry> e = from->lookup(key.hex_digest())) {
          copied = true;
          return std::move(*e);
        }
      }
      return compile();
    };
    auto [entry, hit] = cache.get_or_build(key.hex_digest(), copy_or_compile, &why, &r.not_cached);
    r.hit = hit || copied;
    if (copied) r.copied_from = opts.cache_from;
    if (!r.hit) r.why = explain_miss(cache, id, key, why);
    return std::move(entry);
  };
  // Progress: calls of on_variant are serialized, and `done` counts under the same lock.
  std::mutex progress_mutex;
  size_t done = 0;
  const size_t total = plan.size() + 1;
  auto finished = [&](const VariantResult& r) {
    std::lock_guard<std::mutex> lock(progress_mutex);
    ++done;
    if (opts.on_variant) opts.on_variant(r, done, total);
  };

  // The shared runtime first: every kernel links against it.
  const cache::KeyBuilder rt_key = runtime_key(hid);
  const auto rt0 = Clock::now();
  report.runtime.variant = "halide_runtime";
  report.runtime.key = rt_key.hex_digest();
  const cache::Entry rt_entry = obtain("halide_runtime", rt_key, compile_runtime, report.runtime);
  report.runtime.compile_ms = ms_since(rt0);
  report.runtime.kernel_bytes = rt_entry.artifacts.at("runtime.so").size();
  // Cache bookkeeping that fails (a full disk) costs explanations of later misses, never the
  // build: as ccache, a cache that cannot be written never fails a compile.
  CacheWarnings warnings;
  auto record = [&](const std::string& id, const cache::KeyBuilder& key) {
    try {
      cache.record_variant(id, key.hex_digest(), key.parts());
    } catch (const std::exception& e) {
      warnings.add("cannot record the key parts of " + id + " (later misses go unexplained)",
                   e.what());
    }
  };
  if (!report.runtime.not_cached.empty())
    warnings.add("halide_runtime: compiled, not cached", report.runtime.not_cached);
  if (use_cache) {
    cache.count(report.runtime.hit);
    record("halide_runtime", rt_key);
  }
  finished(report.runtime);
  // Kernels link against a scratch copy; the registry gets its copy only once all compiled.
  const LinkRuntime link_runtime(rt_entry);

  std::vector<VariantResult> results(plan.size());
  std::vector<cache::Entry> entries(plan.size());
  obtain_kernels(plan, opts.jobs, obtain, finished, link_runtime.path(), results, entries);
  if (use_cache) {
    for (size_t k = 0; k < plan.size(); ++k) {
      cache.count(results[k].hit);
      record(plan[k].id, plan[k].key);
    }
  }
  for (const auto& r : results) {
    if (!r.not_cached.empty()) warnings.add(r.variant + ": compiled, not cached", r.not_cached);
  }
  report.cache_warnings = warnings.lines();
  // One build installs at a time; a partial build keeps what the previous one wrote.
  if (auto ec = llvm::sys::fs::create_directories(opts.registry_dir))
    throw std::runtime_error(opts.registry_dir + ": cannot create the registry: " + ec.message());
  with_registry_lock(opts.registry_dir, 600,
                     [&] { install_registry(opts, plan, hid.version, rt_entry, entries); });

  // ccache's automatic cleanup, after every build: keeps the entries this registry uses.
  if (use_cache) {
    std::vector<std::string> used = {rt_key.hex_digest()};
    for (const auto& v : plan) used.push_back(v.key.hex_digest());
    report.pruned = cache.prune_keeping(report.max_cache_size, used, &report.cache_over);
  }

  report.variants = std::move(results);
  report.seconds = ms_since(t0) / 1000.0;
  return report;
}

}  // namespace opforge::builder
