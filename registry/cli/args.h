// A small declarative option parser: each subcommand declares its options once (name,
// value name, help), and the same table parses argv and prints --help.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace opforge::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Ranges of the integer options several commands share.
inline constexpr int64_t kMaxThreads = 1024;  // --threads, --jobs

struct OptionSpec {
  std::string name;        // without "--"
  std::string value_name;  // "" for a flag
  std::string help;
  bool repeated = false;
  bool standalone = false;  // answers on its own, like --help: positionals become optional
};

struct CommandSpec {
  std::string name;
  std::string positional;  // e.g. "OP", "" for none
  std::string summary;
  std::vector<OptionSpec> options;
};

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;  // option -> values ("" for flags)
  bool has(const std::string& o) const { return values.count(o) > 0; }
  std::string get(const std::string& o, const std::string& def = "") const;
  const std::vector<std::string>& all(const std::string& o) const;
  int64_t get_int(const std::string& o, int64_t def) const;  // UsageError on bad numbers
  // The same, and a UsageError naming the range when a given value is outside [lo, hi].
  int64_t get_int(const std::string& o, int64_t def, int64_t lo, int64_t hi) const;
  // A UsageError when more than one of `names` is given (each asks for a different output).
  void at_most_one_of(const std::vector<const char*>& names) const;
};

// Parses argv[first..]; `--help` sets values["help"]. Throws UsageError naming the option.
Args parse(const CommandSpec& spec, int argc, char** argv, int first);
std::string help_text(const CommandSpec& spec);

// --attr NAME=VALUE ... as a map; UsageError for a malformed or repeated name.
std::map<std::string, std::string> attr_options(const Args& a);
// --scalar NAME=VALUE ... as numbers; UsageError for a malformed, repeated or non-numeric one.
std::map<std::string, double> scalar_options(const Args& a);

// Splits "NAME=VALUE"; UsageError naming `option` when malformed.
std::pair<std::string, std::string> split_assignment(const std::string& text,
                                                     const std::string& option);

}  // namespace opforge::cli
