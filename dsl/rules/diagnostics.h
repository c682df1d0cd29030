// Compiler-style diagnostics for the rule language: every error names FILE:LINE:COL, quotes the
// source line and puts a caret under the column, as gcc and clang do:
//
//   momentum.rule:9:9: error: unknown identifier 'bta'
//     m = bta * m + (1 - beta) * grad
//         ^
//     did you mean 'beta'?
//
// Only the first error is reported: the parser throws a RuleError at it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace opforge::dsl::rules {

// A position in a rule file: 1-based line and 1-based byte column (a tab is one column, as is
// each byte of a multi-byte UTF-8 character; the caret line still lines up, see render).
struct SourceLoc {
  int line = 0;
  int col = 0;
};

inline bool operator==(const SourceLoc& a, const SourceLoc& b) {
  return a.line == b.line && a.col == b.col;
}
inline bool operator!=(const SourceLoc& a, const SourceLoc& b) {
  return !(a == b);
}

// The first error in a rule file. what() is the whole rendered diagnostic (no trailing newline).
class RuleError : public std::runtime_error {
 public:
  RuleError(std::string file, int line, int col, std::string message, std::string suggestion,
            const std::string& rendered);

  std::string file;
  int line;
  int col;
  std::string message;     // without the "FILE:LINE:COL: error: " prefix
  std::string suggestion;  // the name in "did you mean 'x'?", or empty
};

// Renders `FILE:LINE:COL: error: MESSAGE`, the source line, the caret line and, when suggestion
// is not empty, `  did you mean 'SUGGESTION'?`, one per line, without a trailing newline.
// Bytes of the source line that are not printable (control characters, invalid UTF-8) are
// shown as '?'; tabs before the column are kept in the caret line so the caret lines up.
std::string render_diagnostic(const std::string& file, const std::string& text, SourceLoc loc,
                              const std::string& message, const std::string& suggestion = "");

// A rule file being parsed: its name and text, and the way to fail at a location in it.
class SourceFile {
 public:
  SourceFile(std::string name, const std::string& text) : name_(std::move(name)), text_(text) {}

  const std::string& name() const { return name_; }
  const std::string& text() const { return text_; }

  [[noreturn]] void fail(SourceLoc loc, const std::string& message,
                         const std::string& suggestion = "") const;

 private:
  std::string name_;
  const std::string& text_;
};

// Line `line` (1-based) of text without its '\n' (or "\r\n"); empty past the end.
std::string source_line(const std::string& text, int line);

// The UTF-8 sequence at s[i]: its length (1-4) with *code_point set, or 0 when the bytes there
// are not valid UTF-8 (truncated, overlong, surrogate, above U+10FFFF, stray continuation).
int decode_utf8(const std::string& s, size_t i, uint32_t* code_point);

// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
int edit_distance(const std::string& a, const std::string& b);

// The candidate closest to name within edit distance max_distance, first one on ties; empty if
// none is close enough. A candidate is never suggested when reaching it means replacing every
// character (so 'x' does not suggest 'm').
std::string closest_name(const std::string& name, const std::vector<std::string>& candidates,
                         int max_distance = 2);

}  // namespace opforge::dsl::rules
