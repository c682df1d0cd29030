// dsl/rules: the rule language front end. The example rule parses to the expected AST,
// canonical text is stable under formatting and changes under edits, precedence, every error
// class with its location, caret and suggestion, the seed corpus, and random inputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "dsl/rules/rule_parser.h"

namespace opforge::dsl::rules {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The shipped rule files (generators/rules): the example rule is the one the op library
// builds, not a copy of it.
fs::path rules_dir() {
  return fs::path(__FILE__).parent_path() / ".." / ".." / ".." / "generators" / "rules";
}

const std::string& example_rule() {
  static const std::string text = read_file(rules_dir() / "sign_sqrt_momentum.rule");
  return text;
}

void check_loc(SourceLoc got, int line, int col) {
  CHECK(got.line == line);
  CHECK(got.col == col);
}

void check_name(const Expr& e, const std::string& name, NameKind kind, int line, int col) {
  REQUIRE(e.kind == Expr::Kind::name);
  CHECK(e.name == name);
  CHECK(e.name_kind == kind);
  check_loc(e.loc, line, col);
}

void check_binary(const Expr& e, BinaryOp op, int line, int col) {
  REQUIRE(e.kind == Expr::Kind::binary);
  CHECK(e.binary_op == op);
  REQUIRE(e.args.size() == 2);
  check_loc(e.loc, line, col);
}

std::string canonical(const std::string& text) {
  return canonical_rule_text(parse_rule(text, "test.rule"));
}

// The canonical text of expression `e` in a rule whose names a, b, c, d are numeric inputs and
// p, q boolean attrs.
std::string expr_text(const std::string& e) {
  const Rule r = parse_rule(
      "optimizer t\nstate s\ninput a, b, c, d\nattr p = true\nattr q = false\nlet x = " + e +
          "\ns = s\n",
      "expr.rule");
  const std::string text = canonical_rule_text(r);
  const size_t at = text.find("let x = ");
  return text.substr(at + 8, text.find('\n', at) - at - 8);
}

struct Expected {
  Expected(int line, int col, std::string fragment, std::string suggestion = "")
      : line(line), col(col), fragment(std::move(fragment)), suggestion(std::move(suggestion)) {}
  int line, col;
  std::string fragment;
  std::string suggestion;
};

// Parses text, which must fail with the expected error; checks the rendering too.
void check_error(const std::string& text, const Expected& want) {
  CAPTURE(text);
  try {
    parse_rule(text, "test.rule");
    FAIL("no error, expected " << want.fragment);
  } catch (const RuleError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.file == "test.rule");
    CHECK(e.line == want.line);
    CHECK(e.col == want.col);
    CHECK(e.message.find(want.fragment) != std::string::npos);
    CHECK(e.suggestion == want.suggestion);
    const std::string prefix = "test.rule:" + std::to_string(want.line) + ":" +
                               std::to_string(want.col) + ": error: " + e.message + "\n";
    CHECK(what.rfind(prefix, 0) == 0);
    // Line 2 of the diagnostic is the source line, line 3 the caret under the column.
    std::istringstream lines(what);
    std::string first, source, caret, hint;
    std::getline(lines, first);
    std::getline(lines, source);
    std::getline(lines, caret);
    CHECK(caret.size() >= 1);
    CHECK(caret.back() == '^');
    bool plain = true;  // an ASCII line without tabs: the caret is at byte col - 1
    for (char c : source) plain = plain && c != '\t' && static_cast<unsigned char>(c) < 0x80;
    if (plain) CHECK(caret == std::string(want.col - 1, ' ') + "^");
    if (want.suggestion.empty()) {
      CHECK_FALSE(std::getline(lines, hint));
    } else {
      REQUIRE(std::getline(lines, hint));
      CHECK(hint == "  did you mean '" + want.suggestion + "'?");
    }
  }
}

// A small valid rule, to which each error case appends or in which it replaces lines.
const char* const kBase =
    "optimizer base\n"      // 1
    "state var, m\n"        // 2
    "input grad\n"          // 3
    "hyper lr = 0.01\n"     // 4
    "hyper beta = 0.9\n"    // 5
    "attr flag = false\n";  // 6

std::string base(const std::string& rest) {
  return kBase + rest;
}
const char* const kUpdates = "m = m\nvar = var\n";

fs::path corpus_dir() {
  return fs::path(__FILE__).parent_path() / "corpus";
}

