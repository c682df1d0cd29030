// opforge runtime: "did you mean" for misspelled op, argument and attr names, as the runtime's
// own messages suggest them (the CLI uses it for commands and options too).
#pragma once

#include <string>
#include <vector>

namespace opforge {

// " (did you mean 'x'?)" for the closest candidate within edit distance 2 (or a third of
// the name), else "".
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace opforge
