// The AST of a rule file: an optimizer written in the rule language (see rule_parser.h).
//
//   optimizer sign_sqrt_momentum
//     state var, m
//     input grad
//     hyper lr = 0.01        "learning rate"
//     attr  nesterov = false "use Nesterov look-ahead"
//     let   g = sign(grad) * sqrt(abs(grad))
//     m   = 0.9 * m + g
//     var = var - lr * select(nesterov, 0.9 * m + g, m)
//
// A parsed Rule is checked: every name is declared before use and resolved to its category,
// every state is updated exactly once, every expression is well typed (numbers vs booleans).
// Updates are simultaneous assignments: every update reads the OLD values of the states.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dsl/rules/diagnostics.h"

namespace opforge::dsl::rules {

// What a name in an expression refers to.
enum class NameKind { state, input, hyper, attr, let };

// Every expression is a number (fp32 in the kernels) or a boolean.
// choice: a choice attr's name, or a quoted choice it is compared with; only ==/!= take them.
enum class ValueType { number, boolean, choice };

enum class UnaryOp { neg, logical_not };

enum class BinaryOp { add, sub, mul, div, lt, le, gt, ge, eq, ne, logical_and, logical_or };

// The built-in functions. norm2(x) is the Euclidean norm sqrt(sum(x * x)) of the whole tensor,
// sum(x) the sum of all its elements; both are scalars, and cannot be nested in one another.
enum class Builtin {
  select,  // select(cond, a, b): a where cond holds, else b
  min,
  max,
  abs,
  sign,  // -1, 0 or +1
  sqrt,
  rsqrt,  // 1 / sqrt(x)
  exp,
  log,
  pow,
  clamp,  // clamp(x, lo, hi)
  norm2,
  sum,
};

struct BuiltinInfo {
  Builtin fn;
  const char* name;
  int arity;
  bool reduction;
};

// All built-ins, in the order of the enum.
inline const std::vector<BuiltinInfo>& builtins() {
  static const std::vector<BuiltinInfo> table = {
      {Builtin::select, "select", 3, false}, {Builtin::min, "min", 2, false},
      {Builtin::max, "max", 2, false},       {Builtin::abs, "abs", 1, false},
      {Builtin::sign, "sign", 1, false},     {Builtin::sqrt, "sqrt", 1, false},
      {Builtin::rsqrt, "rsqrt", 1, false},   {Builtin::exp, "exp", 1, false},
      {Builtin::log, "log", 1, false},       {Builtin::pow, "pow", 2, false},
      {Builtin::clamp, "clamp", 3, false},   {Builtin::norm2, "norm2", 1, true},
      {Builtin::sum, "sum", 1, true},
  };
  return table;
}

inline const BuiltinInfo& builtin_info(Builtin fn) {
  return builtins()[static_cast<size_t>(fn)];
}

inline const char* to_string(NameKind k) {
  switch (k) {
    case NameKind::state:
      return "state";
    case NameKind::input:
      return "input";
    case NameKind::hyper:
      return "hyper";
    case NameKind::attr:
      return "attr";
    case NameKind::let:
      return "let";
  }
  return "?";
}

inline const char* to_string(UnaryOp op) {
  return op == UnaryOp::neg ? "-" : "!";
}

inline const char* to_string(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
      return "+";
    case BinaryOp::sub:
      return "-";
    case BinaryOp::mul:
      return "*";
    case BinaryOp::div:
      return "/";
    case BinaryOp::lt:
      return "<";
    case BinaryOp::le:
      return "<=";
    case BinaryOp::gt:
      return ">";
    case BinaryOp::ge:
      return ">=";
    case BinaryOp::eq:
      return "==";
    case BinaryOp::ne:
      return "!=";
    case BinaryOp::logical_and:
      return "&&";
    case BinaryOp::logical_or:
      return "||";
  }
  return "?";
}

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// An expression node, tagged by kind. loc: the first character of a number or name, the
// function name of a call, the operator of a unary or binary expression.
struct Expr {
  enum class Kind { number, name, unary, binary, call, text };

  Kind kind = Kind::number;
  SourceLoc loc;
  ValueType type = ValueType::number;

  double number = 0;  // number: the literal's value (always >= 0: '-' is a unary)
  std::string name;   // name: the identifier; call: the function's name; text: the choice
  NameKind name_kind = NameKind::state;  // name
  UnaryOp unary_op = UnaryOp::neg;       // unary
  BinaryOp binary_op = BinaryOp::add;    // binary
  Builtin fn = Builtin::select;          // call
  std::vector<ExprPtr> args;  // unary: the operand; binary: lhs, rhs; call: the arguments
};

struct NameDecl {
  std::string name;
  SourceLoc loc;
};

// A run-time fp32 scalar argument of the op, with a default.
struct Hyper {
  std::string name;
  double default_value = 0;
  std::string domain;       // `in [0, 1)`: canonical (opforge/scalar_domain.h); "" = finite
  std::string description;  // may be empty
  SourceLoc loc;
};

// A compile-time attribute: each value is a separate kernel variant.
struct Attr {
  enum class Kind { boolean, number, choice };
  std::string name;
  Kind kind = Kind::boolean;
  std::string default_value;         // canonical: "true" / "false" / "%.17g" / the first choice
  std::vector<std::string> choices;  // choice: identifiers, the default first
  std::string description;           // may be empty
  SourceLoc loc;
};

struct Let {
  std::string name;
  ExprPtr expr;
  SourceLoc loc;               // the let's name
  bool has_reduction = false;  // expr calls norm2/sum, directly or through an earlier let
};

struct Update {
  std::string state;
  ExprPtr expr;
  SourceLoc loc;  // the state's name
};

struct Rule {
  std::string name;  // matches ^[a-z][a-z0-9_]{0,63}$
  SourceLoc loc;
  std::vector<NameDecl> states;  // in declaration order
  std::vector<NameDecl> inputs;
  std::vector<Hyper> hypers;
  std::vector<Attr> attrs;
  // `storage f32, bf16m`: the tensor storages built (dsl::Storage tags; empty: f32 only).
  std::vector<std::string> storages;
  SourceLoc storage_loc;
  // `quantizable m signed, v unsigned`: the states an 8-bit storage (q8s, q8ls) keeps as
  // blockwise codes, each with a signed or unsigned map (OptimizerDecl::quantizable).
  struct Quantizable {
    std::string state;
    bool is_signed = true;
    SourceLoc loc;  // the state's name
  };
  std::vector<Quantizable> quantizable;
  SourceLoc quantizable_loc;
  // The forms a rule derives by declaration (rule_decl.h); each loc is its line's keyword, or
  // line 0 without the line.
  // `loss_scaling`: OptimizerDecl::grad_scaling() (attrs unscale, skip_if_nonfinite, scalar
  // inv_scale, result found_inf).
  SourceLoc loss_scaling_loc;
  // `sparse`: a second op sparse_<name>, the indexed-row form (argument indices, attr Tindices).
  SourceLoc sparse_loc;
  // `autoschedule [isa, ...]`: an Adams2019 twin "<variant>__auto" of every dense variant of
  // these ISAs (empty: every ISA the rule is built for).
  SourceLoc autoschedule_loc;
  std::vector<std::string> autoschedule_isas;
  bool loss_scaling() const { return loss_scaling_loc.line > 0; }
  bool sparse() const { return sparse_loc.line > 0; }
  bool autoschedule() const { return autoschedule_loc.line > 0; }
  std::vector<Let> lets;        // in order; a let uses only earlier lets
  std::vector<Update> updates;  // in source order; one per state
};

}  // namespace opforge::dsl::rules
