// The opforge subcommands. Each declares its options once (CommandSpec): the parser and
// --help come from that declaration. Each returns the process exit code.
#pragma once

#include <string>
#include <vector>

#include "registry/cli/args.h"

namespace opforge {
class Kernel;
class Registry;
}  // namespace opforge

namespace opforge::cli {

struct Command {
  CommandSpec spec;
  int (*run)(const Args& args);
};

const std::vector<Command>& commands();

int cmd_build(const Args& a);
int cmd_list(const Args& a);
int cmd_describe(const Args& a);
int cmd_inspect(const Args& a);
int cmd_diff(const Args& a);
int cmd_report(const Args& a);
int cmd_run(const Args& a);
int cmd_bench(const Args& a);
int cmd_profile(const Args& a);
int cmd_cache(const Args& a);
int cmd_new(const Args& a);
int cmd_check(const Args& a);
int cmd_autoschedule(const Args& a);
int cmd_completion(const Args& a);

// An op's arguments and attrs, from its descriptor (for `opforge run OP --help`).
std::string op_help(const Args& a, const std::string& op);

// Options shared by commands that read a registry / the cache.
OptionSpec registry_option();
OptionSpec cache_option();
std::string registry_dir(const Args& a);
std::string cache_dir(const Args& a);
// Where `opforge autoschedule` writes: the source tree's generators/schedules.
std::string default_schedules_dir();

// The kernel a command runs for `op`: --variant ID (any variant of the op by id, e.g. an
// autoscheduled "<id>__auto"; not with --attr/--isa), else select() by --attr and --isa.
Kernel& op_kernel(Registry& reg, const Args& a, const std::string& op);
OptionSpec variant_option();

// "host: <cpu model>, CPU features: ...[, masked by OPFORGE_CPU_FEATURES=... (hides ...)]":
// what variant selection sees on this machine.
std::string host_summary();

}  // namespace opforge::cli
