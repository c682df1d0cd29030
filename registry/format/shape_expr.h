// Shape expressions: the output dims, checks and algorithm conditions of NN op descriptors.
//
//   (H + 2*pad_h - dilation_h*(KH - 1) - 1) / stride_h + 1
//   KH == 3 && KW == 3 && stride_h == 1 && groups == 1
//
// Integers, names (dims, int/bool scalars and attrs; true/false), + - * / % with Halide's
// integer semantics (division and modulo round toward minus infinity; x / 0 and x % 0 are
// errors here, not 0), unary - and !, comparisons (1 or 0), && ||, min(a, b), max(a, b) and
// parentheses. Standard library only: the runtime evaluates these without libHalide.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

namespace opforge::registry {

struct ShapeExprError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ShapeExpr {
 public:
  // Throws ShapeExprError "<text>: col N: <what>" for malformed text.
  static ShapeExpr parse(const std::string& text);
  ShapeExpr() = default;

  const std::string& text() const { return text_; }
  // Every name the expression reads.
  std::set<std::string> names() const;
  // Value with these bindings; nullopt when a name is unbound. Throws ShapeExprError on
  // division by zero or int64 overflow, naming the expression.
  std::optional<int64_t> evaluate(const std::map<std::string, int64_t>& env) const;

  struct Node;

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace opforge::registry
