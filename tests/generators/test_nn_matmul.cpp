// matmul beyond the reference run (its fp64 reference and problems:
// registry/builder/nn_golden/matmul.cpp; test_nn_kernels.cpp runs every variant on them): the
// declaration's output dims, inner-dim checks and cost under each transpose.
#include <doctest/doctest.h>

#include "generators/nn_ops.h"
#include "registry/builder/nn_golden/nn_reference.h"
#include "registry/format/shape_expr.h"

namespace opforge::testing {
namespace {

using namespace nn_golden;  // NnProblem, NnReference, the formulas

TEST_CASE("matmul declaration: output dims, inner-dim checks and cost follow the transposes") {
  const auto& decl = generators::matmul();
  decl.validate();
  auto eval = [](const std::string& e, const std::map<std::string, int64_t>& env) {
    return *registry::ShapeExpr::parse(e).evaluate(env);
  };
  // a: 2 x 3 stored, b: 3 x 4 stored.
  std::map<std::string, int64_t> env = {{"B", 1},          {"a_rows", 2}, {"a_cols", 3},
                                        {"b_rows", 3},     {"b_cols", 4}, {"transpose_a", 0},
                                        {"transpose_b", 0}};
  const auto& out = decl.outputs().at(0);
  CHECK(eval(out.dims[1], env) == 2);
  CHECK(eval(out.dims[2], env) == 4);
  CHECK(eval(decl.cost().flops, env) == 2 * 2 * 3 * 4);
  for (const auto& c : decl.checks()) CHECK(eval(c.condition, env) == 1);
  // transpose_a: op(a) is 3 x 2, so K = a_rows = 2 != b_rows = 3: exactly one check fails.
  env["transpose_a"] = 1;
  int failed = 0;
  for (const auto& c : decl.checks()) {
    if (eval(c.condition, env) == 0) {
      ++failed;
      CHECK(c.message.find("transpose_a") != std::string::npos);
    }
  }
  CHECK(failed == 1);
  // transpose_a and transpose_b with a 3 x 2 and b 4 x 3 stored: M = 2, N = 4, K = 3.
  env = {{"B", 5},      {"a_rows", 3},      {"a_cols", 2},     {"b_rows", 4},
         {"b_cols", 3}, {"transpose_a", 1}, {"transpose_b", 1}};
  CHECK(eval(out.dims[1], env) == 2);
  CHECK(eval(out.dims[2], env) == 4);
  CHECK(eval(decl.cost().flops, env) == 2 * 5 * 2 * 4 * 3);
  for (const auto& c : decl.checks()) CHECK(eval(c.condition, env) == 1);
}

}  // namespace
}  // namespace opforge::testing
