// The JSON plumbing shared by the descriptor and index formats (see format_json.h).
#include "registry/format/format_json.h"

#include <utility>

namespace opforge::registry::detail {

namespace {

// One reference token of a JSON pointer (RFC 6901): '~' -> "~0", '/' -> "~1".
std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Parsing text: syntax errors with line:col, duplicate keys rejected.

struct Position {
  size_t line = 1;
  size_t col = 1;
};

// nlohmann's parse_error::byte counts the characters read, the offending one included.
Position position_of(const std::string& text, size_t byte) {
  size_t offset = byte == 0 ? 0 : byte - 1;
  if (offset > text.size()) offset = text.size();
  Position p;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++p.line;
      line_start = i + 1;
    }
  }
  p.col = offset - line_start + 1;
  return p;
}

// "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..." ->
// "syntax error ...".
std::string parse_error_detail(const std::string& what) {
  size_t bracket = what.find("] ");
  size_t start = bracket == std::string::npos ? 0 : bracket + 2;
  size_t colon = what.find(": ", start);
  return colon == std::string::npos ? what.substr(start) : what.substr(colon + 2);
}

// Descriptors and indexes nest a few levels; an index nested 100,000 deep took 10 GB and 44 s.
constexpr int kMaxDepth = 64;

// Tracks where the parser is, to name the pointer of a duplicated object key, and refuses
// nesting deeper than kMaxDepth before it is built.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(std::string origin) : origin_(std::move(origin)) {}

  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (frames_.size() >= static_cast<size_t>(kMaxDepth)) {
          fail(origin_, frames_.back().pointer,
               "nested deeper than " + std::to_string(kMaxDepth) + " levels");
        }
        push(event == json::parse_event_t::array_start);
        break;
      case json::parse_event_t::key:
        key(parsed.get<std::string>());
        break;
      case json::parse_event_t::value:
        next_element();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        next_element();
        break;
    }
    return true;
  }

 private:
  void key(const std::string& k) {
    Frame& f = frames_.back();
    if (!f.keys.insert(k).second) fail(origin_, child(f.pointer, k), "duplicate key " + quote(k));
    f.key = k;
  }

  struct Frame {
    bool array = false;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
    std::string pointer;
  };

  void push(bool array) {
    Frame f;
    f.array = array;
    if (!frames_.empty()) {
      const Frame& parent = frames_.back();
      f.pointer =
          parent.array ? child(parent.pointer, parent.index) : child(parent.pointer, parent.key);
    }
    frames_.push_back(std::move(f));
  }

  void next_element() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }

  std::string origin_;
  std::vector<Frame> frames_;
};

}  // namespace

std::string quote(const std::string& s) {
  return "\"" + s + "\"";
}

std::string child(const std::string& ptr, const std::string& key) {
  return ptr + "/" + pointer_token(key);
}

std::string child(const std::string& ptr, size_t index) {
  return ptr + "/" + std::to_string(index);
}

[[noreturn]] void fail(const std::string& origin, const std::string& ptr, const std::string& what) {
  throw FormatError(origin + ": " + (ptr.empty() ? "(root)" : ptr) + ": " + what);
}

json parse_text(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text, DuplicateKeyCheck(origin));
  } catch (const json::parse_error& e) {
    Position p = position_of(text, e.byte);
    throw FormatError(origin + ":" + std::to_string(p.line) + ":" + std::to_string(p.col) +
                      ": JSON syntax error: " + parse_error_detail(e.what()));
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    throw FormatError(origin + ": JSON error: " + parse_error_detail(e.what()));
  }
}

std::string dump(const ojson& j, const std::string& origin) {
  try {
    return j.dump(2) + "\n";
  } catch (const ojson::exception& e) {  // invalid UTF-8 in a string
    throw FormatError(origin + ": cannot write JSON: " + parse_error_detail(e.what()));
  }
}

std::vector<std::string> string_array(const std::string& origin, const json& a,
                                      const std::string& ptr) {
  std::vector<std::string> out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_string()) {
      fail(origin, child(ptr, i), std::string("expected string, got ") + a[i].type_name());
    }
    out.push_back(a[i].get<std::string>());
  }
  return out;
}

std::map<std::string, std::string> string_map(const std::string& origin, const json& j,
                                              const std::string& ptr,
                                              bool (*key_ok)(const std::string&)) {
  if (!key_ok) key_ok = is_valid_identifier;
  if (!j.is_object()) fail(origin, ptr, std::string("expected object, got ") + j.type_name());
  std::map<std::string, std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string p = child(ptr, it.key());
    if (!key_ok(it.key())) fail(origin, p, quote(it.key()) + " is not a valid name");
    if (!it->is_string()) fail(origin, p, std::string("expected string, got ") + it->type_name());
    out[it.key()] = it->get<std::string>();
  }
  return out;
}

void check_schema(Obj& o, const char* expected) {
  std::string s = o.str("schema");
  if (s != expected) {
    o.fail_at("schema", "unsupported schema " + quote(s) + " (expected " + quote(expected) + ")");
  }
}

std::string checked_name(Obj& o, const std::string& key, bool (*valid)(const std::string&),
                         const char* what) {
  std::string s = o.str(key);
  if (!valid(s)) o.fail_at(key, quote(s) + " is not a valid " + what);
  return s;
}

std::string opt_sha256(Obj& o, const std::string& key) {
  if (!o.field(key, false)) return "";
  std::string s = o.str(key);
  if (!is_sha256_hex(s)) o.fail_at(key, "expected 64 lowercase hex digits");
  return s;
}

std::string ident(Obj& o, const std::string& key) {
  return checked_name(o, key, is_valid_identifier, "identifier ([A-Za-z_][A-Za-z0-9_]*, 1..128)");
}

std::string safe_path(Obj& o, const std::string& key) {
  return checked_name(o, key, is_safe_relative_path, "relative path inside the registry");
}

DType dtype_field(Obj& o, const std::string& key) {
  return enum_field(o, key, "dtype", kDTypes, kDTypeNames);
}

}  // namespace opforge::registry::detail
