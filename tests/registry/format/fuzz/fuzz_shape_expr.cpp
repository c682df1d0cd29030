// libFuzzer target for shape expressions (registry/format/shape_expr.cpp).
//
// Every input is parsed as an expression. A ShapeExprError is the expected way to reject bad
// text, and bad arithmetic (division by zero, int64 overflow) at evaluation; any other
// exception (it escapes, and libFuzzer reports it) or crash is a bug, UB included (UBSan is
// fatal). A parsed expression is evaluated with no bindings, with every other name bound and
// with every name bound to a value picked from the name (small extents, 0, -1, the int64
// limits); with every name bound it must have a value.
//
// Built with clang++-14 -fsanitize=fuzzer,address,undefined by tests/CMakeLists.txt when clang
// and libFuzzer are installed; seed corpus: tests/registry/format/corpus/shape_expr/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>

#include "registry/format/shape_expr.h"

using opforge::registry::ShapeExpr;
using opforge::registry::ShapeExprError;

namespace {

int64_t value_for(const std::string& name) {
  static const int64_t kValues[] = {0,
                                    1,
                                    2,
                                    3,
                                    7,
                                    64,
                                    -1,
                                    -2,
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min(),
                                    int64_t{1} << 31,
                                    -(int64_t{1} << 32)};
  uint32_t h = 0;
  for (unsigned char c : name) h = h * 31 + c;
  return kValues[h % (sizeof kValues / sizeof kValues[0])];
}

// nullopt when the evaluation was rejected with a ShapeExprError.
std::optional<std::optional<int64_t>> try_evaluate(const ShapeExpr& e,
                                                   const std::map<std::string, int64_t>& env) {
  try {
    return e.evaluate(env);
  } catch (const ShapeExprError&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  ShapeExpr e;
  try {
    e = ShapeExpr::parse(text);
  } catch (const ShapeExprError&) {
    return 0;  // rejected with a message: fine
  }
  if (e.text() != text) {
    std::fprintf(stderr, "parsed expression keeps another text: \"%s\"\n", e.text().c_str());
    std::abort();
  }

  std::map<std::string, int64_t> some, all;
  bool bind = true;
  for (const std::string& name : e.names()) {
    all[name] = value_for(name);
    if (bind) some[name] = all[name];
    bind = !bind;
  }
  try_evaluate(e, {});
  try_evaluate(e, some);
  const auto full = try_evaluate(e, all);
  if (full && !*full) {
    std::fprintf(stderr, "no value with every name bound: \"%s\"\n", text.c_str());
    std::abort();
  }
  return 0;
}
