#include "dsl/rules/rule_parser.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "dsl/rules/lexer.h"
#include "opforge/scalar_domain.h"

namespace opforge::dsl::rules {
namespace {

// Deeper expressions are rejected, so that recursion (parsing, printing, destruction) stays
// shallow whatever the input. Two counts share the limit: the tree's height (every operator and
// call is a level), and while parsing, the nesting of parentheses and calls (the parser
// recurses there; prefix operators are read in a loop). The canonical text parenthesizes each
// operator once, so its nesting is at most the tree's height: whatever parses prints as text
// that parses back.
constexpr int kMaxDepth = 200;

const std::vector<std::string>& keywords() {
  static const std::vector<std::string> k = {
      "optimizer", "state", "input",        "hyper",  "attr",         "storage",    "let",
      "true",      "false", "loss_scaling", "sparse", "autoschedule", "quantizable"};
  return k;
}

const std::vector<std::string>& declaration_keywords() {
  static const std::vector<std::string> k = {"state",        "input",      "hyper",        "attr",
                                             "storage",      "let",        "loss_scaling", "sparse",
                                             "autoschedule", "quantizable"};
  return k;
}

// A misspelt keyword: longer words may be further off ("loss_scale" is 3 from "loss_scaling").
std::string keyword_suggestion(const std::string& word) {
  return closest_name(word, keywords(), word.size() >= 8 ? 3 : 2);
}

// The storages that add the write-only argument "model" (dsl::Storage's master-weights mode).
bool storage_adds_model(const std::string& tag) {
  for (const char* t : {"bf16m", "f16m", "bf16ms", "f16ms"}) {
    if (tag == t) return true;
  }
  return false;
}

bool is_keyword(const std::string& s) {
  return std::find(keywords().begin(), keywords().end(), s) != keywords().end();
}

const BuiltinInfo* find_builtin(const std::string& name) {
  for (const BuiltinInfo& b : builtins()) {
    if (name == b.name) return &b;
  }
  return nullptr;
}

std::vector<std::string> builtin_names() {
  std::vector<std::string> names;
  for (const BuiltinInfo& b : builtins()) names.push_back(b.name);
  return names;
}

bool valid_op_name(const std::string& s) {
  if (s.empty() || s.size() > 64 || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string format_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string at_line_col(SourceLoc l) {
  return std::to_string(l.line) + ":" + std::to_string(l.col);
}

// "a state", "an input", ...
std::string with_article(NameKind k) {
  const std::string s = to_string(k);
  return (k == NameKind::input || k == NameKind::attr ? "an " : "a ") + s;
}

// "a, b, c"
std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

const char* type_name(ValueType t) {
  return t == ValueType::number ? "a number" : t == ValueType::boolean ? "a boolean" : "a choice";
}

// "\"tf\", \"torch\"": an attr's choices as a rule writes them in comparisons.
std::string quoted_list(const std::vector<std::string>& choices) {
  std::string out;
  for (const auto& c : choices) out += (out.empty() ? "\"" : ", \"") + c + "\"";
  return out;
}

bool is_comparison(Tok t) {
  return t == Tok::lt || t == Tok::le || t == Tok::gt || t == Tok::ge || t == Tok::eq ||
         t == Tok::ne;
}

BinaryOp binary_op(Tok t) {
  switch (t) {
    case Tok::plus:
      return BinaryOp::add;
    case Tok::minus:
      return BinaryOp::sub;
    case Tok::star:
      return BinaryOp::mul;
    case Tok::slash:
      return BinaryOp::div;
    case Tok::lt:
      return BinaryOp::lt;
    case Tok::le:
      return BinaryOp::le;
    case Tok::gt:
      return BinaryOp::gt;
    case Tok::ge:
      return BinaryOp::ge;
    case Tok::eq:
      return BinaryOp::eq;
    case Tok::ne:
      return BinaryOp::ne;
    case Tok::and_and:
      return BinaryOp::logical_and;
    default:
      return BinaryOp::logical_or;
  }
}

bool is_literal_zero(const Expr& e) {
  if (e.kind == Expr::Kind::number) return e.number == 0;
  return e.kind == Expr::Kind::unary && e.unary_op == UnaryOp::neg &&
         e.args[0]->kind == Expr::Kind::number && e.args[0]->number == 0;
}

class Parser {
 public:
  explicit Parser(const SourceFile& src) : src_(src), lex_(src) {}

  Rule parse();

 private:
  // An expression and its height (1 for a leaf).
  struct Node {
    ExprPtr e;
    int height = 1;
  };

  struct Symbol {
    NameKind kind;
    SourceLoc loc;
    ValueType type = ValueType::number;
    bool has_reduction = false;
  };

  // Counts the nesting of parentheses and calls, where the expression parser recurses.
  struct DepthGuard {
    DepthGuard(Parser& p, SourceLoc loc) : p(p) {
      if (++p.depth_ > kMaxDepth) p.too_deep(loc);
    }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  [[noreturn]] void fail(SourceLoc loc, const std::string& message,
                         const std::string& suggestion = "") const {
    src_.fail(loc, message, suggestion);
  }
  [[noreturn]] void too_deep(SourceLoc loc) const {
    fail(loc, "expression nested too deeply (more than " + std::to_string(kMaxDepth) + " levels)");
  }

  void advance() { cur_ = lex_.next(); }
  bool at_word(const char* w) const { return cur_.kind == Tok::ident && cur_.text == w; }
  void expect_eol(const char* expected = "end of line");

  void check_new_name(const Token& t, const std::string& after);
  void add_symbol(const std::string& name, Symbol s);

  void parse_name_list(Rule& rule, NameKind kind);
  void parse_hyper(Rule& rule);
  void parse_domain(Hyper& h);
  void parse_storage(Rule& rule);
  void parse_quantizable(Rule& rule);
  void parse_form(SourceLoc& loc, const char* keyword);
  void parse_autoschedule(Rule& rule);
  void check_forms(const Rule& rule) const;
  void parse_attr(Rule& rule);
  void parse_choices(Attr& a);
  void parse_let(Rule& rule);
  void parse_update(Rule& rule);
  Node parse_top_expr();

  Node parse_expr();
  Node parse_and();
  Node parse_comparison();
  Node parse_additive();
  Node parse_multiplicative();
  Node parse_unary();
  Node parse_primary();
  Node parse_call(const Token& name);

  Node make_binary(const Token& op, Node lhs, Node rhs);
  void check_choice_comparison(const Token& op, const Expr& lhs, const Expr& rhs) const;
  void require(const Expr& e, ValueType t, const std::string& what) const;

  const SourceFile& src_;
  Lexer lex_;
  Token cur_;
  std::map<std::string, Symbol> symbols_;
  std::map<std::string, std::vector<std::string>> choices_;  // choice attrs' choices
  std::vector<std::string> symbol_order_;  // for suggestions, in declaration order
  std::map<std::string, SourceLoc> updated_;
  SourceLoc first_update_;
  int depth_ = 0;
  // While parsing a reduction's argument: which one, for the nesting error.
  const char* reduction_ = nullptr;
  SourceLoc reduction_loc_;
  bool saw_reduction_ = false;             // in the current let's or update's expression
  const char* first_reduction_ = nullptr;  // the rule's first norm2/sum call, for `sparse`
  SourceLoc first_reduction_loc_;
};

void Parser::expect_eol(const char* expected) {
  if (cur_.kind == Tok::newline) {
    advance();
  } else if (cur_.kind == Tok::bar) {  // '|' only separates an attr's choices
    fail(cur_.loc, "unexpected character '|'", "||");
  } else if (cur_.kind != Tok::end) {
    fail(cur_.loc, std::string("expected ") + expected + ", got " + describe(cur_));
  }
}

void Parser::check_new_name(const Token& t, const std::string& after) {
  if (t.kind != Tok::ident) fail(t.loc, "expected a name after " + after + ", got " + describe(t));
  if (is_keyword(t.text)) fail(t.loc, "'" + t.text + "' is a keyword, not a name");
  if (find_builtin(t.text)) fail(t.loc, "'" + t.text + "' is a built-in function, not a name");
  if (t.text.size() > 64) fail(t.loc, "name '" + t.text + "' is longer than 64 characters");
  const auto it = symbols_.find(t.text);
  if (it != symbols_.end()) {
    fail(t.loc, "duplicate name '" + t.text + "': already declared as " +
                    with_article(it->second.kind) + " at " + at_line_col(it->second.loc));
  }
}

void Parser::add_symbol(const std::string& name, Symbol s) {
  symbols_[name] = s;
  symbol_order_.push_back(name);
}

Rule Parser::parse() {
  check_encoding(src_);
  Rule rule;
  advance();
  while (cur_.kind == Tok::newline) advance();
  if (cur_.kind == Tok::end) {
    fail({1, 1}, "empty rule file: expected 'optimizer NAME' as the first line");
  }
  if (!at_word("optimizer")) {
    const std::string s = cur_.kind == Tok::ident ? closest_name(cur_.text, {"optimizer"}) : "";
    fail(cur_.loc, "expected 'optimizer NAME' as the first line, got " + describe(cur_), s);
  }
  rule.loc = cur_.loc;
  const Token name = lex_.word();
  if (name.kind != Tok::ident) {
    fail(name.loc, "expected the optimizer's name after 'optimizer', got " + describe(name));
  }
  if (!valid_op_name(name.text)) {
    fail(name.loc, "invalid optimizer name '" + name.text +
                       "': a name is a lowercase letter then at most 63 lowercase letters, "
                       "digits and underscores ([a-z][a-z0-9_]{0,63})");
  }
  rule.name = name.text;
  advance();
  expect_eol();

  while (cur_.kind != Tok::end) {
    if (cur_.kind == Tok::newline) {
      advance();
      continue;
    }
    if (cur_.kind != Tok::ident) {
      fail(cur_.loc,
           "expected a declaration (state, input, hyper, attr, let) or an update "
           "'STATE = expr', got " +
               describe(cur_));
    }
    const std::string word = cur_.text;
    const bool declaration = std::find(declaration_keywords().begin(), declaration_keywords().end(),
                                       word) != declaration_keywords().end();
    if (declaration && !updated_.empty()) {
      fail(cur_.loc, "'" + word +
                         "' after an update: declarations and lets come before the "
                         "first update (line " +
                         std::to_string(first_update_.line) + ")");
    }
    if (word == "state") {
      parse_name_list(rule, NameKind::state);
    } else if (word == "input") {
      parse_name_list(rule, NameKind::input);
    } else if (word == "hyper") {
      parse_hyper(rule);
    } else if (word == "attr") {
      parse_attr(rule);
    } else if (word == "storage") {
      parse_storage(rule);
    } else if (word == "quantizable") {
      parse_quantizable(rule);
    } else if (word == "loss_scaling") {
      parse_form(rule.loss_scaling_loc, "loss_scaling");
    } else if (word == "sparse") {
      parse_form(rule.sparse_loc, "sparse");
    } else if (word == "autoschedule") {
      parse_autoschedule(rule);
    } else if (word == "let") {
      parse_let(rule);
    } else if (word == "optimizer") {
      fail(cur_.loc, "a rule file has one 'optimizer' line, at " + at_line_col(rule.loc));
    } else {
      parse_update(rule);
    }
  }

  check_forms(rule);
  if (rule.states.empty()) {
    fail(cur_.loc, "optimizer '" + rule.name + "' declares no state: nothing to update");
  }
  for (const NameDecl& s : rule.states) {
    if (!updated_.count(s.name)) {
      fail(s.loc, "state '" + s.name + "' is never updated (add '" + s.name + " = ...')");
    }
  }
  return rule;
}

void Parser::parse_name_list(Rule& rule, NameKind kind) {
  std::string after = std::string("'") + to_string(kind) + "'";
  advance();
  while (true) {
    check_new_name(cur_, after);
    (kind == NameKind::state ? rule.states : rule.inputs).push_back({cur_.text, cur_.loc});
    add_symbol(cur_.text, {kind, cur_.loc});
    advance();
    if (cur_.kind != Tok::comma) break;
    after = "','";
    advance();
  }
  expect_eol("',' or end of line");
}

// `storage f32, bf16m, bf16s`: each storage a variant (narrow gradients and model copy with an
// fp32 master, narrow states, ...), as the C++ ops declare them.
void Parser::parse_storage(Rule& rule) {
  if (!rule.storages.empty()) {
    fail(cur_.loc, "a rule has one 'storage' line, at " + at_line_col(rule.storage_loc));
  }
  rule.storage_loc = cur_.loc;
  advance();
  while (true) {
    if (cur_.kind != Tok::ident) {
      fail(cur_.loc, "expected a storage (" + join(storage_tags()) + "), got " + describe(cur_));
    }
    const auto& tags = storage_tags();
    if (std::find(tags.begin(), tags.end(), cur_.text) == tags.end()) {
      fail(cur_.loc, "unknown storage '" + cur_.text + "' (" + join(tags) + ")",
           closest_name(cur_.text, tags));
    }
    if (std::find(rule.storages.begin(), rule.storages.end(), cur_.text) != rule.storages.end()) {
      fail(cur_.loc, "storage '" + cur_.text + "' is listed twice");
    }
    rule.storages.push_back(cur_.text);
    advance();
    if (cur_.kind != Tok::comma) break;
    advance();
  }
  expect_eol("',' or end of line");
}

// `quantizable m signed, v unsigned`: declared states after the first (the parameter), each
// once, with the sign of its 8-bit map.
void Parser::parse_quantizable(Rule& rule) {
  if (rule.quantizable_loc.line > 0) {
    fail(cur_.loc, "a rule has one 'quantizable' line, at " + at_line_col(rule.quantizable_loc));
  }
  rule.quantizable_loc = cur_.loc;
  advance();
  while (true) {
    if (cur_.kind != Tok::ident) fail(cur_.loc, "expected a state name, got " + describe(cur_));
    const auto it = symbols_.find(cur_.text);
    if (it == symbols_.end() || it->second.kind != NameKind::state) {
      fail(cur_.loc, "'" + cur_.text + "' is not a state declared above (a 'state' line)");
    }
    if (!rule.states.empty() && rule.states.front().name == cur_.text) {
      fail(cur_.loc, "'" + cur_.text + "' is the first state (the parameter): it stays fp32");
    }
    for (const auto& q : rule.quantizable) {
      if (q.state == cur_.text) fail(cur_.loc, "state '" + cur_.text + "' is listed twice");
    }
    Rule::Quantizable q{cur_.text, true, cur_.loc};
    advance();
    if (cur_.kind != Tok::ident || (cur_.text != "signed" && cur_.text != "unsigned")) {
      fail(cur_.loc,
           "expected 'signed' (values of either sign: momenta) or 'unsigned' "
           "(second moments) after '" +
               q.state + "', got " + describe(cur_));
    }
    q.is_signed = cur_.text == "signed";
    rule.quantizable.push_back(q);
    advance();
    if (cur_.kind != Tok::comma) break;
    advance();
  }
  expect_eol("',' or end of line");
}

// `loss_scaling` or `sparse`: a line of its own, once.
void Parser::parse_form(SourceLoc& loc, const char* keyword) {
  if (loc.line > 0) {
    fail(cur_.loc, std::string("a rule has one '") + keyword + "' line, at " + at_line_col(loc));
  }
  loc = cur_.loc;
  advance();
  expect_eol((std::string("end of line ('") + keyword + "' takes nothing)").c_str());
}

// `autoschedule` or `autoschedule avx512, avx2`: the ISAs whose variants get an Adams2019 twin.
void Parser::parse_autoschedule(Rule& rule) {
  if (rule.autoschedule()) {
    fail(cur_.loc, "a rule has one 'autoschedule' line, at " + at_line_col(rule.autoschedule_loc));
  }
  rule.autoschedule_loc = cur_.loc;
  advance();
  if (cur_.kind == Tok::newline || cur_.kind == Tok::end) return expect_eol();
  const auto& isas = isa_names();
  while (true) {
    if (cur_.kind != Tok::ident) {
      fail(cur_.loc, "expected an ISA (" + join(isas) + ") or end of line, got " + describe(cur_));
    }
    if (std::find(isas.begin(), isas.end(), cur_.text) == isas.end()) {
      fail(cur_.loc, "unknown ISA '" + cur_.text + "' (" + join(isas) + ")",
           closest_name(cur_.text, isas));
    }
    auto& listed = rule.autoschedule_isas;
    if (std::find(listed.begin(), listed.end(), cur_.text) != listed.end()) {
      fail(cur_.loc, "ISA '" + cur_.text + "' is listed twice");
    }
    listed.push_back(cur_.text);
    advance();
    if (cur_.kind != Tok::comma) break;
    advance();
  }
  expect_eol("',' or end of line");
}

// What the derived forms need, once the whole rule is read (the lines may come in any order):
// their arguments' names free, no reduction in a sparse rule, a sparse name that fits.
void Parser::check_forms(const Rule& rule) const {
  // name -> the line that adds an argument or attr of that name
  std::vector<std::pair<const char*, std::pair<const char*, SourceLoc>>> taken;
  if (rule.loss_scaling()) {
    for (const char* n : {"inv_scale", "found_inf", "unscale", "skip_if_nonfinite"}) {
      taken.push_back({n, {"loss_scaling", rule.loss_scaling_loc}});
    }
  }
  if (rule.sparse()) {
    for (const char* n : {"indices", "Tindices"}) taken.push_back({n, {"sparse", rule.sparse_loc}});
  }
  if (std::any_of(rule.storages.begin(), rule.storages.end(), storage_adds_model)) {
    taken.push_back({"model", {"storage", rule.storage_loc}});
  }
  const bool fp8 = std::any_of(
      rule.storages.begin(), rule.storages.end(),
      [](const std::string& t) { return t.find("e4m3") != t.npos || t.find("e5m2") != t.npos; });
  if (fp8) taken.push_back({"grad_scale_inv", {"storage", rule.storage_loc}});
  const bool eight_bit = std::any_of(rule.storages.begin(), rule.storages.end(),
                                     [](const std::string& t) { return t.find("q8") != t.npos; });
  if (eight_bit && rule.quantizable.empty()) {
    fail(rule.storage_loc,
         "an 8-bit storage (q8s, q8ls) needs a 'quantizable' line naming the "
         "states it stores in 8 bits, e.g. 'quantizable m signed'");
  }
  std::vector<std::string> absmax_names;  // kept alive for `taken`
  absmax_names.reserve(rule.quantizable.size());
  if (eight_bit) {
    for (const auto& q : rule.quantizable) absmax_names.push_back(q.state + "_absmax");
    for (const auto& n : absmax_names) {
      taken.push_back({n.c_str(), {"quantizable", rule.quantizable_loc}});
    }
  }
  for (const std::string& name : symbol_order_) {
    for (const auto& [taken_name, by] : taken) {
      const Symbol& s = symbols_.at(name);
      if (name != taken_name || s.kind == NameKind::let) continue;  // a let is no argument
      fail(s.loc, "name '" + name + "' is taken by the '" + by.first + "' line (at " +
                      at_line_col(by.second) + "), which adds an argument or attr '" + name +
                      "': rename this " + to_string(s.kind));
    }
  }
  if (rule.sparse()) {
    if (first_reduction_) {
      fail(rule.sparse_loc, std::string("'sparse' derives a form that updates rows one index at "
                                        "a time, without whole-tensor reductions; this rule "
                                        "calls '") +
                                first_reduction_ + "' at " + at_line_col(first_reduction_loc_));
    }
    if (rule.name.size() + 7 > 64) {
      fail(rule.sparse_loc, "'sparse' derives op 'sparse_" + rule.name +
                                "', longer than 64 characters: shorten the optimizer's name");
    }
  }
}

// `in [lo, hi)` after a hyper's default: an interval as opforge/scalar_domain.h reads it
// (bounds are numbers, -inf or inf), which must hold the default.
void Parser::parse_domain(Hyper& h) {
  const SourceLoc at = cur_.loc;
  advance();
  std::string text;
  if (cur_.kind != Tok::lbracket && cur_.kind != Tok::lparen) {
    fail(cur_.loc,
         "expected '[' or '(' opening the domain of hyper '" + h.name + "', got " + describe(cur_));
  }
  text += cur_.text;
  advance();
  for (int bound = 0; bound < 2; ++bound) {
    if (cur_.kind == Tok::minus) {
      text += "-";
      advance();
    }
    if (cur_.kind != Tok::number && !at_word("inf")) {
      fail(cur_.loc, "expected a number or inf as a bound of hyper '" + h.name +
                         "''s domain, got " + describe(cur_));
    }
    text += cur_.text;
    advance();
    if (bound == 0) {
      if (cur_.kind != Tok::comma) {
        fail(cur_.loc, "expected ',' between the bounds of hyper '" + h.name + "''s domain, got " +
                           describe(cur_));
      }
      text += ", ";
      advance();
    }
  }
  if (cur_.kind != Tok::rbracket && cur_.kind != Tok::rparen) {
    fail(cur_.loc,
         "expected ']' or ')' closing the domain of hyper '" + h.name + "', got " + describe(cur_));
  }
  text += cur_.text;
  advance();
  registry::ScalarDomain d;
  try {
    d = registry::ScalarDomain::parse(text);
  } catch (const std::invalid_argument& e) {
    fail(at, e.what());
  }
  if (!d.contains(h.default_value)) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.9g", h.default_value);
    fail(at, "hyper '" + h.name + "': its default " + buf + " is outside its domain " + d.text());
  }
  h.domain = d.text();
}

void Parser::parse_hyper(Rule& rule) {
  advance();
  check_new_name(cur_, "'hyper'");
  Hyper h;
  h.name = cur_.text;
  h.loc = cur_.loc;
  advance();
  if (cur_.kind != Tok::assign) {
    fail(cur_.loc,
         "expected '=' and a default value after 'hyper " + h.name + "', got " + describe(cur_));
  }
  advance();
  const bool negative = cur_.kind == Tok::minus;
  if (negative) advance();
  if (at_word("true") || at_word("false")) {
    fail(cur_.loc, "hyper '" + h.name + "' is a number; a boolean is an attr (attr " + h.name +
                       " = " + cur_.text + ")");
  }
  if (cur_.kind != Tok::number) {
    fail(cur_.loc,
         "expected a number as the default of hyper '" + h.name + "', got " + describe(cur_));
  }
  h.default_value = negative ? -cur_.number : cur_.number;
  advance();
  if (at_word("in")) parse_domain(h);
  if (cur_.kind == Tok::string) {
    h.description = cur_.text;
    advance();
  }
  expect_eol("a description string or end of line");
  add_symbol(h.name, {NameKind::hyper, h.loc});
  rule.hypers.push_back(std::move(h));
}

void Parser::parse_attr(Rule& rule) {
  advance();
  check_new_name(cur_, "'attr'");
  Attr a;
  a.name = cur_.text;
  a.loc = cur_.loc;
  advance();
  if (cur_.kind != Tok::assign) {
    fail(cur_.loc,
         "expected '=' and a default value (true, false, a number or choices a | b) after "
         "'attr " +
             a.name + "', got " + describe(cur_));
  }
  advance();
  if (cur_.kind == Tok::ident && !at_word("true") && !at_word("false")) {
    parse_choices(a);
  } else if (at_word("true") || at_word("false")) {
    a.kind = Attr::Kind::boolean;
    a.default_value = cur_.text;
  } else {
    const bool negative = cur_.kind == Tok::minus;
    if (negative) advance();
    if (cur_.kind != Tok::number) {
      fail(cur_.loc, "expected true, false or a number as the default of attr '" + a.name +
                         "', got " + describe(cur_));
    }
    a.kind = Attr::Kind::number;
    a.default_value = format_double(negative ? -cur_.number : cur_.number);
  }
  if (a.kind != Attr::Kind::choice) advance();
  if (cur_.kind == Tok::string) {
    a.description = cur_.text;
    advance();
  }
  expect_eol("a description string or end of line");
  const ValueType type = a.kind == Attr::Kind::boolean  ? ValueType::boolean
                         : a.kind == Attr::Kind::choice ? ValueType::choice
                                                        : ValueType::number;
  add_symbol(a.name, {NameKind::attr, a.loc, type});
  if (a.kind == Attr::Kind::choice) choices_[a.name] = a.choices;
  rule.attrs.push_back(std::move(a));
}

// "a | b | c": a choice attr (each choice a variant; the first is the default). Leaves cur_
// after the last choice.
void Parser::parse_choices(Attr& a) {
  a.kind = Attr::Kind::choice;
  for (;;) {
    if (cur_.kind != Tok::ident || at_word("true") || at_word("false") || is_keyword(cur_.text)) {
      fail(cur_.loc, "expected a choice (a name) for attr '" + a.name + "', got " + describe(cur_));
    }
    for (const auto& c : a.choices) {
      if (c == cur_.text) fail(cur_.loc, "attr '" + a.name + "' lists choice '" + c + "' twice");
    }
    a.choices.push_back(cur_.text);
    advance();
    if (cur_.kind != Tok::bar) break;
    advance();
  }
  if (a.choices.size() < 2) {
    fail(a.loc, "attr '" + a.name + "' has one choice; list at least two (" + a.name + " = " +
                    a.choices[0] + " | other), or make it a bool or a number");
  }
  a.default_value = a.choices[0];
}

void Parser::parse_let(Rule& rule) {
  advance();
  check_new_name(cur_, "'let'");
  Let l;
  l.name = cur_.text;
  l.loc = cur_.loc;
  advance();
  if (cur_.kind != Tok::assign) {
    fail(cur_.loc, "expected '=' after 'let " + l.name + "', got " + describe(cur_));
  }
  advance();
  Node n = parse_top_expr();
  l.has_reduction = saw_reduction_;
  l.expr = std::move(n.e);
  add_symbol(l.name, {NameKind::let, l.loc, l.expr->type, l.has_reduction});
  rule.lets.push_back(std::move(l));
}

void Parser::parse_update(Rule& rule) {
  const Token target = cur_;
  advance();
  const auto it = symbols_.find(target.text);
  if (cur_.kind != Tok::assign) {
    if (it == symbols_.end()) {
      // Most likely a misspelt keyword: "stat var, m".
      fail(target.loc,
           "expected a declaration (state, input, hyper, attr, let) or an update "
           "'STATE = expr', got '" +
               target.text + "'",
           keyword_suggestion(target.text));
    }
    fail(cur_.loc, "expected '=' after '" + target.text + "', got " + describe(cur_));
  }
  if (it == symbols_.end()) {
    std::vector<std::string> states;
    for (const NameDecl& s : rule.states) states.push_back(s.name);
    fail(target.loc,
         "cannot assign to '" + target.text + "': it is not declared (only a state can be updated)",
         closest_name(target.text, states));
  }
  if (it->second.kind != NameKind::state) {
    fail(target.loc,
         "cannot assign to '" + target.text + "': it is " + with_article(it->second.kind) +
             (it->second.kind == NameKind::input ? " (read only)" : "") + ", declared at " +
             at_line_col(it->second.loc) + "; only a state can be updated");
  }
  const auto done = updated_.find(target.text);
  if (done != updated_.end()) {
    fail(target.loc, "state '" + target.text + "' is updated twice (first update at " +
                         at_line_col(done->second) + ")");
  }
  if (updated_.empty()) first_update_ = target.loc;
  updated_[target.text] = target.loc;
  advance();
  Node n = parse_top_expr();
  if (n.e->type != ValueType::number) {
    fail(n.e->loc,
         "state '" + target.text + "' must be updated with a number, got " + type_name(n.e->type));
  }
  rule.updates.push_back({target.text, std::move(n.e), target.loc});
}

Parser::Node Parser::parse_top_expr() {
  saw_reduction_ = false;
  Node n = parse_expr();
  expect_eol("an operator or end of line");
  return n;
}

void Parser::require(const Expr& e, ValueType t, const std::string& what) const {
  if (e.type != t) fail(e.loc, what + " must be " + type_name(t) + ", got " + type_name(e.type));
}

// `mode == "torch"`, `"tf" != mode`: a choice attr against one of its choices, decided when
// the variant is compiled. Anything else with a choice operand is an error.
void Parser::check_choice_comparison(const Token& op, const Expr& lhs, const Expr& rhs) const {
  if (op.kind != Tok::eq && op.kind != Tok::ne) {
    const Expr& c = lhs.type == ValueType::choice ? lhs : rhs;
    fail(c.loc, (c.kind == Expr::Kind::name ? "'" + c.name + "' is a choice attr"
                                            : "\"" + c.name + "\" is a choice") +
                    ": compare it with == or != (mode == \"a\"), not with '" + op.text + "'");
  }
  const Expr& attr = lhs.kind == Expr::Kind::name ? lhs : rhs;
  const Expr& text = lhs.kind == Expr::Kind::text ? lhs : rhs;
  // (a fuzz finding: `"tf" == m`, m a state, took m for a choice attr)
  if (attr.kind != Expr::Kind::name || attr.type != ValueType::choice ||
      text.kind != Expr::Kind::text) {
    const Expr& bad = lhs.type != ValueType::choice ? lhs : rhs;
    fail(bad.type == ValueType::choice ? op.loc : bad.loc,
         "'" + op.text + "' compares a choice attr with one of its quoted choices (mode == \"a\")");
  }
  const std::vector<std::string>& choices = choices_.at(attr.name);
  if (std::find(choices.begin(), choices.end(), text.name) == choices.end()) {
    fail(text.loc,
         "\"" + text.name + "\" is not a choice of attr '" + attr.name + "' (" +
             quoted_list(choices) + ")",
         closest_name(text.name, choices));
  }
}

Parser::Node Parser::make_binary(const Token& op, Node lhs, Node rhs) {
  const BinaryOp bop = binary_op(op.kind);
  const bool logical = bop == BinaryOp::logical_and || bop == BinaryOp::logical_or;
  const ValueType operand = logical ? ValueType::boolean : ValueType::number;
  if (lhs.e->type == ValueType::choice || rhs.e->type == ValueType::choice) {
    check_choice_comparison(op, *lhs.e, *rhs.e);
  } else {
    require(*lhs.e, operand, "the left operand of '" + op.text + "'");
    require(*rhs.e, operand, "the right operand of '" + op.text + "'");
  }
  if (bop == BinaryOp::div && is_literal_zero(*rhs.e)) {
    const Expr& zero = rhs.e->kind == Expr::Kind::number ? *rhs.e : *rhs.e->args[0];
    fail(zero.loc, "division by zero");
  }
  Node n;
  n.height = std::max(lhs.height, rhs.height) + 1;
  if (n.height > kMaxDepth) too_deep(op.loc);
  n.e = std::make_unique<Expr>();
  n.e->kind = Expr::Kind::binary;
  n.e->loc = op.loc;
  n.e->binary_op = bop;
  n.e->type = logical || is_comparison(op.kind) ? ValueType::boolean : ValueType::number;
  n.e->args.push_back(std::move(lhs.e));
  n.e->args.push_back(std::move(rhs.e));
  return n;
}

Parser::Node Parser::parse_expr() {
  Node lhs = parse_and();
  while (cur_.kind == Tok::or_or) {
    const Token op = cur_;
    advance();
    lhs = make_binary(op, std::move(lhs), parse_and());
  }
  return lhs;
}

Parser::Node Parser::parse_and() {
  Node lhs = parse_comparison();
  while (cur_.kind == Tok::and_and) {
    const Token op = cur_;
    advance();
    lhs = make_binary(op, std::move(lhs), parse_comparison());
  }
  return lhs;
}

Parser::Node Parser::parse_comparison() {
  Node lhs = parse_additive();
  if (!is_comparison(cur_.kind)) return lhs;
  const Token op = cur_;
  advance();
  lhs = make_binary(op, std::move(lhs), parse_additive());
  if (is_comparison(cur_.kind)) {
    fail(cur_.loc, "comparisons cannot be chained: write 'a < b && b < c', not 'a < b < c'");
  }
  return lhs;
}

Parser::Node Parser::parse_additive() {
  Node lhs = parse_multiplicative();
  while (cur_.kind == Tok::plus || cur_.kind == Tok::minus) {
    const Token op = cur_;
    advance();
    lhs = make_binary(op, std::move(lhs), parse_multiplicative());
  }
  return lhs;
}

Parser::Node Parser::parse_multiplicative() {
  Node lhs = parse_unary();
  while (cur_.kind == Tok::star || cur_.kind == Tok::slash) {
    const Token op = cur_;
    advance();
    lhs = make_binary(op, std::move(lhs), parse_unary());
  }
  return lhs;
}

Parser::Node Parser::parse_unary() {
  // A run of prefix operators is read in a loop, not by recursion; each is a level of the tree,
  // above its operand's (a leaf is height 1): the 200th is one too many before the operand.
  std::vector<Token> ops;
  while (cur_.kind == Tok::minus || cur_.kind == Tok::bang) {
    if (static_cast<int>(ops.size()) + 2 > kMaxDepth) too_deep(cur_.loc);
    ops.push_back(cur_);
    advance();
  }
  Node n = parse_primary();
  for (auto op = ops.rbegin(); op != ops.rend(); ++op) {  // innermost first
    const bool neg = op->kind == Tok::minus;
    require(*n.e, neg ? ValueType::number : ValueType::boolean,
            std::string("the operand of '") + op->text + "'");
    Node u;
    u.height = n.height + 1;
    if (u.height > kMaxDepth) too_deep(op->loc);
    u.e = std::make_unique<Expr>();
    u.e->kind = Expr::Kind::unary;
    u.e->loc = op->loc;
    u.e->unary_op = neg ? UnaryOp::neg : UnaryOp::logical_not;
    u.e->type = n.e->type;
    u.e->args.push_back(std::move(n.e));
    n = std::move(u);
  }
  return n;
}

Parser::Node Parser::parse_primary() {
  const Token t = cur_;
  if (t.kind == Tok::number || t.kind == Tok::string) {  // a string: a quoted choice
    advance();
    Node n;
    n.e = std::make_unique<Expr>();
    n.e->loc = t.loc;
    if (t.kind == Tok::number) {
      n.e->kind = Expr::Kind::number;
      n.e->number = t.number;
    } else {
      n.e->kind = Expr::Kind::text;
      n.e->name = t.text;
      n.e->type = ValueType::choice;
    }
    return n;
  }
  if (t.kind == Tok::lparen) {
    DepthGuard guard(*this, t.loc);
    advance();
    Node n = parse_expr();
    if (cur_.kind != Tok::rparen) {
      fail(cur_.loc,
           "expected ')' to close the '(' at " + at_line_col(t.loc) + ", got " + describe(cur_));
    }
    advance();
    return n;
  }
  if (t.kind != Tok::ident) fail(t.loc, "expected an expression, got " + describe(t));
  if (t.text == "true" || t.text == "false") {
    fail(t.loc, "'" + t.text +
                    "' is not an expression (booleans come from comparisons and "
                    "bool attrs)");
  }
  if (is_keyword(t.text)) fail(t.loc, "expected an expression, got keyword '" + t.text + "'");
  advance();
  if (cur_.kind == Tok::lparen) return parse_call(t);
  if (find_builtin(t.text))
    fail(t.loc, "'" + t.text + "' is a function: call it, '" + t.text + "(...)'");
  const auto it = symbols_.find(t.text);
  if (it == symbols_.end()) {
    fail(t.loc, "unknown identifier '" + t.text + "'", closest_name(t.text, symbol_order_));
  }
  const Symbol& s = it->second;
  if (s.has_reduction) {
    if (reduction_) {
      fail(t.loc, "let '" + t.text + "' contains a reduction and cannot be used inside '" +
                      reduction_ + "' (at " + at_line_col(reduction_loc_) +
                      "): reductions cannot be nested");
    }
    saw_reduction_ = true;
  }
  Node n;
  n.e = std::make_unique<Expr>();
  n.e->kind = Expr::Kind::name;
  n.e->loc = t.loc;
  n.e->name = t.text;
  n.e->name_kind = s.kind;
  n.e->type = s.type;
  return n;
}

Parser::Node Parser::parse_call(const Token& name) {
  const BuiltinInfo* b = find_builtin(name.text);
  if (!b) {
    const auto it = symbols_.find(name.text);
    if (it != symbols_.end()) {
      fail(name.loc,
           "'" + name.text + "' is " + with_article(it->second.kind) + ", not a function");
    }
    fail(name.loc, "unknown function '" + name.text + "'",
         closest_name(name.text, builtin_names()));
  }
  const char* outer = reduction_;
  const SourceLoc outer_loc = reduction_loc_;
  if (b->reduction) {
    if (reduction_) {
      fail(name.loc, std::string("reduction '") + b->name + "' inside reduction '" + reduction_ +
                         "' (at " + at_line_col(reduction_loc_) + "): reductions cannot be nested");
    }
    reduction_ = b->name;
    reduction_loc_ = name.loc;
    saw_reduction_ = true;
    if (!first_reduction_) first_reduction_ = b->name, first_reduction_loc_ = name.loc;
  }
  DepthGuard guard(*this, name.loc);
  advance();  // '('
  Node n;
  n.e = std::make_unique<Expr>();
  n.e->kind = Expr::Kind::call;
  n.e->loc = name.loc;
  n.e->name = name.text;
  n.e->fn = b->fn;
  if (cur_.kind != Tok::rparen) {
    while (true) {
      Node arg = parse_expr();
      n.height = std::max(n.height, arg.height + 1);
      n.e->args.push_back(std::move(arg.e));
      if (cur_.kind != Tok::comma) break;
      advance();
    }
  }
  if (cur_.kind != Tok::rparen) {
    fail(cur_.loc, "expected ',' or ')' in the call of '" + name.text + "', got " + describe(cur_));
  }
  advance();
  if (n.height > kMaxDepth) too_deep(name.loc);
  reduction_ = outer;
  reduction_loc_ = outer_loc;
  const int got = static_cast<int>(n.e->args.size());
  if (got != b->arity) {
    fail(name.loc, "'" + name.text + "' expects " + std::to_string(b->arity) + " argument" +
                       (b->arity == 1 ? "" : "s") + ", got " + std::to_string(got));
  }
  const auto& args = n.e->args;
  if (b->fn == Builtin::select) {
    require(*args[0], ValueType::boolean, "the condition of 'select'");
    if (args[1]->type != args[2]->type) {
      fail(args[2]->loc, std::string("the branches of 'select' must have the same type, got ") +
                             type_name(args[1]->type) + " and " + type_name(args[2]->type));
    }
    n.e->type = args[1]->type;
  } else {
    for (int i = 0; i < got; ++i) {
      require(*args[i], ValueType::number,
              "argument " + std::to_string(i + 1) + " of '" + name.text + "'");
    }
    n.e->type = ValueType::number;
  }
  return n;
}

void print_expr(const Expr& e, std::string& out) {
  switch (e.kind) {
    case Expr::Kind::number:
      out += format_double(e.number);
      return;
    case Expr::Kind::name:
      out += e.name;
      return;
    case Expr::Kind::text:
      out += "\"" + e.name + "\"";
      return;
    case Expr::Kind::unary:
      out += '(';
      out += to_string(e.unary_op);
      print_expr(*e.args[0], out);
      out += ')';
      return;
    case Expr::Kind::binary:
      out += '(';
      print_expr(*e.args[0], out);
      out += ' ';
      out += to_string(e.binary_op);
      out += ' ';
      print_expr(*e.args[1], out);
      out += ')';
      return;
    case Expr::Kind::call:
      out += e.name;
      out += '(';
      for (size_t i = 0; i < e.args.size(); ++i) {
        if (i) out += ", ";
        print_expr(*e.args[i], out);
      }
      out += ')';
      return;
  }
}

std::string description(const std::string& d) {
  return d.empty() ? "" : " \"" + d + "\"";
}

}  // namespace

const std::vector<std::string>& isa_names() {
  static const std::vector<std::string> k = {"avx512", "avx2"};
  return k;
}

const std::vector<std::string>& storage_tags() {
  static const std::vector<std::string> k = {
      "f32",    "bf16m", "f16m", "bf16g", "f16g",     "bf16s", "f16s",  "bf16ms",  "f16ms",
      "bf16gs", "f16gs", "q8s",  "q8ls",  "bf16mq8s", "e4m3g", "e5m2g", "e4m3gq8s"};
  return k;
}

Rule parse_rule(const std::string& text, const std::string& filename) {
  const SourceFile src(filename, text);
  return Parser(src).parse();
}

std::string canonical_rule_text(const Rule& rule) {
  std::string out = "optimizer " + rule.name + "\n";
  for (const NameDecl& s : rule.states) out += "state " + s.name + "\n";
  for (const NameDecl& i : rule.inputs) out += "input " + i.name + "\n";
  for (const Hyper& h : rule.hypers) {
    out += "hyper " + h.name + " = " + format_double(h.default_value) +
           (h.domain.empty() ? "" : " in " + h.domain) + description(h.description) + "\n";
  }
  for (const Attr& a : rule.attrs) {
    std::string value = a.default_value;
    if (a.kind == Attr::Kind::choice) {
      value.clear();
      for (const auto& c : a.choices) value += (value.empty() ? "" : " | ") + c;
    }
    out += "attr " + a.name + " = " + value + description(a.description) + "\n";
  }
  if (!rule.storages.empty()) out += "storage " + join(rule.storages) + "\n";
  if (!rule.quantizable.empty()) {
    std::string q;
    for (const auto& s : rule.quantizable)
      q += (q.empty() ? "" : ", ") + s.state + (s.is_signed ? " signed" : " unsigned");
    out += "quantizable " + q + "\n";
  }
  if (rule.loss_scaling()) out += "loss_scaling\n";
  if (rule.sparse()) out += "sparse\n";
  if (rule.autoschedule()) {
    out += "autoschedule" + std::string(rule.autoschedule_isas.empty() ? "" : " ") +
           join(rule.autoschedule_isas) + "\n";
  }
  for (const Let& l : rule.lets) {
    out += "let " + l.name + " = ";
    print_expr(*l.expr, out);
    out += "\n";
  }
  for (const Update& u : rule.updates) {
    out += u.state + " = ";
    print_expr(*u.expr, out);
    out += "\n";
  }
  return out;
}

}  // namespace opforge::dsl::rules
