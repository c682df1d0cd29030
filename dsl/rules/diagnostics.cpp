#include "dsl/rules/diagnostics.h"

#include <algorithm>

namespace opforge::dsl::rules {

RuleError::RuleError(std::string file_, int line_, int col_, std::string message_,
                     std::string suggestion_, const std::string& rendered)
    : std::runtime_error(rendered),
      file(std::move(file_)),
      line(line_),
      col(col_),
      message(std::move(message_)),
      suggestion(std::move(suggestion_)) {}

int decode_utf8(const std::string& s, size_t i, uint32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  int n;
  uint32_t cp, min;
  if (b0 < 0x80) {
    *code_point = b0;
    return 1;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;  // a continuation byte or 0xF8..0xFF
  }
  if (i + n > s.size()) return 0;
  for (int k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  *code_point = cp;
  return n;
}

std::string source_line(const std::string& text, int line) {
  size_t begin = 0;
  for (int l = 1; l < line; ++l) {
    begin = text.find('\n', begin);
    if (begin == std::string::npos) return "";
    ++begin;
  }
  size_t end = text.find('\n', begin);
  if (end == std::string::npos) end = text.size();
  if (end > begin && text[end - 1] == '\r') --end;
  return text.substr(begin, end - begin);
}

std::string render_diagnostic(const std::string& file, const std::string& text, SourceLoc loc,
                              const std::string& message, const std::string& suggestion) {
  std::string out = file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col) +
                    ": error: " + message + "\n";
  const std::string line = source_line(text, loc.line);
  std::string shown, caret;
  const size_t caret_at = loc.col > 0 ? static_cast<size_t>(loc.col - 1) : 0;
  for (size_t i = 0; i < line.size();) {
    uint32_t cp = 0;
    const int n = decode_utf8(line, i, &cp);
    const bool printable =
        n > 0 && (cp == '\t' || (cp >= 0x20 && cp != 0x7F && !(cp >= 0x80 && cp < 0xA0)));
    const size_t len = n > 0 ? static_cast<size_t>(n) : 1;
    if (printable) {
      shown.append(line, i, len);
    } else {
      shown += '?';
    }
    if (i < caret_at) caret += cp == '\t' && n == 1 ? '\t' : ' ';
    i += len;
  }
  // A column past the end of the line (an error at the end of a line): pad with spaces.
  if (caret_at > line.size()) caret.append(caret_at - line.size(), ' ');
  out += shown + "\n" + caret + "^";
  if (!suggestion.empty()) out += "\n  did you mean '" + suggestion + "'?";
  return out;
}

void SourceFile::fail(SourceLoc loc, const std::string& message,
                      const std::string& suggestion) const {
  throw RuleError(name_, loc.line, loc.col, message, suggestion,
                  render_diagnostic(name_, text_, loc, message, suggestion));
}

int edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string closest_name(const std::string& name, const std::vector<std::string>& candidates,
                         int max_distance) {
  // Long garbage words never come close; skip the quadratic work for them.
  if (name.size() > 128) return "";
  std::string best;
  int best_distance = max_distance + 1;
  for (const std::string& c : candidates) {
    if (c == name || c.size() > 128) continue;
    const int d = edit_distance(name, c);
    if (d < best_distance && d < static_cast<int>(std::max(name.size(), c.size()))) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace opforge::dsl::rules
