// NumPy .npy reader/writer. See opforge/npy.hpp for the contract.
//
// Format reference (numpy/lib/format.py):
//   magic "\x93NUMPY", u8 major, u8 minor,
//   header length: u16 LE for 1.0, u32 LE for 2.0 / 3.0,
//   header: a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), }
//           padded with spaces and terminated by '\n',
//   then the raw array data.
#include "opforge/npy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "registry/format/atomic_write.h"
#include "registry/format/bounded_read.h"

namespace opforge::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// Largest accepted dimension and largest accepted data size (1 TiB).
constexpr int64_t kMaxDim = int64_t{1} << 62;
constexpr int64_t kMaxDataBytes = int64_t{1} << 40;
// NumPy aligns the start of the data to this many bytes.
constexpr size_t kAlign = 64;

const char* const kSupported =
    "'<f2', '<f4', '<f8', '<i4', '<i8', '<u2', '|u1', '|b1', and '<V2'/'|V2' (ml_dtypes bfloat16)";

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw NpyError(origin + ": " + what);
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

std::string shape_repr(const std::vector<int64_t>& shape) {
  // Python's repr of a tuple: (), (3,), (2, 3)
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";
  out += ")";
  return out;
}

// Canonical descr and item size for a supported descr; returns false otherwise.
// Byte order is irrelevant for the 1-byte types, so any byte-order character is accepted
// there and normalized to '|' (as numpy's dtype.str does). Multi-byte types must be '<'.
bool lookup_descr(const std::string& descr, std::string* canonical, int* size) {
  if (descr.size() != 3) return false;
  const char order = descr[0];
  const std::string kind = descr.substr(1);
  if (kind == "u1" || kind == "b1") {
    if (order != '<' && order != '>' && order != '=' && order != '|') return false;
    if (canonical) *canonical = "|" + kind;
    if (size) *size = 1;
    return true;
  }
  // ml_dtypes' bfloat16 registers with numpy as kind 'V', so np.save writes its dtype.str
  // '<V2'; numpy's own 2-byte void is '|V2'. Both are kept as written.
  if (kind == "V2") {
    if (order != '<' && order != '|') return false;
    if (canonical) *canonical = descr;
    if (size) *size = 2;
    return true;
  }
  if (order != '<') return false;
  int n = 0;
  if (kind == "f2" || kind == "u2") {
    n = 2;
  } else if (kind == "f4" || kind == "i4") {
    n = 4;
  } else if (kind == "f8" || kind == "i8") {
    n = 8;
  } else {
    return false;
  }
  if (canonical) *canonical = descr;
  if (size) *size = n;
  return true;
}

// Validates `descr` and returns {canonical descr, item size}, or throws a helpful error.
std::pair<std::string, int> check_descr(const std::string& descr, const std::string& origin) {
  std::string canonical;
  int size = 0;
  if (lookup_descr(descr, &canonical, &size)) return {canonical, size};
  if (descr.size() >= 2 && descr[0] == '>') {
    fail(origin, "big-endian dtype " + quoted(descr) +
                     " is not supported; save little-endian data (e.g. a.astype('<" +
                     descr.substr(1) + "'))");
  }
  if (descr.size() >= 2 && descr[0] == '=') {
    fail(origin, "native byte order in dtype " + quoted(descr) +
                     " is ambiguous for multi-byte types; expected explicit '<'");
  }
  fail(origin, "unsupported dtype descr " + quoted(descr) +
                   " (supported: " + std::string(kSupported) + ")");
}

