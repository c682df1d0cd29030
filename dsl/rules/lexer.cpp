#include "dsl/rules/lexer.h"

#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace opforge::dsl::rules {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_ident_char(char c) {
  return is_ident_start(c) || is_digit(c);
}

std::string hex_byte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", b);
  return buf;
}

std::string code_point_name(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  return buf;
}

}  // namespace

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::end:
      return "end of file";
    case Tok::newline:
      return "end of line";
    case Tok::number:
      return "number '" + t.text + "'";
    case Tok::string:
      return "string \"" + t.text + "\"";
    default:
      return "'" + t.text + "'";
  }
}

void check_encoding(const SourceFile& src) {
  const std::string& t = src.text();
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < t.size();) {
    const SourceLoc loc{line, static_cast<int>(i - line_start) + 1};
    const auto byte = static_cast<unsigned char>(t[i]);
    uint32_t cp = 0;
    const int n = decode_utf8(t, i, &cp);
    if (n == 0) {
      src.fail(loc, "invalid UTF-8 byte " + hex_byte(byte) + ": a rule file must be UTF-8 text");
    }
    if (cp == 0) src.fail(loc, "NUL byte: a rule file must be text, not binary");
    if (cp == '\n') {
      ++line;
      line_start = i + 1;
    } else if (cp == '\r') {
      if (i + 1 >= t.size() || t[i + 1] != '\n') {
        src.fail(loc, "carriage return (U+000D) not followed by a newline");
      }
    } else if ((cp < 0x20 && cp != '\t') || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
      src.fail(loc, "control character " + code_point_name(cp) + ": a rule file must be text");
    }
    i += static_cast<size_t>(n);
  }
}

