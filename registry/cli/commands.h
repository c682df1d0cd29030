// The opforge subcommands. Each declares its options once (CommandSpec): the parser and
// --help come from that declaration. Each returns the process exit code.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "registry/cli/args.h"

namespace opforge {
class Kernel;
class Registry;
namespace registry {
struct Descriptor;
}  // namespace registry
}  // namespace opforge

namespace opforge::cli {

struct Command {
  CommandSpec spec;
  int (*run)(const Args& args);
};

// Every subcommand, in --help order. Each is declared by its <name>_command(), next to its
// implementation (cmd_<name>.cpp; completion.cpp): options and help are written once there.
const std::vector<Command>& commands();

Command build_command();
Command list_command();
Command describe_command();
Command inspect_command();
Command diff_command();
Command report_command();
Command run_command();
Command bench_command();
Command profile_command();
Command check_command();
Command tune_command();
Command autoschedule_command();
Command new_command();
Command cache_command();
Command completion_command();

// An op's arguments and attrs, from its descriptor (for `opforge run OP --help`).
std::string op_help(const Args& a, const std::string& op);

// Options shared by several commands.
OptionSpec json_option();
// --unchecked-scalars: scalars outside their declared domains pass (set_scalar_checks(false)).
OptionSpec unchecked_scalars_option();
void apply_unchecked_scalars(const Args& a);
OptionSpec attr_option();  // --attr NAME=VALUE (repeatable)
OptionSpec isa_option();
OptionSpec registry_option();
OptionSpec cache_option();
std::string registry_dir(const Args& a);
std::string cache_dir(const Args& a);
// `dir`, when it does not exist or is a directory; a UsageError "WHAT DIR: not a directory"
// otherwise. For every directory option, checked before any work.
std::string checked_dir(const std::string& what, const std::string& dir);
// A UsageError "WHAT PATH: ..." unless PATH can be written as a file: not a directory, its
// directory made (make_dirs) and a file written and removed there; without make_dirs, its
// nearest existing ancestor a writable directory (a dry run changes nothing).
void check_writable_file(const std::string& what, const std::string& path, bool make_dirs);
// Where `opforge autoschedule` writes: the source tree's generators/schedules.
std::string default_schedules_dir();

// The kernel a command runs for `op`: --variant ID (any variant of the op by id, e.g. an
// autoscheduled "<id>__auto"; not with --attr/--isa), else select() by --attr and --isa.
Kernel& op_kernel(Registry& reg, const Args& a, const std::string& op);
OptionSpec variant_option();

// "host: <cpu model>, CPU features: ...[, masked by OPFORGE_CPU_FEATURES=... (hides ...)]":
// what variant selection sees on this machine.
std::string host_summary();
// The same as JSON, in every timing result: {"cpu_model", "cpu_features"[, "features_mask"]}.
nlohmann::json host_json();

// --scalar names must be scalar arguments of the op (with `extents`, also an input's extent,
// "NAME.extent.D", which inspect's schedule cases may depend on); a UsageError otherwise.
void check_scalar_names(const registry::Descriptor& d, const std::map<std::string, double>& given,
                        bool extents = false);

// Which params a variant was built with: "machine tuning <fingerprint> (family <f>)" from a
// tuning file (`opforge tune`), or "recipe defaults".
std::string tuning_text(const registry::Descriptor& d);

}  // namespace opforge::cli