// Product of the dimensions with overflow and size guards; throws on bad shapes.
int64_t checked_elements(const std::vector<int64_t>& shape, int64_t item_size,
                         const std::string& origin) {
  for (int64_t d : shape) {
    if (d < 0) fail(origin, "negative dimension " + std::to_string(d) + " in shape");
    if (d > kMaxDim) fail(origin, "dimension " + std::to_string(d) + " is too large");
  }
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  const int64_t limit = kMaxDataBytes / item_size;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (n > limit / d) {
      fail(origin, "shape " + shape_repr(shape) + " is too large (more than " +
                       std::to_string(kMaxDataBytes) + " bytes of data)");
    }
    n *= d;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Header dict parser: {'key': value, ...} where value is a string, True/False, an integer or a
// tuple of non-negative integers. Whitespace (incl. newlines) is allowed between tokens.

struct Value {
  enum Kind { kString, kBool, kInt, kTuple } kind = kString;
  std::string str;
  bool boolean = false;
  int64_t integer = 0;
  std::vector<int64_t> tuple;
};

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::kString:
      return "a string";
    case Value::kBool:
      return "a boolean";
    case Value::kInt:
      return "an integer";
    case Value::kTuple:
      return "a tuple";
  }
  return "?";
}

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& origin) : s_(text), origin_(origin) {}

  std::vector<std::pair<std::string, Value>> parse_dict() {
    std::vector<std::pair<std::string, Value>> items;
    skip_ws();
    if (at_end() || s_[pos_] != '{') error("expected '{' at the start of the header");
    ++pos_;
    for (;;) {
      skip_ws();
      if (at_end()) error("unterminated dict (missing '}')");
      if (s_[pos_] == '}') {
        ++pos_;
        break;
      }
      if (s_[pos_] != '\'' && s_[pos_] != '"') error("expected a string key or '}'");
      std::string key = parse_string();
      for (const auto& kv : items) {
        if (kv.first == key) error("duplicate key " + quoted(key));
      }
      skip_ws();
      expect(':', "after key " + quoted(key));
      skip_ws();
      Value v = parse_value(key);
      items.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (at_end()) error("unterminated dict (missing '}')");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        break;
      }
      error("expected ',' or '}' after the value of " + quoted(items.back().first));
    }
    skip_ws();
    if (!at_end()) error("unexpected characters after the closing '}'");
    return items;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    std::string where = at_end() ? std::string("end of header")
                                 : "header offset " + std::to_string(pos_) + " (near " +
                                       describe_char(s_[pos_]) + ")";
    fail(origin_, "malformed header: " + what + " at " + where);
  }

  static std::string describe_char(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", u);
    return buf;
  }

  bool at_end() const { return pos_ >= s_.size(); }

  void skip_ws() {
    while (!at_end()) {
      const char c = s_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') break;
      ++pos_;
    }
  }

  void expect(char c, const std::string& context) {
    if (at_end() || s_[pos_] != c) error(std::string("expected '") + c + "' " + context);
    ++pos_;
  }

  // A Python string literal in single or double quotes; only \\, \' and \" escapes.
  std::string parse_string() {
    const size_t start = pos_;
    const char quote = s_[pos_++];
    std::string out;
    for (;;) {
      if (at_end() || s_[pos_] == '\n') {
        pos_ = start;
        error("unterminated string literal");
      }
      const char c = s_[pos_++];
      if (c == quote) return out;
      if (c == '\\') {
        if (at_end()) {
          pos_ = start;
          error("unterminated string literal");
        }
        const char e = s_[pos_];
        if (e != '\\' && e != '\'' && e != '"') error("unsupported escape sequence in string");
        out += e;
        ++pos_;
        continue;
      }
      out += c;
    }
  }

  // A non-negative decimal integer (no sign, no leading zeros, at most 2^62).
  int64_t parse_int(const std::string& context) {
    if (at_end() || s_[pos_] < '0' || s_[pos_] > '9') {
      error("expected a non-negative integer " + context);
    }
    const size_t start = pos_;
    int64_t v = 0;
    bool too_large = false;
    while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const int digit = s_[pos_] - '0';
      if (!too_large && v > (kMaxDim - digit) / 10) too_large = true;
      if (!too_large) v = v * 10 + digit;
      ++pos_;
    }
    if (pos_ - start > 1 && s_[start] == '0') {
      pos_ = start;
      error("integer with leading zeros " + context);
    }
    if (too_large) {
      const std::string literal = s_.substr(start, pos_ - start);
      pos_ = start;
      error("integer " + literal + " is too large (limit 2^62) " + context);
    }
    if (!at_end() && (std::isalpha(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
      error("invalid integer literal " + context);
    }
    return v;
  }

  Value parse_value(const std::string& key) {
    const std::string context = "in the value of " + quoted(key);
    if (at_end()) error("expected a value " + context);
    const char c = s_[pos_];
    Value v;
    if (c == '\'' || c == '"') {
      v.kind = Value::kString;
      v.str = parse_string();
      return v;
    }
    if (c >= '0' && c <= '9') {
      v.kind = Value::kInt;
      v.integer = parse_int(context);
      return v;
    }
    if (c == '(') {
      ++pos_;
      skip_ws();
      if (!at_end() && s_[pos_] == ')') {  // ()
        ++pos_;
        v.kind = Value::kTuple;
        return v;
      }
      const std::string tctx = "in the tuple " + context;
      v.tuple.push_back(parse_int(tctx));
      skip_ws();
      if (!at_end() && s_[pos_] == ')') {  // (3) is just the integer 3 in Python
        ++pos_;
        v.kind = Value::kInt;
        v.integer = v.tuple.front();
        v.tuple.clear();
        return v;
      }
      v.kind = Value::kTuple;
      for (;;) {
        skip_ws();
        if (at_end()) error("unterminated tuple " + context);
        if (s_[pos_] == ')') {
          ++pos_;
          return v;
        }
        expect(',', "between tuple elements " + context);
        skip_ws();
        if (!at_end() && s_[pos_] == ')') {  // trailing comma
          ++pos_;
          return v;
        }
        v.tuple.push_back(parse_int(tctx));
      }
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = pos_;
      while (!at_end() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
        ++pos_;
      }
      const std::string word = s_.substr(start, pos_ - start);
      if (word == "True" || word == "False") {
        v.kind = Value::kBool;
        v.boolean = word == "True";
        return v;
      }
      pos_ = start;
      error("unsupported value " + quoted(word) + " " + context);
    }
    if (c == '[' && key == "descr") {
      error("structured dtypes (a list descr) are not supported " + context);
    }
    if (c == '-') error("negative numbers are not allowed " + context);
    error("unexpected character " + context);
  }

  const std::string& s_;
  const std::string& origin_;
  size_t pos_ = 0;
};

