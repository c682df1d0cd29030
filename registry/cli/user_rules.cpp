#include "registry/cli/user_rules.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "opforge/runtime.hpp"
#include "registry/cli/commands.h"

namespace opforge::cli {
namespace {

bool has_index(const std::string& dir) {
  struct stat st {};
  return !dir.empty() && ::stat((dir + "/index.json").c_str(), &st) == 0;
}

// The op library's ops (the user registry not read), none when it is not built yet.
std::vector<std::string> library_ops(const std::string& library_dir) {
  if (!has_index(library_dir)) return {};
  return Registry::open(library_dir, std::string())->ops();
}

}  // namespace

std::vector<std::string> absolute_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths)
    out.push_back(std::filesystem::absolute(p).lexically_normal().string());
  return out;
}

OptionSpec rules_option() {
  return {"rules", "PATH",
          "a rule file (or directory of *.rule) declaring the op: built into the user registry "
          "first when the op library lacks it",
          true};
}

builder::BuildReport build_user_rules(builder::BuildOptions o,
                                      const std::vector<std::string>& rules,
                                      const std::string& library_dir) {
  o.registry_dir = checked_dir("user registry", Registry::default_user_dir());
  if (o.registry_dir.empty()) {
    throw UsageError("no user registry: set OPFORGE_USER_REGISTRY (or HOME)");
  }
  o.rules = absolute_paths(rules);
  o.rules_only = true;
  o.only.clear();
  for (const auto& op : library_ops(library_dir))
    o.reserved_ops[op] = "an op of the op library at " + library_dir;
  return builder::build_registry(o);
}

void build_rule_op_if_missing(const Args& a, const std::string& op) {
  if (!a.has("rules")) return;
  const std::string library = registry_dir(a);
  const std::vector<std::string> have = library_ops(library);
  if (std::find(have.begin(), have.end(), op) != have.end()) return;  // a library op
  // Only the files that declare `op`: another file's clash is not this command's business.
  std::vector<std::string> files;
  for (const auto& path : a.all("rules")) {
    std::vector<std::unique_ptr<dsl::OptimizerDecl>> keep;
    builder::table_with_rules({path}, keep);
    const auto names = builder::rule_op_names(keep);
    if (std::find(names.begin(), names.end(), op) != names.end()) files.push_back(path);
  }
  if (files.empty()) return;  // the op comes from elsewhere (or nowhere: select says so)
  builder::BuildOptions o;
  o.cache_dir = cache_dir(a);
  const builder::BuildReport r = build_user_rules(o, files, library);
  int misses = !r.runtime.hit;
  for (const auto& v : r.variants) misses += !v.hit;
  for (const auto& w : r.cache_warnings)
    std::fprintf(stderr, "opforge: warning: cache: %s\n", w.c_str());
  if (misses > 0) {
    std::fprintf(stderr, "opforge: compiled %d of %zu kernels of %s into the user registry %s\n",
                 misses, r.variants.size() + 1, op.c_str(), r.registry_dir.c_str());
  }
}

}  // namespace opforge::cli
