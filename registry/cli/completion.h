// `opforge completion bash`: a bash completion script generated from the command table, the
// same declarations the parser and --help come from.
#pragma once

#include <string>
#include <vector>

#include "registry/cli/commands.h"

namespace opforge::cli {

std::string bash_completion(const std::vector<Command>& table);

}  // namespace opforge::cli
