#include "registry/format/shape_expr.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace opforge::registry {

// op: 'n' number, 'v' name, '~' negate, '!' not, else a binary operator ("+", "==", "min", ...).
struct ShapeExpr::Node {
  std::string op;
  int64_t value = 0;
  std::string name;
  std::vector<std::shared_ptr<const Node>> kids;
  int height = 0;  // edges on the longest path down to a leaf
};

namespace {

// Deeper expressions are rejected (nesting of parentheses, min/max and unary operators while
// parsing; the tree's height after), so that parsing, evaluating and destroying one, all
// recursive, stay shallow whatever the text: the descriptors' longest is under 20 levels.
constexpr int kMaxDepth = 100;

using NodeP = std::shared_ptr<const ShapeExpr::Node>;

// Recursive descent, lowest precedence first: || && (== !=) (< <= > >=) (+ -) (* / %) unary.
class Parser {
 public:
  explicit Parser(const std::string& t) : t_(t) {}

  NodeP parse() {
    NodeP e = binary(0);
    skip();
    if (p_ != t_.size()) fail("unexpected '" + std::string(1, t_[p_]) + "'");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(p_, what); }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    throw ShapeExprError("shape expression \"" + t_ + "\": col " + std::to_string(at + 1) + ": " +
                         what);
  }
  [[noreturn]] void too_deep(size_t at) const {
    fail_at(at, "nested too deeply (more than " + std::to_string(kMaxDepth) + " levels)");
  }
  // One level of nesting, from the character at `at` (a '(', min/max, '-' or '!') until the
  // guard goes out of scope.
  struct Nested {
    Nested(Parser& p, size_t at) : p(p) {
      if (++p.depth_ > kMaxDepth) p.too_deep(at);
    }
    ~Nested() { --p.depth_; }
    Parser& p;
  };
  void skip() {
    while (p_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[p_]))) ++p_;
  }
  bool eat(const std::string& s) {
    skip();
    if (t_.compare(p_, s.size(), s) != 0) return false;
    // "<" must not eat the start of "<=", "=" is not an operator on its own, "&" needs "&&".
    p_ += s.size();
    return true;
  }
  // `at`: where the operator is, for the error when the tree grows too high ("1+1+...+1").
  NodeP make(std::string op, std::vector<NodeP> kids, size_t at) const {
    auto n = std::make_shared<ShapeExpr::Node>();
    n->op = std::move(op);
    n->kids = std::move(kids);
    for (const auto& k : n->kids) n->height = std::max(n->height, k->height + 1);
    if (n->height > kMaxDepth) too_deep(at);
    return n;
  }

  NodeP binary(int level) {
    static const std::vector<std::vector<std::string>> levels = {
        {"||"}, {"&&"}, {"==", "!="}, {"<=", ">=", "<", ">"}, {"+", "-"}, {"*", "/", "%"}};
    if (level == static_cast<int>(levels.size())) return unary();
    NodeP lhs = binary(level + 1);
    for (;;) {
      skip();
      const size_t at = p_;
      std::string matched;
      for (const auto& op : levels[level]) {
        if (eat(op)) {
          matched = op;
          break;
        }
      }
      if (matched.empty()) return lhs;
      lhs = make(matched, {lhs, binary(level + 1)}, at);
    }
  }

  NodeP unary() {
    skip();
    const size_t at = p_;
    if (eat("-")) {
      Nested guard(*this, at);
      return make("~", {unary()}, at);
    }
    if (eat("!")) {
      skip();
      if (p_ < t_.size() && t_[p_] == '=') fail("unexpected '='");
      Nested guard(*this, at);
      return make("!", {unary()}, at);
    }
    return primary();
  }

  NodeP primary() {
    skip();
    if (p_ >= t_.size()) fail("expression ends too early");
    const char c = t_[p_];
    if (c == '(') {
      Nested guard(*this, p_);
      ++p_;
      NodeP e = binary(0);
      if (!eat(")")) fail("expected ')'");
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      auto n = std::make_shared<ShapeExpr::Node>();
      n->op = "n";
      while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) {
        if (__builtin_mul_overflow(n->value, 10, &n->value) ||
            __builtin_add_overflow(n->value, t_[p_] - '0', &n->value))
          fail("number too large");
        ++p_;
      }
      return n;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t at = p_;
      std::string name;
      while (p_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_'))
        name += t_[p_++];
      if (name == "min" || name == "max") {
        Nested guard(*this, at);
        if (!eat("(")) fail("expected '(' after " + name);
        NodeP a = binary(0);
        if (!eat(",")) fail("expected ',' in " + name + "(a, b)");
        NodeP b = binary(0);
        if (!eat(")")) fail("expected ')' after " + name + "(a, b");
        return make(name, {a, b}, at);
      }
      auto n = std::make_shared<ShapeExpr::Node>();
      if (name == "true" || name == "false") {
        n->op = "n";
        n->value = name == "true";
      } else {
        n->op = "v";
        n->name = name;
      }
      return n;
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  const std::string& t_;
  size_t p_ = 0;
  int depth_ = 0;
};

void collect(const ShapeExpr::Node& n, std::set<std::string>& out) {
  if (n.op == "v") out.insert(n.name);
  for (const auto& k : n.kids) collect(*k, out);
}

// Halide's division and modulo (toward minus infinity) for b other than 0 and -1, where
// neither overflows: a % b is formed from C's remainder, not as a - q * b (which overflows for
// a near INT64_MIN: INT64_MIN % 3).
int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

}  // namespace

