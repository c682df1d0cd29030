// opforge new NAME: a commented starter rule, NAME.rule, to edit and build with --rules.
#include <cstdio>
#include <filesystem>

#include "opforge/descriptor.h"
#include "registry/cache/atomic_file.h"
#include "registry/cli/commands.h"

namespace opforge::cli {

namespace {

const char* const kStarter = R"(# A user optimizer in the opforge rule language. Build it with
#   opforge build --rules %s.rule
# then `opforge describe %s`, `opforge run %s ...`, `opforge bench %s`.
#
# state: tensors updated in place; input: read-only tensors (gradients); hyper: run-time
# scalars with a default; attr: compile-time values (each value is a kernel variant);
# let: temporaries. Updates are simultaneous: every right-hand side reads the old states.
# Functions: select min max abs sign sqrt rsqrt exp log pow clamp, and the whole-tensor
# reductions norm2(x) and sum(x). Optional lines among the declarations: `storage f32, bf16m`
# (mixed-precision variants), `loss_scaling` (variants unscale and skip_if_nonfinite: scalar
# inv_scale, result found_inf), `sparse` (also the op sparse_<name>: the rows indices names),
# `autoschedule avx512` (Adams2019 twins <variant>__auto).
optimizer %s
  state var, m
  input grad
  hyper lr = 0.01        "learning rate"
  hyper beta = 0.9       "momentum decay"
  attr  nesterov = false "use Nesterov look-ahead"
  let   g = sign(grad) * sqrt(abs(grad))
  m   = beta * m + (1 - beta) * g
  var = var - lr * select(nesterov, beta * m + g, m)
)";

}  // namespace

int cmd_new(const Args& a) {
  const std::string name = a.positional.at(0);
  if (!registry::is_valid_op_name(name)) {
    throw UsageError("'" + name + "' is not a valid op name (^[a-z][a-z0-9_]{0,63}$)");
  }
  const std::filesystem::path path = std::filesystem::path(a.get("dir", ".")) / (name + ".rule");
  if (std::filesystem::exists(path)) {
    throw std::runtime_error(path.string() + ": exists; not overwriting it");
  }
  std::string text(4096, '\0');
  const int len = std::snprintf(text.data(), text.size(), kStarter, name.c_str(), name.c_str(),
                                name.c_str(), name.c_str(), name.c_str());
  text.resize(static_cast<size_t>(len));
  cache::write_file_atomic(path.string(), text);
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

Command new_command() {
  return {{"new",
           "NAME",
           "Write a commented starter rule NAME.rule",
           {{"dir", "DIR", "where to write it (default: the current directory)"}}},
          cmd_new};
}

}  // namespace opforge::cli
