// Regenerates a registry from the op table, through the compile cache: only variants whose
// key changed are compiled. Files are installed atomically and index.json is written last,
// so a reader never sees an index naming files that are not there.
#pragma once

#include <Halide.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dsl/kernel_pipeline.h"
#include "dsl/rules/rule_decl.h"
#include "generators/op_table.h"
#include "opforge/descriptor.h"
#include "registry/builder/halide_identity.h"
#include "registry/builder/tuning.h"
#include "registry/cache/compile_cache.h"

namespace opforge::builder {

struct VariantResult {
  std::string variant, op, isa, key;
  bool hit = false;
  std::string why;  // for a miss: what changed since the last build of this variant
  double compile_ms = 0;
  size_t kernel_bytes = 0;
  std::string not_cached;   // why the compiled kernel could not be stored in the cache
  std::string copied_from;  // a hit in BuildOptions::cache_from: that cache, copied from
};

// ccache's modes: use the cache; compile everything and overwrite the entries (--recache);
// compile everything without reading or writing the cache (OPFORGE_CACHE_DISABLE).
enum class CacheMode { use, recache, disabled };

struct BuildOptions {
  std::string registry_dir;
  std::string cache_dir;  // empty: CompileCache::default_root()
  // A second compile cache, read only: an entry cache_dir lacks is copied from it when it has
  // the key, instead of compiled (ccache's read-only secondary storage; a copy marks the entry
  // used there, as a hit would). The test registry takes the op library's kernels from the
  // user's cache this way. Empty or absent: none.
  std::string cache_from;
  int jobs = 0;                    // 0: hardware concurrency
  std::vector<std::string> only;   // op names; empty = every op in the table
  std::vector<std::string> rules;  // rule files, or directories of *.rule files, to add
  CacheMode cache_mode = CacheMode::use;
  // The machine tuning: "auto" (the registry's tuning file for this machine, when it has
  // one), "none" (the recipe defaults), or a tuning file's path (it must be this machine's).
  std::string tuning = "auto";
  // Only the rules' ops (and the bandwidth kernels they are measured against), not the op
  // table's: the user registry's build (`opforge build --user`). `only` must be empty.
  bool rules_only = false;
  // Op names a rule may not take, each with where it is taken (e.g. "the op library at DIR").
  std::map<std::string, std::string> reserved_ops;
  // Called once per finished variant (the Halide runtime first), one call at a time, with
  // how many have finished and how many there are.
  std::function<void(const VariantResult&, size_t done, size_t total)> on_variant;
};

struct BuildReport {
  std::vector<VariantResult> variants;
  VariantResult runtime;
  double seconds = 0;
  std::string registry_dir, cache_dir;
  CacheMode cache_mode = CacheMode::use;
  // The automatic prune after the build (cache_config.h's max-size; not when disabled).
  uint64_t max_cache_size = 0;
  std::string max_cache_size_source;
  uint64_t pruned = 0;      // entries removed
  bool cache_over = false;  // the entries this build used alone exceed max_cache_size
  // Cache writes that failed (a full disk): the build went on without them, as ccache does.
  std::vector<std::string> cache_warnings;
  std::vector<std::string> rule_ops;  // the ops the rule files declare, in file order
  std::string tuning_path;            // the tuning file applied; empty: the defaults
  size_t tuned_variants = 0;          // variants whose params it set
};

BuildReport build_registry(const BuildOptions& opts);

// A planned variant: everything needed to key, compile and describe it.
struct PlannedVariant {
  std::string id;
  dsl::ResolvedOp op;  // the row's op, attrs resolved
  generators::Isa isa;
  Halide::Target target;
  dsl::KernelPipeline pipeline;
  cache::KeyBuilder key;
  // A rule's twin: `pipeline` is unscheduled until compiled (autoschedule_in_place).
  bool autoschedule_at_compile = false;
  // The machine tuning whose params it took (registry/builder/tuning.h); empty: defaults.
  std::string tuning_machine, tuning_family;
};

// The cache key of a kernel (registry/cache/cache_key.h), from this process's compiler and
// the planned pipeline: the artifact list, libHalide (version and content hash), the canonical
// target, the entry name, the argument list, the exact algorithm text, the resolved schedule
// params and the fingerprint of the dsl/ sources (schedule recipes).
cache::KeyBuilder kernel_key(const HalideIdentity& hid, const Halide::Target& target,
                             const std::string& entry, const dsl::KernelPipeline& p);

// The key of the shared Halide runtime every kernel links against.
cache::KeyBuilder runtime_key(const HalideIdentity& hid);

// The registry descriptor of a planned variant.
registry::Descriptor make_descriptor(const PlannedVariant& v, const std::string& halide_version);

// The key of an autoscheduled ("__auto") variant: kernel_key plus the autoscheduler's name,
// its pinned settings (HL_* environment, machine params) and the SHA-256 of the schedule
// file applied, so regenerating or editing the file recompiles the variant.
cache::KeyBuilder auto_kernel_key(const HalideIdentity& hid, const Halide::Target& target,
                                  const std::string& entry, const dsl::KernelPipeline& p,
                                  const std::string& schedule_source);

// The key of a rule's autoscheduled twin, scheduled at build time: kernel_key plus the
// autoscheduler's name, its pinned settings, the SHA-256 of its plugin and the tail rewrite
// (in place of a schedule file's hash: the schedule is a function of these).
cache::KeyBuilder build_time_auto_kernel_key(const HalideIdentity& hid,
                                             const Halide::Target& target, const std::string& entry,
                                             const dsl::KernelPipeline& p);

// Plans one variant per (row, ISA) of `rows` (filtered by `only`, which brings the bandwidth
// kernels of the ops it names); throws on unknown ops or duplicate ids. Rows with
// `autoschedule` ISAs add their "__auto" twins (generators/auto_schedules.h); a twin whose
// schedule file is not compiled in is an error naming `opforge autoschedule OP`, unless the
// row is autoscheduled at build time (a rule's). `tuning`: a machine tuning whose params
// replace the recipe defaults of the dense optimizer variants of its families and ISAs (a
// row's own overrides stay); the cache key has the resolved params, so tuned and default
// kernels are separate entries.
std::vector<PlannedVariant> plan_variants(const std::vector<generators::VariantSpec>& rows,
                                          const std::vector<std::string>& only,
                                          const HalideIdentity& hid,
                                          const Tuning* tuning = nullptr);

// The tuning family of an op (generators::tuning_family_name), or "" for ops
// the elementwise recipe does not schedule (NN, sparse, multi-tensor ops, bandwidth kernels).
std::string tuning_family(const dsl::ResolvedOp& op);

// The most variants per ISA one rule's op may have (each is compiled, about a second).
constexpr size_t kMaxRuleVariantsPerIsa = 16;

// Throws the RuleError of `op`'s autoschedule line when `plugin` (Adams2019's) is unreadable.
void check_autoscheduler(const dsl::rules::RuleOp& op, const std::string& plugin);

// The op table plus the ops of the rule files under `paths` (and the bandwidth kernels they
// need): every combination of attr values (loss_scaling's included) per storage, the sparse
// form sparse_<name> for int32 and int64 indices, and the autoschedule twins. Rule
// declarations are owned by `keep`. Throws RuleError / std::runtime_error naming the file
// for a bad rule, a name clash (with the table, another rule or a `reserved` name, whose
// value says where it is taken) or a missing autoscheduler, before anything is compiled or
// written.
std::vector<generators::VariantSpec> table_with_rules(
    const std::vector<std::string>& paths, std::vector<std::unique_ptr<dsl::OptimizerDecl>>& keep,
    const std::map<std::string, std::string>& reserved = {});
// The names of the ops `keep` (table_with_rules') declares, unique, in order.
std::vector<std::string> rule_op_names(
    const std::vector<std::unique_ptr<dsl::OptimizerDecl>>& keep);

}  // namespace opforge::builder
