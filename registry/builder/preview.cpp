#include "registry/builder/preview.h"

#include <llvm/Support/FileSystem.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>

#include "registry/builder/halide_identity.h"
#include "registry/builder/kernel_compiler.h"
#include "registry/builder/registry_builder.h"
#include "registry/builder/workers.h"

namespace opforge::builder {

namespace {

// The preview's planned kernel (pipeline, target, cache key): the registered variant's op-table
// row with its params, `set` on top. `keep` owns the declarations of ops from rule files, which
// the plan points to.
PlannedVariant plan_preview(const registry::Descriptor& registered,
                            const std::map<std::string, int64_t>& set,
                            const std::vector<std::string>& rules, const HalideIdentity& hid,
                            std::vector<std::unique_ptr<dsl::OptimizerDecl>>& keep) {
  const std::string& recipe = registered.schedule.recipe;
  if (recipe != "elementwise" && recipe != "sparse_rows" && recipe.rfind("nn/", 0) != 0) {
    throw std::invalid_argument("variant " + registered.variant + " is scheduled by '" +
                                registered.schedule.recipe +
                                "', which has no schedule params to --set");
  }
  // The op-table row this variant came from.
  std::vector<generators::VariantSpec> rows = table_with_rules(rules, keep);
  const generators::VariantSpec* row = nullptr;
  for (const auto& r : rows) {
    if (r.decl->name() != registered.op) continue;
    const dsl::ResolvedOp op = r.resolve();
    for (const auto& isa : r.isas) {
      if (op.variant_id(isa) == registered.variant) row = &r;
    }
  }
  if (!row) {
    throw std::runtime_error("variant " + registered.variant + " is not in this build's op table" +
                             (rules.empty() ? " (an op from a rule file? pass --rules)" : ""));
  }
  generators::VariantSpec spec = *row;
  spec.isas = {registered.target.isa};
  // The registered variant's params (a machine-tuned build's included), --set on top. A
  // plain `--set tasks=4` means 4 at every size: the registered size buckets of tasks go.
  for (const auto& [k, text] : registered.schedule.params) {
    const size_t at = k.find('@');
    if (at != std::string::npos && set.count(k.substr(0, at))) continue;
    spec.schedule[k] = std::stoll(text);
  }
  for (const auto& [k, v] : set) spec.schedule[k] = v;
  std::vector<PlannedVariant> plan = plan_variants({spec}, {}, hid);
  for (auto& p : plan) {
    if (p.id == registered.variant) return std::move(p);
  }
  throw std::runtime_error("could not plan " + registered.variant);
}

std::string cache_root(const std::string& cache_dir) {
  const std::string root = cache_dir.empty() ? cache::CompileCache::default_root() : cache_dir;
  llvm::sys::fs::create_directories(root);
  return root;
}

}  // namespace

PreviewResult preview_variant(const registry::Descriptor& registered,
                              const std::map<std::string, int64_t>& set,
                              const std::string& cache_dir, const std::vector<std::string>& rules) {
  const std::string root = cache_root(cache_dir);
  cache::CompileCache cache(root);
  const HalideIdentity hid = halide_identity(root);
  std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
  PlannedVariant v = plan_preview(registered, set, rules, hid, keep);
  auto [rt, rt_hit] = cache.get_or_build(runtime_key(hid).hex_digest(), compile_runtime);
  const LinkRuntime link_runtime(rt);
  const std::string& rt_path = link_runtime.path();
  PreviewResult out;
  out.key = v.key.hex_digest();
  const auto t0 = std::chrono::steady_clock::now();
  auto [entry, hit] = cache.get_or_build(out.key, [&] {
    return compile_kernel(v.pipeline.pipeline, v.pipeline.arguments, v.id, v.target, rt_path);
  });
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.hit = hit;
  out.entry = std::move(entry);
  out.descriptor = make_descriptor(v, hid.version);
  out.descriptor.schedule.tuning_machine = registered.schedule.tuning_machine;
  out.descriptor.schedule.tuning_family = registered.schedule.tuning_family;
  return out;
}

int compile_previews(const registry::Descriptor& registered,
                     const std::vector<std::map<std::string, int64_t>>& sets,
                     const std::string& cache_dir, const std::vector<std::string>& rules,
                     int jobs) {
  const std::string root = cache_root(cache_dir);
  cache::CompileCache cache(root);
  const HalideIdentity hid = halide_identity(root);
  std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
  // Planned here, one after another (Halide's Func definitions); compiled on the workers.
  std::vector<PlannedVariant> plan;
  for (const auto& set : sets) plan.push_back(plan_preview(registered, set, rules, hid, keep));
  auto [rt, rt_hit] = cache.get_or_build(runtime_key(hid).hex_digest(), compile_runtime);
  const LinkRuntime link_runtime(rt);
  std::atomic<int> compiled{0};
  const std::vector<std::string> errors = run_on_workers(plan.size(), jobs, [&](size_t k) {
    PlannedVariant& v = plan[k];
    const bool hit =
        cache
            .get_or_build(v.key.hex_digest(),
                          [&] {
                            return compile_kernel(v.pipeline.pipeline, v.pipeline.arguments, v.id,
                                                  v.target, link_runtime.path());
                          })
            .second;
    compiled += !hit;
  });
  for (const std::string& e : errors) {
    if (!e.empty()) throw std::runtime_error("preview of " + registered.variant + " failed: " + e);
  }
  return compiled;
}

}  // namespace opforge::builder