uint32_t read_le(const std::string& b, size_t off, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[off + i]);
  return v;
}

void append_le(std::string* out, uint32_t v, int n) {
  for (int i = 0; i < n; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string serialize_impl(const Array& a, const std::string& origin) {
  const auto [canonical, item] = check_descr(a.descr, origin);
  const int64_t n = checked_elements(a.shape, item, origin);
  const int64_t nbytes = n * item;
  if (static_cast<int64_t>(a.data.size()) != nbytes) {
    fail(origin, "data has " + std::to_string(a.data.size()) + " bytes but shape " +
                     shape_repr(a.shape) + " of " + quoted(canonical) + " needs " +
                     std::to_string(nbytes));
  }
  const std::string dict = "{'descr': " + quoted(canonical) +
                           ", 'fortran_order': False, 'shape': " + shape_repr(a.shape) + ", }";
  // Version 1.0 has a u16 header length (preamble 10 bytes); 2.0 a u32 (preamble 12 bytes).
  auto padded = [&](size_t preamble) {
    const size_t unpadded = preamble + dict.size() + 1;  // + '\n'
    const size_t total = (unpadded + kAlign - 1) / kAlign * kAlign;
    return dict + std::string(total - unpadded, ' ') + "\n";
  };
  std::string header = padded(10);
  int major = 1;
  if (header.size() > 0xffff) {
    header = padded(12);
    major = 2;
    if (header.size() > 0xffffffffu) fail(origin, "header too large");
  }
  std::string out;
  out.reserve(12 + header.size() + a.data.size());
  out.append(kMagic, kMagicLen);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  append_le(&out, static_cast<uint32_t>(header.size()), major == 1 ? 2 : 4);
  out += header;
  out.append(reinterpret_cast<const char*>(a.data.data()), a.data.size());
  return out;
}

}  // namespace

int64_t Array::elements() const {
  return checked_elements(shape, item_size(), "npy::Array");
}

int Array::item_size() const {
  return check_descr(descr, "npy::Array").second;
}

Array parse(const std::string& bytes, const std::string& origin) {
  if (bytes.size() < kMagicLen || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0) {
    fail(origin, "not a .npy file (bad magic; expected \\x93NUMPY)");
  }
  if (bytes.size() < kMagicLen + 2) fail(origin, "truncated: file ends inside the version");
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  size_t len_size = 0;
  if (major == 1 && minor == 0) {
    len_size = 2;
  } else if ((major == 2 || major == 3) && minor == 0) {
    len_size = 4;
  } else {
    fail(origin, "unsupported .npy format version " + std::to_string(major) + "." +
                     std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  }
  const size_t preamble = kMagicLen + 2 + len_size;
  if (bytes.size() < preamble) fail(origin, "truncated: file ends inside the header length");
  const size_t header_len = read_le(bytes, kMagicLen + 2, static_cast<int>(len_size));
  if (header_len > bytes.size() - preamble) {
    fail(origin, "header length " + std::to_string(header_len) + " exceeds the " +
                     std::to_string(bytes.size() - preamble) +
                     " bytes remaining in the file after the preamble");
  }
  const std::string header = bytes.substr(preamble, header_len);

  HeaderParser parser(header, origin);
  const auto items = parser.parse_dict();
  const Value* descr = nullptr;
  const Value* fortran = nullptr;
  const Value* shape = nullptr;
  for (const auto& kv : items) {
    if (kv.first == "descr") {
      descr = &kv.second;
    } else if (kv.first == "fortran_order") {
      fortran = &kv.second;
    } else if (kv.first == "shape") {
      shape = &kv.second;
    } else {
      fail(origin, "malformed header: unexpected key " + quoted(kv.first) +
                       " (expected exactly 'descr', 'fortran_order', 'shape')");
    }
  }
  if (!descr) fail(origin, "malformed header: missing key 'descr'");
  if (!fortran) fail(origin, "malformed header: missing key 'fortran_order'");
  if (!shape) fail(origin, "malformed header: missing key 'shape'");
  if (descr->kind != Value::kString) {
    fail(origin, std::string("malformed header: 'descr' must be a string, found ") +
                     kind_name(descr->kind));
  }
  if (fortran->kind != Value::kBool) {
    fail(origin, std::string("malformed header: 'fortran_order' must be True or False, found ") +
                     kind_name(fortran->kind));
  }
  if (shape->kind != Value::kTuple) {
    std::string what =
        std::string("malformed header: 'shape' must be a tuple, found ") + kind_name(shape->kind);
    if (shape->kind == Value::kInt) {
      what += " (a 1-d shape is written (" + std::to_string(shape->integer) + ",))";
    }
    fail(origin, what);
  }

  const auto [canonical, item] = check_descr(descr->str, origin);
  if (fortran->boolean) {
    fail(origin, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
  }
  const int64_t n = checked_elements(shape->tuple, item, origin);
  const uint64_t expected = static_cast<uint64_t>(n) * static_cast<uint64_t>(item);
  const size_t data_off = preamble + header_len;
  const uint64_t found = bytes.size() - data_off;
  if (found < expected) {
    fail(origin, "truncated: expected " + std::to_string(expected) + " bytes of data, found " +
                     std::to_string(found));
  }
  if (found > expected) {
    fail(origin, "trailing data: expected " + std::to_string(expected) + " bytes of data, found " +
                     std::to_string(found) + " (" + std::to_string(found - expected) +
                     " extra bytes)");
  }

  Array a;
  a.descr = canonical;
  a.shape = shape->tuple;
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data_off), bytes.end());
  return a;
}

Array read(const std::string& path) {
  std::string bytes;
  try {
    // Regular files only: /dev/zero grew without bound, a FIFO blocked.
    bytes = registry::read_regular_file(path, registry::kNpyLimits);
  } catch (const std::runtime_error& e) {
    throw NpyError(e.what());  // "PATH: what is wrong[: reason]"
  }
  return parse(bytes, path);
}

std::string serialize(const Array& a) {
  return serialize_impl(a, "npy::serialize");
}

void write_atomic(const std::string& path, const Array& a) {
  const std::string bytes = serialize_impl(a, path);  // validate before touching the disk
  try {
    registry::write_file_atomic(path, bytes);  // the mode of the file replaced, else umask's
  } catch (const std::runtime_error& e) {
    throw NpyError(e.what());  // "PATH: what failed: reason"
  }
}

Array from_f32(const std::vector<float>& v, std::vector<int64_t> shape) {
  Array a;
  a.descr = "<f4";
  a.shape = std::move(shape);
  const int64_t n = checked_elements(a.shape, 4, "npy::from_f32");
  if (n != static_cast<int64_t>(v.size())) {
    fail("npy::from_f32", "shape " + shape_repr(a.shape) + " has " + std::to_string(n) +
                              " elements but " + std::to_string(v.size()) + " values were given");
  }
  a.data.resize(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v[i], 4);
    for (int b = 0; b < 4; ++b) a.data[4 * i + b] = static_cast<uint8_t>((bits >> (8 * b)) & 0xff);
  }
  return a;
}

std::vector<float> to_f32(const Array& a, const std::string& origin) {
  if (a.descr != "<f4") {
    fail(origin, "expected dtype '<f4' (float32), found " + quoted(a.descr));
  }
  const int64_t n = checked_elements(a.shape, 4, origin);
  if (static_cast<int64_t>(a.data.size()) != n * 4) {
    fail(origin, "data has " + std::to_string(a.data.size()) + " bytes but shape " +
                     shape_repr(a.shape) + " needs " + std::to_string(n * 4));
  }
  std::vector<float> out(static_cast<size_t>(n));
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits = 0;
    for (int b = 3; b >= 0; --b) bits = (bits << 8) | a.data[4 * i + b];
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

}  // namespace opforge::npy
