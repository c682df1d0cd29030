#include "registry/builder/preview.h"

#include <llvm/Support/FileSystem.h>

#include <chrono>
#include <memory>
#include <stdexcept>

#include "registry/builder/halide_identity.h"
#include "registry/builder/kernel_compiler.h"
#include "registry/builder/registry_builder.h"

namespace opforge::builder {

PreviewResult preview_variant(const registry::Descriptor& registered,
                              const std::map<std::string, int64_t>& set,
                              const std::string& cache_dir, const std::vector<std::string>& rules) {
  const std::string& recipe = registered.schedule.recipe;
  if (recipe != "elementwise" && recipe != "sparse_rows" && recipe.rfind("nn/", 0) != 0) {
    throw std::invalid_argument("variant " + registered.variant + " is scheduled by '" +
                                registered.schedule.recipe +
                                "', which has no schedule params to --set");
  }
  // The op-table row this variant came from.
  std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
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

  const std::string root = cache_dir.empty() ? cache::CompileCache::default_root() : cache_dir;
  llvm::sys::fs::create_directories(root);
  cache::CompileCache cache(root);
  const HalideIdentity hid = halide_identity(root);
  std::vector<PlannedVariant> plan = plan_variants({spec}, {}, hid);
  PlannedVariant* v = nullptr;
  for (auto& p : plan) {
    if (p.id == registered.variant) v = &p;
  }
  if (!v) throw std::runtime_error("could not plan " + registered.variant);

  auto [rt, rt_hit] = cache.get_or_build(runtime_key(hid).hex_digest(), compile_runtime);
  const LinkRuntime link_runtime(rt);
  const std::string& rt_path = link_runtime.path();

  PreviewResult out;
  out.key = v->key.hex_digest();
  const auto t0 = std::chrono::steady_clock::now();
  auto [entry, hit] = cache.get_or_build(out.key, [&] {
    return compile_kernel(v->pipeline.pipeline, v->pipeline.arguments, v->id, v->target, rt_path);
  });
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.hit = hit;
  out.entry = std::move(entry);
  out.descriptor = make_descriptor(*v, hid.version);
  out.descriptor.schedule.tuning_machine = registered.schedule.tuning_machine;
  out.descriptor.schedule.tuning_family = registered.schedule.tuning_family;
  return out;
}

}  // namespace opforge::builder