void Lexer::skip_blanks_and_comment() {
  while (pos_ < text_.size() &&
         (text_[pos_] == ' ' || text_[pos_] == '\t' ||
          (text_[pos_] == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n'))) {
    ++pos_;
  }
  if (pos_ < text_.size() && text_[pos_] == '#') {
    comment_start_ = pos_;
    while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
  }
}

Token Lexer::make(Tok kind, size_t length) {
  Token t;
  t.kind = kind;
  t.loc = here();
  t.text = text_.substr(pos_, length);
  pos_ += length;
  return t;
}

Token Lexer::next() {
  skip_blanks_and_comment();
  if (pos_ >= text_.size()) {
    Token t;
    t.kind = Tok::end;
    t.loc = here();
    if (comment_start_ != std::string::npos && comment_start_ >= line_start_ &&
        pos_ > line_start_) {
      t.loc.col = static_cast<int>(comment_start_ - line_start_) + 1;
    }
    // A file that ends with a newline: the end is at the end of its last line.
    if (pos_ > 0 && text_[pos_ - 1] == '\n') {
      t.loc = {line_ - 1, 1};
      const std::string last = source_line(text_, line_ - 1);
      t.loc.col = static_cast<int>(last.size()) + 1;
    }
    return t;
  }
  const char c = text_[pos_];
  const char c1 = pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0';
  if (c == '\n') {
    Token t;
    t.kind = Tok::newline;
    t.loc = here();
    // The line ends where its code does: at a comment, else at the "\r\n" or '\n'.
    if (comment_start_ != std::string::npos && comment_start_ >= line_start_) {
      t.loc.col = static_cast<int>(comment_start_ - line_start_) + 1;
    } else if (pos_ > line_start_ && text_[pos_ - 1] == '\r') {
      --t.loc.col;
    }
    t.text = "\n";
    ++pos_;
    ++line_;
    line_start_ = pos_;
    return t;
  }
  if (is_ident_start(c)) {
    size_t n = 1;
    while (pos_ + n < text_.size() && is_ident_char(text_[pos_ + n])) ++n;
    return make(Tok::ident, n);
  }
  if (is_digit(c) || (c == '.' && is_digit(c1))) return lex_number();
  if (c == '"') return lex_string();
  switch (c) {
    case '(':
      return make(Tok::lparen, 1);
    case ')':
      return make(Tok::rparen, 1);
    case ',':
      return make(Tok::comma, 1);
    case '[':
      return make(Tok::lbracket, 1);
    case ']':
      return make(Tok::rbracket, 1);
    case '+':
      return make(Tok::plus, 1);
    case '-':
      return make(Tok::minus, 1);
    case '*':
      return make(Tok::star, 1);
    case '/':
      return make(Tok::slash, 1);
    case '<':
      return c1 == '=' ? make(Tok::le, 2) : make(Tok::lt, 1);
    case '>':
      return c1 == '=' ? make(Tok::ge, 2) : make(Tok::gt, 1);
    case '=':
      return c1 == '=' ? make(Tok::eq, 2) : make(Tok::assign, 1);
    case '!':
      return c1 == '=' ? make(Tok::ne, 2) : make(Tok::bang, 1);
    case '&':
      if (c1 == '&') return make(Tok::and_and, 2);
      src_.fail(here(), "unexpected character '&'", "&&");
    case '|':
      return c1 == '|' ? make(Tok::or_or, 2) : make(Tok::bar, 1);
    default:
      break;
  }
  const auto b = static_cast<unsigned char>(c);
  if (b >= 0x80) {
    uint32_t cp = 0;
    decode_utf8(text_, pos_, &cp);  // valid: check_encoding ran first
    src_.fail(here(), "unexpected character " + code_point_name(cp) +
                          " (non-ASCII characters are allowed only in strings and comments)");
  }
  if (b < 0x20 || b == 0x7F) src_.fail(here(), "unexpected control character " + hex_byte(b));
  src_.fail(here(), std::string("unexpected character '") + c + "'");
}

Token Lexer::lex_number() {
  const size_t start = pos_;
  size_t j = pos_;
  bool ok = true;
  const auto digits = [&] {
    const size_t s = j;
    while (j < text_.size() && is_digit(text_[j])) ++j;
    return j - s;
  };
  digits();
  if (j < text_.size() && text_[j] == '.') {
    ++j;
    digits();
  }
  if (j < text_.size() && (text_[j] == 'e' || text_[j] == 'E')) {
    ++j;
    if (j < text_.size() && (text_[j] == '+' || text_[j] == '-')) ++j;
    if (digits() == 0) ok = false;
  }
  // A number runs into letters, digits or dots: 1.2.3, 0x10, 3rd, 1e5f.
  while (j < text_.size() && (is_ident_char(text_[j]) || text_[j] == '.')) {
    ok = false;
    ++j;
  }
  const std::string spelling = text_.substr(start, j - start);
  if (!ok) src_.fail(here(), "malformed number '" + spelling + "'");
  double value = 0;
  const auto r = std::from_chars(spelling.data(), spelling.data() + spelling.size(), value);
  if (r.ec == std::errc::result_out_of_range || !std::isfinite(value) || value > FLT_MAX) {
    src_.fail(here(), "number '" + spelling + "' is out of range for fp32");
  }
  if (r.ec != std::errc() || r.ptr != spelling.data() + spelling.size()) {
    src_.fail(here(), "malformed number '" + spelling + "'");
  }
  if (value != 0 && static_cast<float>(value) == 0.0f) {
    src_.fail(here(), "number '" + spelling + "' underflows to zero in fp32");
  }
  Token t = make(Tok::number, j - start);
  t.number = value;
  return t;
}

Token Lexer::lex_string() {
  size_t j = pos_ + 1;
  while (j < text_.size() && text_[j] != '"' && text_[j] != '\n') ++j;
  if (j >= text_.size() || text_[j] != '"') {
    src_.fail(here(), "unterminated string: a string ends with '\"' on the same line");
  }
  Token t = make(Tok::string, j + 1 - pos_);
  t.text = t.text.substr(1, t.text.size() - 2);
  return t;
}

Token Lexer::word() {
  skip_blanks_and_comment();
  if (pos_ >= text_.size() || text_[pos_] == '\n') return next();
  size_t n = 0;
  while (pos_ + n < text_.size()) {
    const char c = text_[pos_ + n];
    if (c == ' ' || c == '\t' || c == '\n' || c == '#' || c == '\r') break;
    ++n;
  }
  return make(Tok::ident, n);
}

}  // namespace opforge::dsl::rules
