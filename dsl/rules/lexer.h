// The rule language's lexer: tokens on demand, one line at a time (newlines are tokens: the
// language is line-oriented). Comments run from '#' to the end of the line.
#pragma once

#include <string>

#include "dsl/rules/diagnostics.h"

namespace opforge::dsl::rules {

enum class Tok {
  end,
  newline,
  ident,
  number,
  string,
  lparen,
  rparen,
  comma,
  assign,
  plus,
  minus,
  star,
  slash,
  lt,
  le,
  gt,
  ge,
  eq,
  ne,
  and_and,
  or_or,
  bang,
  bar,       // '|' between an attr's choices
  lbracket,  // '[' and ']': a hyper's domain, `in [0, 1)`
  rbracket,
};

struct Token {
  Tok kind = Tok::end;
  std::string text;   // the spelling; a string's contents without the quotes
  double number = 0;  // Tok::number: the value (finite, representable in fp32)
  SourceLoc loc;
};

// How a token is named in messages: 'x', number '0.5', string "abc", end of line, end of file.
std::string describe(const Token& t);

// Fails at the first byte that is not text: a NUL, invalid UTF-8, or a control character
// other than tab, newline and the '\r' of "\r\n".
void check_encoding(const SourceFile& src);

class Lexer {
 public:
  explicit Lexer(const SourceFile& src) : src_(src), text_(src.text()) {}

  // The next token; fails on a malformed number, an unterminated string or a stray character.
  Token next();

  // The next whitespace-delimited word, whatever its characters (up to a blank or '#'), as a
  // Tok::ident; Tok::newline or Tok::end when the line has none. For the optimizer's name, so
  // that "9adam" or "sgd-momentum" is reported as a bad name, not as a bad number or a '-'.
  Token word();

 private:
  SourceLoc here() const { return {line_, static_cast<int>(pos_ - line_start_) + 1}; }
  void skip_blanks_and_comment();
  Token make(Tok kind, size_t length);
  Token lex_number();
  Token lex_string();

  const SourceFile& src_;
  const std::string& text_;
  size_t pos_ = 0;
  size_t line_start_ = 0;
  int line_ = 1;
  size_t comment_start_ = std::string::npos;  // of a comment that ends the current line
};

}  // namespace opforge::dsl::rules