ShapeExpr ShapeExpr::parse(const std::string& text) {
  ShapeExpr e;
  e.text_ = text;
  e.root_ = Parser(text).parse();
  return e;
}

std::set<std::string> ShapeExpr::names() const {
  std::set<std::string> out;
  if (root_) collect(*root_, out);
  return out;
}

std::optional<int64_t> ShapeExpr::evaluate(const std::map<std::string, int64_t>& env) const {
  if (!root_) return std::nullopt;
  const std::string& text = text_;
  std::function<std::optional<int64_t>(const Node&)> ev =
      [&](const Node& n) -> std::optional<int64_t> {
    if (n.op == "n") return n.value;
    if (n.op == "v") {
      auto it = env.find(n.name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    }
    auto overflow = [&] { throw ShapeExprError("shape expression \"" + text + "\" overflows"); };
    auto a = ev(*n.kids[0]);
    if (n.op == "~") {
      if (!a) return a;
      int64_t r = 0;
      if (__builtin_sub_overflow(int64_t{0}, *a, &r)) overflow();  // -INT64_MIN
      return r;
    }
    if (n.op == "!") {
      if (!a) return a;
      return int64_t(*a == 0);
    }
    // Short-circuit like C: false && unknown is false.
    if (n.op == "&&" && a && *a == 0) return 0;
    if (n.op == "||" && a && *a != 0) return 1;
    auto b = ev(*n.kids[1]);
    if (n.op == "&&") {
      if (b && *b == 0) return 0;
      if (!a || !b) return std::nullopt;
      return 1;
    }
    if (n.op == "||") {
      if (b && *b != 0) return 1;
      if (!a || !b) return std::nullopt;
      return 0;
    }
    if (!a || !b) return std::nullopt;
    int64_t r = 0;
    const std::string& op = n.op;
    if (op == "+") {
      if (__builtin_add_overflow(*a, *b, &r)) overflow();
    } else if (op == "-") {
      if (__builtin_sub_overflow(*a, *b, &r)) overflow();
    } else if (op == "*") {
      if (__builtin_mul_overflow(*a, *b, &r)) overflow();
    } else if (op == "/" || op == "%") {
      if (*b == 0) throw ShapeExprError("shape expression \"" + text + "\" divides by zero");
      if (*b == -1) {  // C's INT64_MIN / -1 and INT64_MIN % -1 are undefined
        if (op == "%") {
          r = 0;
        } else if (__builtin_sub_overflow(int64_t{0}, *a, &r)) {
          overflow();
        }
      } else {
        r = op == "/" ? floor_div(*a, *b) : floor_mod(*a, *b);
      }
    } else if (op == "min") {
      r = std::min(*a, *b);
    } else if (op == "max") {
      r = std::max(*a, *b);
    } else if (op == "==") {
      r = *a == *b;
    } else if (op == "!=") {
      r = *a != *b;
    } else if (op == "<") {
      r = *a < *b;
    } else if (op == "<=") {
      r = *a <= *b;
    } else if (op == ">") {
      r = *a > *b;
    } else if (op == ">=") {
      r = *a >= *b;
    }
    return r;
  };
  return ev(*root_);
}

}  // namespace opforge::registry
