// Rule ops built on the fly into the user registry, which the runtime reads beside the op
// library (Registry::user_dir()): `opforge build --user`, and run/check/bench --rules.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "registry/builder/registry_builder.h"
#include "registry/cli/args.h"

namespace opforge::cli {

// Builds the ops of the rule files `rules` (and their bandwidth kernels) into the user
// registry through the compile cache, refusing an op name the op library at `library_dir`
// (or the op table) has. `o` carries the cache settings and progress; its registry, rules
// and reserved names are set here.
builder::BuildReport build_user_rules(builder::BuildOptions o,
                                      const std::vector<std::string>& rules,
                                      const std::string& library_dir);

// --rules of run/check/bench: when the op library lacks `op` and one of the rule files
// declares it, builds those files' ops into the user registry first (cache hits when
// unchanged), saying on stderr what was compiled. Nothing when --rules is absent.
void build_rule_op_if_missing(const Args& a, const std::string& op);

// Rule file paths made absolute: a rule op's descriptor records where its rule file is, and
// later commands run from other directories find it there.
std::vector<std::string> absolute_paths(const std::vector<std::string>& paths);

// The --rules option of run/bench.
OptionSpec rules_option();

}  // namespace opforge::cli
