// libFuzzer target for the rule-language parser (dsl/rules/).
//
// Every input is parsed as a rule file. A RuleError is the expected way to reject bad input;
// any other exception (it escapes, and libFuzzer reports it) or crash is a bug. When an input
// parses, canonical_rule_text must round-trip: the canonical text parses again and prints back
// to the same text; the target aborts (with both texts on stderr) otherwise.
//
// Built with clang++-14 -fsanitize=fuzzer,address,undefined by tests/CMakeLists.txt when clang
// and libFuzzer are installed; seed corpus: tests/dsl/rules/corpus/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dsl/rules/diagnostics.h"
#include "dsl/rules/rule_parser.h"

namespace rules = opforge::dsl::rules;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  rules::Rule rule;
  try {
    rule = rules::parse_rule(text, "fuzz.rule");
  } catch (const rules::RuleError&) {
    return 0;  // rejected with a diagnostic: fine
  }

  const std::string canonical = rules::canonical_rule_text(rule);
  std::string again;
  try {
    again = rules::canonical_rule_text(rules::parse_rule(canonical, "canonical.rule"));
  } catch (const rules::RuleError& e) {
    std::fprintf(stderr, "canonical text does not parse back:\n%s\n--- canonical text ---\n%s\n",
                 e.what(), canonical.c_str());
    std::abort();
  }
  if (again != canonical) {
    std::fprintf(stderr,
                 "canonical text is not a fixed point\n--- first ---\n%s\n--- second ---\n%s\n",
                 canonical.c_str(), again.c_str());
    std::abort();
  }
  return 0;
}