// Corpus files named prefix*.rule; the good ones include the shipped rule files.
std::vector<fs::path> corpus_files(const std::string& prefix) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(corpus_dir())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && entry.path().extension() == ".rule") {
      files.push_back(entry.path());
    }
  }
  if (prefix == "good_") {
    for (const auto& entry : fs::directory_iterator(rules_dir())) {
      if (entry.path().extension() == ".rule") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// A storage line: the storages each become variants; the canonical text keeps the line.
TEST_CASE("rule parser: a storage line") {
  const Rule r = parse_rule(base("storage f32, bf16m, bf16s\n" + std::string(kUpdates)), "s.rule");
  CHECK(r.storages == std::vector<std::string>{"f32", "bf16m", "bf16s"});
  check_loc(r.storage_loc, 7, 1);
  const std::string canon = canonical_rule_text(r);
  CHECK(canon.find("\nstorage f32, bf16m, bf16s\n") != std::string::npos);
  CHECK(canonical_rule_text(parse_rule(canon, "canon.rule")) == canon);
  CHECK(parse_rule(base(kUpdates), "none.rule").storages.empty());
}

// The derived forms' lines, in any order among the declarations; the canonical text prints
// them after the storage line and parses back to itself.
TEST_CASE("rule parser: loss_scaling, sparse and autoschedule lines") {
  const Rule r =
      parse_rule(base("sparse\nautoschedule avx2, avx512  # both\nloss_scaling # comment\n" +
                      std::string(kUpdates)),
                 "forms.rule");
  CHECK(r.sparse());
  check_loc(r.sparse_loc, 7, 1);
  CHECK(r.autoschedule());
  check_loc(r.autoschedule_loc, 8, 1);
  CHECK(r.autoschedule_isas == std::vector<std::string>{"avx2", "avx512"});
  CHECK(r.loss_scaling());
  check_loc(r.loss_scaling_loc, 9, 1);
  const std::string canon = canonical_rule_text(r);
  CHECK(canon.find("\nloss_scaling\nsparse\nautoschedule avx2, avx512\n") != std::string::npos);
  CHECK(canonical_rule_text(parse_rule(canon, "canon.rule")) == canon);
  // A bare autoschedule line: every ISA the rule is built for.
  const Rule bare = parse_rule(base("autoschedule\n" + std::string(kUpdates)), "bare.rule");
  CHECK(bare.autoschedule());
  CHECK(bare.autoschedule_isas.empty());
  CHECK(canonical_rule_text(bare).find("\nautoschedule\n") != std::string::npos);
  const Rule none = parse_rule(base(kUpdates), "none.rule");
  CHECK_FALSE(none.loss_scaling());
  CHECK_FALSE(none.sparse());
  CHECK_FALSE(none.autoschedule());
  CHECK(isa_names() == std::vector<std::string>{"avx512", "avx2"});
  // A let may take a derived argument's name: lets are not arguments.
  CHECK_NOTHROW(parse_rule(
      base("loss_scaling\nsparse\nlet indices = 1\nlet inv_scale = 2\n" + std::string(kUpdates)),
      "lets.rule"));
}

// A choice attr: its choices (the first is the default), compared with quoted choices; the
// canonical text lists them and parses back to the same text.
TEST_CASE("rule parser: a choice attr and its comparisons") {
  const std::string text = base(
      "attr mode = tf | torch | keras \"epsilon placement\"\n"
      "let e = select(mode == \"torch\", 1, select(\"keras\" != mode, 2, 3))\n" +
      std::string(kUpdates));
  const Rule r = parse_rule(text, "choice.rule");
  REQUIRE(r.attrs.size() == 2);
  const Attr& a = r.attrs[1];
  CHECK(a.kind == Attr::Kind::choice);
  CHECK(a.choices == std::vector<std::string>{"tf", "torch", "keras"});
  CHECK(a.default_value == "tf");
  CHECK(a.description == "epsilon placement");
  const Expr& cond = *r.lets.at(0).expr->args[0];
  REQUIRE(cond.kind == Expr::Kind::binary);
  CHECK(cond.type == ValueType::boolean);
  CHECK(cond.args[1]->kind == Expr::Kind::text);
  CHECK(cond.args[1]->name == "torch");
  const std::string canon = canonical_rule_text(r);
  CHECK(canon.find("attr mode = tf | torch | keras \"epsilon placement\"\n") != std::string::npos);
  CHECK(canon.find("select((mode == \"torch\"), 1, select((\"keras\" != mode), 2, 3))") !=
        std::string::npos);
  CHECK(canonical_rule_text(parse_rule(canon, "canon.rule")) == canon);
}

TEST_CASE("the example rule parses to the expected AST") {
  const Rule r = parse_rule(example_rule(), "example.rule");
  CHECK(r.name == "sign_sqrt_momentum");
  check_loc(r.loc, 2, 1);

  REQUIRE(r.states.size() == 2);
  CHECK(r.states[0].name == "var");
  check_loc(r.states[0].loc, 3, 9);
  CHECK(r.states[1].name == "m");
  check_loc(r.states[1].loc, 3, 14);
  REQUIRE(r.inputs.size() == 1);
  CHECK(r.inputs[0].name == "grad");
  check_loc(r.inputs[0].loc, 4, 9);

  REQUIRE(r.hypers.size() == 2);
  CHECK(r.hypers[0].name == "lr");
  CHECK(r.hypers[0].default_value == 0.01);
  CHECK(r.hypers[0].description == "learning rate");
  check_loc(r.hypers[0].loc, 5, 9);
  CHECK(r.hypers[1].name == "beta");
  CHECK(r.hypers[1].default_value == 0.9);
  CHECK(r.hypers[1].description == "momentum decay");
  check_loc(r.hypers[1].loc, 6, 9);

  REQUIRE(r.attrs.size() == 1);
  CHECK(r.attrs[0].name == "nesterov");
  CHECK(r.attrs[0].kind == Attr::Kind::boolean);
  CHECK(r.attrs[0].default_value == "false");
  CHECK(r.attrs[0].description == "use Nesterov look-ahead");
  check_loc(r.attrs[0].loc, 7, 9);
  // The derived forms, one line each.
  check_loc(r.loss_scaling_loc, 8, 3);
  check_loc(r.sparse_loc, 9, 3);
  check_loc(r.autoschedule_loc, 10, 3);
  CHECK(r.autoschedule_isas == std::vector<std::string>{"avx512"});

  // let g = sign(grad) * sqrt(abs(grad))
  REQUIRE(r.lets.size() == 1);
  const Let& g = r.lets[0];
  CHECK(g.name == "g");
  check_loc(g.loc, 11, 9);
  CHECK_FALSE(g.has_reduction);
  check_binary(*g.expr, BinaryOp::mul, 11, 25);
  const Expr& sign = *g.expr->args[0];
  REQUIRE(sign.kind == Expr::Kind::call);
  CHECK(sign.fn == Builtin::sign);
  CHECK(sign.name == "sign");
  check_loc(sign.loc, 11, 14);
  REQUIRE(sign.args.size() == 1);
  check_name(*sign.args[0], "grad", NameKind::input, 11, 19);
  const Expr& sqrt = *g.expr->args[1];
  REQUIRE(sqrt.kind == Expr::Kind::call);
  CHECK(sqrt.fn == Builtin::sqrt);
  check_loc(sqrt.loc, 11, 27);
  REQUIRE(sqrt.args.size() == 1);
  REQUIRE(sqrt.args[0]->kind == Expr::Kind::call);
  CHECK(sqrt.args[0]->fn == Builtin::abs);
  check_name(*sqrt.args[0]->args[0], "grad", NameKind::input, 11, 36);

  REQUIRE(r.updates.size() == 2);
  // m = beta * m + (1 - beta) * g
  const Update& um = r.updates[0];
  CHECK(um.state == "m");
  check_loc(um.loc, 12, 3);
  const Expr& add = *um.expr;
  check_binary(add, BinaryOp::add, 12, 18);
  CHECK(add.type == ValueType::number);
  check_binary(*add.args[0], BinaryOp::mul, 12, 14);
  check_name(*add.args[0]->args[0], "beta", NameKind::hyper, 12, 9);
  check_name(*add.args[0]->args[1], "m", NameKind::state, 12, 16);
  const Expr& rhs = *add.args[1];
  check_binary(rhs, BinaryOp::mul, 12, 31);
  check_binary(*rhs.args[0], BinaryOp::sub, 12, 23);
  REQUIRE(rhs.args[0]->args[0]->kind == Expr::Kind::number);
  CHECK(rhs.args[0]->args[0]->number == 1);
  check_loc(rhs.args[0]->args[0]->loc, 12, 21);
  check_name(*rhs.args[0]->args[1], "beta", NameKind::hyper, 12, 25);
  check_name(*rhs.args[1], "g", NameKind::let, 12, 33);

  // var = var - lr * select(nesterov, beta * m + g, m)
  const Update& uv = r.updates[1];
  CHECK(uv.state == "var");
  check_loc(uv.loc, 13, 3);
  check_binary(*uv.expr, BinaryOp::sub, 13, 13);
  check_name(*uv.expr->args[0], "var", NameKind::state, 13, 9);
  const Expr& scaled = *uv.expr->args[1];
  check_binary(scaled, BinaryOp::mul, 13, 18);
  check_name(*scaled.args[0], "lr", NameKind::hyper, 13, 15);
  const Expr& sel = *scaled.args[1];
  REQUIRE(sel.kind == Expr::Kind::call);
  CHECK(sel.fn == Builtin::select);
  check_loc(sel.loc, 13, 20);
  REQUIRE(sel.args.size() == 3);
  check_name(*sel.args[0], "nesterov", NameKind::attr, 13, 27);
  CHECK(sel.args[0]->type == ValueType::boolean);
  check_binary(*sel.args[1], BinaryOp::add, 13, 46);
  check_name(*sel.args[2], "m", NameKind::state, 13, 51);
}

TEST_CASE("declarations: float attrs, negative defaults, optional descriptions, reductions") {
  const Rule r = parse_rule(
      "optimizer x\nstate w\nhyper a = -0.5\nhyper b = .5 \"\"\nattr k = 3\nattr f = true "
      "\"flag\"\nattr z = -1e-3\nlet n = norm2(w)\nlet t = n * 2\nw = w / t\n",
      "x.rule");
  REQUIRE(r.hypers.size() == 2);
  CHECK(r.hypers[0].default_value == -0.5);
  CHECK(r.hypers[0].description.empty());
  CHECK(r.hypers[1].default_value == 0.5);
  REQUIRE(r.attrs.size() == 3);
  CHECK(r.attrs[0].kind == Attr::Kind::number);
  CHECK(r.attrs[0].default_value == "3");
  CHECK(r.attrs[1].kind == Attr::Kind::boolean);
  CHECK(r.attrs[1].default_value == "true");
  CHECK(r.attrs[1].description == "flag");
  CHECK(r.attrs[2].default_value == "-0.001");
  REQUIRE(r.lets.size() == 2);
  CHECK(r.lets[0].has_reduction);
  CHECK(r.lets[1].has_reduction);  // through the let n
  CHECK(r.lets[0].expr->fn == Builtin::norm2);
}

TEST_CASE("a hyper's domain: `in` an interval that holds the default, canonical, checked") {
  const Rule r = parse_rule(
      "optimizer x\nstate w\nhyper b = 0.9 in [0,1) \"decay\"\nhyper p = -0.5 in (-inf, 0]\n"
      "hyper lr = 0.01\nw = w * b * p * lr\n",
      "t.rule");
  REQUIRE(r.hypers.size() == 3);
  CHECK(r.hypers[0].domain == "[0, 1)");
  CHECK(r.hypers[0].description == "decay");
  CHECK(r.hypers[1].domain == "(-inf, 0]");
  CHECK(r.hypers[2].domain.empty());
  const std::string text = canonical_rule_text(r);
  CHECK(text.find(" in [0, 1) \"decay\"\n") != std::string::npos);
  CHECK(canonical_rule_text(parse_rule(text, "c.rule")) == text);
  // A domain changes the canonical text (the cache key of the rule's kernels).
  CHECK(canonical("optimizer x\nstate w\nhyper b = 0.9 in [0, 1)\nw = w * b\n") !=
        canonical("optimizer x\nstate w\nhyper b = 0.9\nw = w * b\n"));
  auto error = [](const std::string& hyper) {
    try {
      parse_rule("optimizer x\nstate w\n" + hyper + "\nw = w * b\n", "t.rule");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(parsed)");
  };
  CHECK(error("hyper b = 1.5 in [0, 1)").find("its default 1.5 is outside its domain [0, 1)") !=
        std::string::npos);
  CHECK(error("hyper b = 0.5 in 0, 1").find("expected '[' or '('") != std::string::npos);
  CHECK(error("hyper b = 0.5 in [0 1)").find("expected ','") != std::string::npos);
  CHECK(error("hyper b = 0.5 in [0, x)").find("expected a number or inf") != std::string::npos);
  CHECK(error("hyper b = 0.5 in [0, 1").find("expected ']' or ')'") != std::string::npos);
  CHECK(error("hyper b = 0.5 in [1, 0)").find("scalar domain") != std::string::npos);
}

TEST_CASE("canonical text: stable under formatting, different under edits") {
  const std::string original = canonical(example_rule());
  const std::vector<std::string> same = {
      // Tabs, extra blanks, blank lines, comments everywhere, CRLF, redundant parentheses,
      // declarations interleaved differently, equal numbers spelt differently.
      "\n\n# header\r\noptimizer\tsign_sqrt_momentum   # the name\r\n"
      "input grad\r\nstate var,m\r\n\r\n"
      "autoschedule avx512\r\nsparse # form\r\n"
      "attr nesterov=false \"use Nesterov look-ahead\"\r\nloss_scaling\r\n"
      "hyper lr=1e-2 \"learning rate\"\r\n"
      "hyper beta=0.90 \"momentum decay\"#c\r\n"
      "let g=(sign(grad))*(sqrt((abs(grad))))\r\n"
      "m=((beta*m)+((1.0-beta)*g))\r\n"
      "var = var - (lr * select(nesterov, (beta * m) + g, m))   # end",
      example_rule() + "\n\n# trailing comment\n",
  };
  for (const std::string& text : same) {
    CAPTURE(text);
    CHECK(canonical(text) == original);
  }
  std::vector<std::string> edits = {
      // 0.9 -> the next double up: a change in the last bit.
      std::string(example_rule()).replace(example_rule().find("0.9 "), 3, "0.90000000000000013"),
      std::string(example_rule()).replace(example_rule().find("beta * m +"), 8, "m * beta"),
      std::string(example_rule()).replace(example_rule().find("1 - beta"), 8, "1 + beta"),
      std::string(example_rule()).replace(example_rule().find("= false"), 7, "= true"),
      std::string(example_rule()).replace(example_rule().find("learning rate"), 8, "Learning"),
      std::string(example_rule())
          .replace(example_rule().find("sign_sqrt_momentum"), 18, "sign_sqrt_momentum2"),
      std::string(example_rule())
          .replace(example_rule().find("select(nesterov, "), 17, "select(!nesterov, "),
      std::string(example_rule()).replace(example_rule().find("abs(grad)"), 9, "(-grad)"),
      // Each derived form is part of the canonical text: dropped, or its ISAs changed.
      std::string(example_rule()).replace(example_rule().find("loss_scaling"), 12, ""),
      std::string(example_rule()).replace(example_rule().find("sparse "), 6, ""),
      std::string(example_rule()).replace(example_rule().find("autoschedule avx512"), 19, ""),
      std::string(example_rule()).replace(example_rule().find(" avx512 "), 7, ""),
      std::string(example_rule()).replace(example_rule().find(" avx512 "), 7, " avx512, avx2"),
  };
  std::vector<std::string> seen = {original};
  for (const std::string& text : edits) {
    CAPTURE(text);
    const std::string c = canonical(text);
    for (const std::string& s : seen) CHECK(c != s);
    seen.push_back(c);
  }
  // The canonical text parses back to itself.
  CHECK(canonical(original) == original);
  CHECK(original.find("hyper beta = 0.90000000000000002 \"momentum decay\"\n") !=
        std::string::npos);
}

TEST_CASE("precedence and associativity") {
  CHECK(expr_text("a - b - c") == "((a - b) - c)");
  CHECK(expr_text("a / b * c") == "((a / b) * c)");
  CHECK(expr_text("a / b / c") == "((a / b) / c)");
  CHECK(expr_text("a + b * c") == "(a + (b * c))");
  CHECK(expr_text("a * b + c") == "((a * b) + c)");
  CHECK(expr_text("a - (b - c)") == "(a - (b - c))");
  CHECK(expr_text("-a * b") == "((-a) * b)");
  CHECK(expr_text("-a - -b") == "((-a) - (-b))");
  CHECK(expr_text("--a") == "(-(-a))");
  CHECK(expr_text("-(a + b)") == "(-(a + b))");
  CHECK(expr_text("a + b < c * d") == "((a + b) < (c * d))");
  CHECK(expr_text("a <= b") == "(a <= b)");
  CHECK(expr_text("a >= -b") == "(a >= (-b))");
  CHECK(expr_text("a == b") == "(a == b)");
  CHECK(expr_text("a != b") == "(a != b)");
  CHECK(expr_text("a > b") == "(a > b)");
  CHECK(expr_text("p || q && a < b") == "(p || (q && (a < b)))");
  CHECK(expr_text("p && q || p") == "((p && q) || p)");
  CHECK(expr_text("!p && q") == "((!p) && q)");
  CHECK(expr_text("!(a < b)") == "(!(a < b))");
  CHECK(expr_text("max(a, b) * -min(c, d)") == "(max(a, b) * (-min(c, d)))");
  CHECK(expr_text("select(p, a, b) + 1") == "(select(p, a, b) + 1)");
  CHECK(expr_text("select(p, q, a < b)") == "select(p, q, (a < b))");
  CHECK(expr_text("1e-8 + .5 + 1. + 2.5E3 + 007") == "((((1e-08 + 0.5) + 1) + 2500) + 7)");
  CHECK(expr_text("sum(a * b) / norm2(c)") == "(sum((a * b)) / norm2(c))");
}

// Found by fuzz_rule_parser: "m = " then 101 to 199 '-' then "m" parsed, but its canonical
// text did not: each "(-x)" there cost the parser two levels of its limit of 200. Now the limit
// counts the tree's height and the nesting of parentheses and calls, one level each, so every
// form at the limit (height 200) round-trips, and one level more is rejected.
TEST_CASE("nesting at the limit: whatever parses prints as text that parses back") {
  const auto times = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  const auto update = [&](const std::string& e) { return base("m = " + e + "\nvar = var\n"); };
  const auto unary = [&](int n) { return times("-", n) + "m"; };
  const auto sum = [&](int n) { return "m" + times(" + m", n); };
  const auto calls = [&](int n) { return times("abs(", n) + "m" + times(")", n); };
  const auto negated_parens = [&](int n) { return times("-(", n - 1) + "-m" + times(")", n - 1); };
  const std::vector<std::function<std::string(int)>> forms = {unary, sum, calls, negated_parens};
  for (const auto& form : forms) {
    const std::string text = update(form(199));
    CAPTURE(text);
    std::string c;
    REQUIRE_NOTHROW(c = canonical(text));
    std::string again;
    REQUIRE_NOTHROW(again = canonical(c));
    CHECK(again == c);
    CHECK_THROWS_WITH_AS(parse_rule(update(form(200)), "t.rule"),
                         doctest::Contains("nested too deeply"), RuleError);
  }
  CHECK(canonical(update(unary(3))).find("m = (-(-(-m)))\n") != std::string::npos);
}

TEST_CASE("errors: location, message, caret and suggestion") {
  const std::vector<std::pair<std::string, Expected>> cases = {
      // Empty files and the header.
      {"", {1, 1, "empty rule file"}},
      {"  \n\n\t\n", {1, 1, "empty rule file"}},
      {"# only\n# comments\n", {1, 1, "empty rule file"}},
      {"state var\nvar = var\n", {1, 1, "expected 'optimizer NAME' as the first line"}},
      {"optimiser sgd\n", {1, 1, "got 'optimiser'", "optimizer"}},
      {"\n  = 3\n", {2, 3, "expected 'optimizer NAME' as the first line, got '='"}},
      {"optimizer Sgd\n", {1, 11, "invalid optimizer name 'Sgd'"}},
      {"optimizer sgd_v2!\n", {1, 11, "invalid optimizer name 'sgd_v2!'"}},
      {"optimizer " + std::string(65, 'a') + "\n", {1, 11, "invalid optimizer name"}},
      {"optimizer   # no name\nstate v\n", {1, 13, "expected the optimizer's name"}},
      {"optimizer sgd extra\n", {1, 15, "expected end of line, got 'extra'"}},
      {base(std::string(kUpdates) + "optimizer again\n"),
       {9, 1, "a rule file has one 'optimizer' line, at 1:1"}},
      // Text, not binary.
      {std::string("optimizer x\nstate v\0\n", 21), {2, 8, "NUL byte"}},
      {"optimizer x\n# caf\xC3\n", {2, 6, "invalid UTF-8 byte 0xC3"}},
      {"optimizer x\n# \xC0\xAF overlong\n", {2, 3, "invalid UTF-8 byte 0xC0"}},
      {"optimizer x\n# \xED\xA0\x80 surrogate\n", {2, 3, "invalid UTF-8 byte 0xED"}},
      {"optimizer x\n\x7F\n", {2, 1, "control character U+007F"}},
      {"optimizer x\nstate v\x0C\n", {2, 8, "control character U+000C"}},
      {"optimizer x\nstate v\rw\n", {2, 8, "carriage return"}},
      {"optimizer x\nstate v\nv = v \xC2\x85\n", {3, 7, "control character U+0085"}},
      // Names and declarations.
      {base("let beta = 1\n"), {7, 5, "duplicate name 'beta': already declared as a hyper at 5:7"}},
      {base("input m\n"), {7, 7, "duplicate name 'm': already declared as a state at 2:12"}},
      {base("attr lr = 1\n"), {7, 6, "duplicate name 'lr'"}},
      {base("state w, w\n"), {7, 10, "duplicate name 'w': already declared as a state at 7:7"}},
      {base("state input\n"), {7, 7, "'input' is a keyword, not a name"}},
      {base("hyper sqrt = 1\n"), {7, 7, "'sqrt' is a built-in function, not a name"}},
      {base("state\n"), {7, 6, "expected a name after 'state', got end of line"}},
      {base("state w,\n"), {7, 9, "expected a name after ',', got end of line"}},
      {base("state w x\n"), {7, 9, "expected ',' or end of line, got 'x'"}},
      {base("hyper h\n"), {7, 8, "expected '=' and a default value after 'hyper h'"}},
      {base("hyper h = x\n"), {7, 11, "expected a number as the default of hyper 'h', got 'x'"}},
      {base("hyper h = false\n"), {7, 11, "a boolean is an attr"}},
      {base("attr h = maybe\n"),
       {7, 6, "attr 'h' has one choice; list at least two (h = maybe | other)"}},
      {base("attr h = \"x\"\n"), {7, 10, "expected true, false or a number"}},
      {base("hyper h = 1 \"x\" \"y\"\n"), {7, 17, "got string \"y\""}},
      {base("let h 1\n"), {7, 7, "expected '=' after 'let h', got number '1'"}},
      {base("stat w\n"), {7, 1, "expected a declaration", "state"}},
      {base("hyperr w = 1\n"), {7, 1, "expected a declaration", "hyper"}},
      {base("42\n"),
       {7, 1,
        "expected a declaration (state, input, hyper, attr, let) or an "
        "update 'STATE = expr', got number '42'"}},
      {base("m = m\nlet g = 1\nvar = var\n"), {8, 1, "'let' after an update"}},
      {base("m = m\nhyper h = 1\nvar = var\n"), {8, 1, "'hyper' after an update"}},
      // Assignments.
      {base("grad = grad\n"), {7, 1, "cannot assign to 'grad': it is an input (read only)"}},
      {base("lr = 1\n"), {7, 1, "cannot assign to 'lr': it is a hyper, declared at 4:7"}},
      {base("flag = 1\n"), {7, 1, "cannot assign to 'flag': it is an attr"}},
      {base("let g = 1\ng = 2\n"), {8, 1, "cannot assign to 'g': it is a let"}},
      {base("mm = 1\n"), {7, 1, "cannot assign to 'mm': it is not declared", "m"}},
      {base("velocity = 1\n"), {7, 1, "cannot assign to 'velocity': it is not declared"}},
      {base("m = m\nvar = var\nm = 2 * m\n"),
       {9, 1, "state 'm' is updated twice (first update at 7:1)"}},
      {base("m = m\n"), {2, 7, "state 'var' is never updated"}},
      {base("var = var\n"), {2, 12, "state 'm' is never updated"}},
      {"optimizer x\ninput g\n", {2, 8, "optimizer 'x' declares no state"}},
      {base("m = m > 0\nvar = var\n"), {7, 7, "state 'm' must be updated with a number"}},
      {base("m\n"), {7, 2, "expected '=' after 'm', got end of line"}},
      // Expressions.
      {base("m = bta * m\n"), {7, 5, "unknown identifier 'bta'", "beta"}},
      {base("m = gard\n"), {7, 5, "unknown identifier 'gard'", "grad"}},
      {base("m = zzz\n"), {7, 5, "unknown identifier 'zzz'"}},
      {base("m = g\nvar = var\n"), {7, 5, "unknown identifier 'g'"}},  // 'g' would be 1 of 1
      {base("let g = g + 1\n"), {7, 9, "unknown identifier 'g'"}},     // no self-reference
      {base("m = later\nlet later = 1\n"), {7, 5, "unknown identifier 'later'"}},
      {base("m = select(flag, m)\n"), {7, 5, "'select' expects 3 arguments, got 2"}},
      {base("m = sqrt()\n"), {7, 5, "'sqrt' expects 1 argument, got 0"}},
      {base("m = clamp(m, 0, 1, 2)\n"), {7, 5, "'clamp' expects 3 arguments, got 4"}},
      {base("m = pow(m)\n"), {7, 5, "'pow' expects 2 arguments, got 1"}},
      {base("m = sqr(m)\n"), {7, 5, "unknown function 'sqr'", "sqrt"}},
      {base("m = nrom2(m)\n"), {7, 5, "unknown function 'nrom2'", "norm2"}},
      {base("m = frobnicate(m)\n"), {7, 5, "unknown function 'frobnicate'"}},
      {base("m = m(1)\n"), {7, 5, "'m' is a state, not a function"}},
      {base("m = sqrt\n"), {7, 5, "'sqrt' is a function: call it"}},
      {base("m = m / 0\n"), {7, 9, "division by zero"}},
      {base("m = m / 0.0\n"), {7, 9, "division by zero"}},
      {base("m = m / (0e5)\n"), {7, 10, "division by zero"}},
      {base("m = m / -0\n"), {7, 10, "division by zero"}},
      {base("m = norm2(sum(m))\n"), {7, 11, "reduction 'sum' inside reduction 'norm2' (at 7:5)"}},
      {base("m = sum(m * max(norm2(grad), 1))\n"), {7, 17, "reduction 'norm2' inside"}},
      {base("let n = sum(m)\nlet k = n + 1\nm = norm2(k * m)\n"),
       {9, 11, "let 'k' contains a reduction and cannot be used inside 'norm2'"}},
      {base("m = m + 1 )\n"), {7, 11, "expected an operator or end of line, got ')'"}},
      {base("m = m grad\n"), {7, 7, "expected an operator or end of line, got 'grad'"}},
      {base("m = (m + 1\n"), {7, 11, "expected ')' to close the '(' at 7:5, got end of line"}},
      {base("m = max(m, 1\n"), {7, 13, "expected ',' or ')' in the call of 'max'"}},
      {base("m = m +\n"), {7, 8, "expected an expression, got end of line"}},
      {base("m = m +   # comment\n"), {7, 11, "expected an expression, got end of line"}},
      {base("m = m +\r\n"), {7, 8, "expected an expression, got end of line"}},
      {base("m = m + # comment"), {7, 9, "expected an expression, got end of file"}},
      {base("m = * m\n"), {7, 5, "expected an expression, got '*'"}},
      {base("m = m = 1\n"), {7, 7, "expected an operator or end of line, got '='"}},
      {base("m = state\n"), {7, 5, "expected an expression, got keyword 'state'"}},
      {base("m = true\n"), {7, 5, "'true' is not an expression"}},
      {base("m = m < grad < 1\n"), {7, 14, "comparisons cannot be chained"}},
      {base("m = flag + 1\n"), {7, 5, "the left operand of '+' must be a number, got a boolean"}},
      {base("m = 1 * (m > 0)\n"), {7, 12, "the right operand of '*' must be a number"}},
      {base("m = -flag\n"), {7, 6, "the operand of '-' must be a number"}},
      {base("let c = !m\n"), {7, 10, "the operand of '!' must be a boolean, got a number"}},
      {base("let c = m && flag\n"), {7, 9, "the left operand of '&&' must be a boolean"}},
      {base("m = select(m, m, m)\n"), {7, 12, "the condition of 'select' must be a boolean"}},
      {base("m = select(flag, m, flag)\n"), {7, 21, "the branches of 'select' must have the same"}},
      {base("m = sqrt(flag)\n"), {7, 10, "argument 1 of 'sqrt' must be a number"}},
      // Lexical errors.
      {base("hyper h = 1 \"unterminated\n"), {7, 13, "unterminated string"}},
      {base("hyper h = 1 \"no end"), {7, 13, "unterminated string"}},
      {base("m = m * 1e\n"), {7, 9, "malformed number '1e'"}},
      {base("m = m * 1e+\n"), {7, 9, "malformed number '1e+'"}},
      {base("m = m * 1.2.3\n"), {7, 9, "malformed number '1.2.3'"}},
      {base("m = m * 0x10\n"), {7, 9, "malformed number '0x10'"}},
      {base("m = m * 2beta\n"), {7, 9, "malformed number '2beta'"}},
      {base("m = m * 1e39\n"), {7, 9, "number '1e39' is out of range for fp32"}},
      {base("m = m * 1e999\n"), {7, 9, "out of range"}},
      {base("m = m * 1e-50\n"), {7, 9, "number '1e-50' underflows to zero in fp32"}},
      {base("m = m @ 1\n"), {7, 7, "unexpected character '@'"}},
      {base("m = m . 1\n"), {7, 7, "unexpected character '.'"}},
      {base("let c = flag & flag\n"), {7, 14, "unexpected character '&'", "&&"}},
      {base("let c = flag | flag\n"), {7, 14, "unexpected character '|'", "||"}},
      // Choice attrs (kBase + line 7 declares mode = tf | torch, line 8 is the case).
      {base("attr mode = tf\n"), {7, 6, "attr 'mode' has one choice; list at least two"}},
      {base("attr mode = tf | tf\n"), {7, 18, "attr 'mode' lists choice 'tf' twice"}},
      {base("attr mode = tf | 3\n"),
       {7, 18, "expected a choice (a name) for attr 'mode', got number"}},
      {base("attr mode = tf | torch\nlet c = mode == \"torhc\"\n"),
       {8, 17, "\"torhc\" is not a choice of attr 'mode' (\"tf\", \"torch\")", "torch"}},
      {base("attr mode = tf | torch\nm = m + mode\n"),
       {8, 9, "'mode' is a choice attr: compare it with == or != (mode == \"a\"), not with '+'"}},
      {base("attr mode = tf | torch\nlet c = \"tf\" == \"torch\"\n"),
       {8, 14, "'==' compares a choice attr with one of its quoted choices"}},
      // Storage lines.
      {base("storage f32, bf16n\n"),
       {7, 14, "unknown storage 'bf16n' (f32, bf16m, f16m,", "bf16m"}},
      {base("storage f32, f32\n"), {7, 14, "storage 'f32' is listed twice"}},
      {base("storage f32\nstorage bf16m\n"), {8, 1, "a rule has one 'storage' line, at 7:1"}},
      {base("storage\n"), {7, 8, "expected a storage (f32, bf16m"}},
      // The derived forms' lines.
      {base("loss_scaling\nloss_scaling\n"), {8, 1, "a rule has one 'loss_scaling' line, at 7:1"}},
      {base("sparse\n  sparse\n"), {8, 3, "a rule has one 'sparse' line, at 7:1"}},
      {base("autoschedule\nautoschedule avx2\n"),
       {8, 1, "a rule has one 'autoschedule' line, at 7:1"}},
      {base("loss_scaling on\n"),
       {7, 14, "expected end of line ('loss_scaling' takes nothing), got 'on'"}},
      {base("sparse 2\n"), {7, 8, "expected end of line ('sparse' takes nothing), got number"}},
      {base("autoschedule avx521\n"), {7, 14, "unknown ISA 'avx521' (avx512, avx2)", "avx512"}},
      {base("autoschedule avx2, avx2\n"), {7, 20, "ISA 'avx2' is listed twice"}},
      {base("autoschedule avx2,\n"), {7, 19, "expected an ISA (avx512, avx2) or end of line"}},
      {base("autoschedule avx2 avx512\n"), {7, 19, "expected ',' or end of line, got 'avx512'"}},
      {base("loss_scale\n"), {7, 1, "expected a declaration", "loss_scaling"}},
      {base("sprase\n"), {7, 1, "expected a declaration", "sparse"}},
      {base("autoschedul avx2\n"), {7, 1, "expected a declaration", "autoschedule"}},
      {base("m = m\nloss_scaling\nvar = var\n"), {8, 1, "'loss_scaling' after an update"}},
      {base("sparse\nlet n = norm2(grad)\nm = m * n\nvar = var\n"),
       {7, 1,
        "'sparse' derives a form that updates rows one index at a time, without whole-tensor "
        "reductions; this rule calls 'norm2' at 8:9"}},
      {base("loss_scaling\nhyper inv_scale = 1\n"),
       {8, 7,
        "name 'inv_scale' is taken by the 'loss_scaling' line (at 7:1), which adds an argument "
        "or attr 'inv_scale': rename this hyper"}},
      {base("state found_inf\nloss_scaling\n"),
       {7, 7, "name 'found_inf' is taken by the 'loss_scaling' line (at 8:1)"}},
      {base("attr unscale = true\nloss_scaling\n"),
       {7, 6, "name 'unscale' is taken by the 'loss_scaling' line (at 8:1)"}},
      {base("input indices\nsparse\n"),
       {7, 7, "name 'indices' is taken by the 'sparse' line (at 8:1)"}},
      {base("storage f32, bf16m\nstate model\n"),
       {8, 7, "name 'model' is taken by the 'storage' line (at 7:1)"}},
      {"optimizer " + std::string(58, 'a') + "\nstate v\nsparse\nv = v\n",
       {3, 1, "longer than 64 characters"}},
      {base("state sparse\n"), {7, 7, "'sparse' is a keyword, not a name"}},
      {base("attr mode = tf | torch\nlet c = \"tf\" == m\n"),
       {8, 17, "'==' compares a choice attr with one of its quoted choices"}},
      {base("attr mode = tf | torch\nm = mode\n"),
       {8, 5, "state 'm' must be updated with a number, got a choice"}},
      {base("attr mode = tf | torch\nm = select(mode, m, m)\n"),
       {8, 12, "the condition of 'select' must be a boolean, got a choice"}},
      {base("m = m * \xCF\x80\n"), {7, 9, "unexpected character U+03C0"}},
      // Limits.
      {base("m = " + std::string(300, '(') + "m" + std::string(300, ')') + "\n"),
       {7, 205, "expression nested too deeply"}},
      {base("m = " + std::string(300, '-') + "m\n"), {7, 204, "expression nested too deeply"}},
  };
  for (const auto& [text, want] : cases) check_error(text, want);
}

TEST_CASE("errors: the whole diagnostic, tabs and UTF-8 before the caret") {
  try {
    parse_rule(base("m = beta * m + (1 - bta) * grad\nvar = var\n"), "dir/momentum.rule");
    FAIL("no error");
  } catch (const RuleError& e) {
    CHECK(std::string(e.what()) ==
          "dir/momentum.rule:7:21: error: unknown identifier 'bta'\n"
          "m = beta * m + (1 - bta) * grad\n"
          "                    ^\n"
          "  did you mean 'beta'?");
    CHECK(e.file == "dir/momentum.rule");
    CHECK(e.line == 7);
    CHECK(e.col == 21);
    CHECK(e.message == "unknown identifier 'bta'");
    CHECK(e.suggestion == "beta");
  }
  try {
    parse_rule(base("\tm =\tm\t* 2 /\t0\n"), "t.rule");
    FAIL("no error");
  } catch (const RuleError& e) {
    CHECK(std::string(e.what()) ==
          "t.rule:7:14: error: division by zero\n"
          "\tm =\tm\t* 2 /\t0\n"
          "\t   \t \t     \t^");
  }
  try {  // é and π are 2 bytes each: the column counts bytes, the caret code points.
    parse_rule(base("hyper h = 1 \"é π\" oops\n"), "u.rule");
    FAIL("no error");
  } catch (const RuleError& e) {
    CHECK(e.col == 21);
    CHECK(std::string(e.what()) ==
          "u.rule:7:21: error: expected a description string or end of line, got 'oops'\n"
          "hyper h = 1 \"é π\" oops\n"
          "                  ^");
  }
  try {  // Bytes that are not text show as '?' and keep the caret in place.
    parse_rule(std::string("optimizer x\n\x01\xFF\0 state\n", 21), "b.rule");
    FAIL("no error");
  } catch (const RuleError& e) {
    CHECK(std::string(e.what()) ==
          "b.rule:2:1: error: control character U+0001: a rule file must be text\n"
          "??? state\n"
          "^");
  }
  try {  // The end of a file without a final newline.
    parse_rule("optimizer x\nstate v\nv = v +", "e.rule");
    FAIL("no error");
  } catch (const RuleError& e) {
    CHECK(std::string(e.what()) ==
          "e.rule:3:8: error: expected an expression, got end of file\n"
          "v = v +\n"
          "       ^");
  }
}

TEST_CASE("the built-in table is in the order of the enum") {
  for (size_t i = 0; i < builtins().size(); ++i) {
    CHECK(static_cast<size_t>(builtins()[i].fn) == i);
    CHECK(&builtin_info(builtins()[i].fn) == &builtins()[i]);
  }
  CHECK(builtin_info(Builtin::clamp).arity == 3);
  CHECK(builtin_info(Builtin::norm2).reduction);
}

TEST_CASE("edit distance and suggestions") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("bta", "beta") == 1);
  CHECK(edit_distance("beta", "btea") == 1);  // a transposition
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(closest_name("bta", {"lr", "beta", "beta1"}) == "beta");
  CHECK(closest_name("beta", {"beta1", "beta2"}) == "beta1");  // first on ties
  CHECK(closest_name("x", {"m"}).empty());                     // not a total replacement
  CHECK(closest_name("gradient", {"grad"}).empty());           // distance 4
  CHECK(closest_name("lr", {"lr"}).empty());
}

TEST_CASE("corpus: every good file parses, and its canonical text parses back to itself") {
  const std::vector<fs::path> good = corpus_files("good_");
  CHECK(good.size() >= 5);
  for (const fs::path& p : good) {
    CAPTURE(p);
    Rule r;
    CHECK_NOTHROW(r = parse_rule(read_file(p), p.filename().string()));
    const std::string c = canonical_rule_text(r);
    CHECK(canonical(c) == c);
  }
  const Rule adam = parse_rule(read_file(rules_dir() / "adam_rule.rule"), "adam");
  CHECK(adam.name == "adam_rule");
  CHECK(adam.states.size() == 3);
  CHECK(adam.hypers.size() == 6);
  const Rule lamb = parse_rule(read_file(corpus_dir() / "good_lamb.rule"), "lamb");
  REQUIRE(lamb.lets.size() == 6);
  CHECK(lamb.lets[3].has_reduction);  // w_norm
  CHECK_FALSE(lamb.lets[2].has_reduction);
}

// A bad corpus file starts with "# expect-error: LINE:COL: MESSAGE" and a line that is either
// "# expect-suggestion: NAME" or "# (no suggestion)".
TEST_CASE("corpus: every bad file fails with its expected error") {
  const std::vector<fs::path> bad = corpus_files("bad_");
  CHECK(bad.size() >= 40);
  for (const fs::path& p : bad) {
    CAPTURE(p);
    const std::string text = read_file(p);
    const std::string first = text.substr(0, text.find('\n'));
    const std::string second = source_line(text, 2);
    const std::string tag = "# expect-error: ";
    REQUIRE(first.rfind(tag, 0) == 0);
    int line = 0, col = 0, used = 0;
    REQUIRE(std::sscanf(first.c_str() + tag.size(), "%d:%d: %n", &line, &col, &used) == 2);
    const std::string message = first.substr(tag.size() + used);
    const std::string stag = "# expect-suggestion: ";
    const std::string suggestion = second.rfind(stag, 0) == 0 ? second.substr(stag.size()) : "";
    try {
      parse_rule(text, p.filename().string());
      FAIL("parsed");
    } catch (const RuleError& e) {
      CHECK(e.line == line);
      CHECK(e.col == col);
      CHECK(e.message == message);
      CHECK(e.suggestion == suggestion);
    }
  }
}

// Either parses (and then its canonical text parses back to itself) or throws a RuleError
// with a plausible location; anything else fails the test. Returns whether it parsed.
bool check_robust(const std::string& text) {
  std::string c;
  try {
    c = canonical_rule_text(parse_rule(text, "fuzz.rule"));
  } catch (const RuleError& e) {
    if (e.line < 1 || e.col < 1 || std::string(e.what()).rfind("fuzz.rule:", 0) != 0) {
      FAIL_CHECK("bad location " << e.line << ":" << e.col << " for: " << text);
    }
    return false;
  }
  try {
    if (canonical(c) != c) FAIL_CHECK("canonical text not stable for: " << text);
  } catch (const RuleError& e) {
    FAIL_CHECK("canonical text does not parse: " << e.what() << "\nfor: " << text);
  }
  return true;
}

TEST_CASE("robustness: random bytes, token soups and mutated corpus files") {
  const auto start = std::chrono::steady_clock::now();
  std::mt19937 rng(20240611);
  int parsed = 0;
  const auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };

  // Random bytes, mostly printable so that some get past the encoding check.
  const std::string printable = "abcdefgmrvxz_019.eE+-*/<>=!&|(),\"# \t\n";
  for (int k = 0; k < 1500; ++k) {
    std::string s = k % 2 ? "optimizer f\n" : "";
    const size_t n = pick(120);
    for (size_t i = 0; i < n; ++i) {
      s += pick(8) == 0 ? static_cast<char>(pick(256)) : printable[pick(printable.size())];
    }
    parsed += check_robust(s);
  }

  // Token soups after a valid prefix.
  const std::vector<std::string> tokens = {
      "optimizer", "state", "input", "hyper", "attr",   "let",   "true",  "false", "v",
      "w",         "g",     "lr",    "x",     "select", "min",   "max",   "abs",   "sign",
      "sqrt",      "rsqrt", "exp",   "log",   "pow",    "clamp", "norm2", "sum",   "0",
      "1",         "0.5",   "1e-8",  ".5",    "1e",     "(",     ")",     ",",     "=",
      "+",         "-",     "*",     "/",     "<",      "<=",    ">",     ">=",    "==",
      "!=",        "&&",    "||",    "!",     "\"d\"",  "\n",    "\n",    "# c",   "\t"};
  for (int k = 0; k < 2500; ++k) {
    std::string s = "optimizer soup\n";
    if (k % 3) s += "state v, w\ninput g\nhyper lr = 0.1\nattr x = true\n";
    const size_t n = 1 + pick(30);
    for (size_t i = 0; i < n; ++i) s += tokens[pick(tokens.size())] + " ";
    parsed += check_robust(s);
  }

  // Single-byte mutations of the good corpus files.
  const std::vector<fs::path> good = corpus_files("good_");
  REQUIRE_FALSE(good.empty());
  std::vector<std::string> seeds;
  for (const fs::path& p : good) seeds.push_back(read_file(p));
  for (int k = 0; k < 1500; ++k) {
    std::string s = seeds[pick(seeds.size())];
    for (int m = 0, count = 1 + static_cast<int>(pick(3)); m < count && !s.empty(); ++m) {
      const size_t at = pick(s.size());
      switch (pick(3)) {
        case 0:
          s.erase(at, 1);
          break;
        case 1:
          s.insert(at, 1, printable[pick(printable.size())]);
          break;
        default:
          s[at] = static_cast<char>(pick(256));
          break;
      }
    }
    parsed += check_robust(s);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("robustness: 5500 cases, " << parsed << " parsed, " << seconds << " s");
  CHECK(parsed > 100);
  CHECK(seconds < 2.0);
}

}  // namespace
}  // namespace opforge::dsl::rules
