// dsl/output_prefetch: a scratch Func whose values carry the marker, computed per row of the
// output and vectorized, lowers to one prefetch of the output per vector and no marker; the
// JIT-compiled pipeline computes the same values as without the marker, at odd widths; a
// marker naming no output or with the wrong coordinate count is refused.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/kernel_pipeline.h"
#include "dsl/nn_op_decl.h"
#include "dsl/output_prefetch.h"
#include "lowered_stmt.h"

namespace opforge::dsl {
namespace {

using Halide::Buffer;
using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::Var;

// y(c, r) = 2 x(c, r) + 1 through a scratch row e computed per row of y; `marker` wraps e's
// value as with_output_prefetch(value, `output`, `coords(c, r)`).
struct RowPipeline {
  ImageParam x{Halide::Float(32), 2, "x"};
  Func y = output_func("y");  // exactly "y" in every pipeline of the process
  Halide::Pipeline p;
};

RowPipeline row_pipeline(const std::string& output, int ncoords) {
  RowPipeline rp;
  Var c("c"), r("r");
  Func e("e");
  std::vector<Expr> coords = {c, r};
  coords.resize(ncoords, r);
  e(c, r) = with_output_prefetch(rp.x(c, r) * 2.0f, output, coords);
  rp.y(c, r) = e(c, r) + 1.0f;
  e.compute_at(rp.y, r).vectorize(c, 8, Halide::TailStrategy::GuardWithIf);
  rp.y.vectorize(c, 8, Halide::TailStrategy::GuardWithIf).parallel(r);
  rp.p = Halide::Pipeline(rp.y);
  add_output_prefetch_pass(rp.p, {rp.y}, algorithm_text(rp.y));
  return rp;
}

using testing::lowered_stmt;

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("output prefetch: one prefetch of y per vector of e, and no marker left") {
  RowPipeline rp = row_pipeline("y", 2);
  const std::string stmt = lowered_stmt(rp.p, {rp.x});
  CHECK(stmt.find("opforge_prefetch_output") == std::string::npos);
  // e's vector loop and its GuardWithIf tail each hold one (the store in the tail's
  // predicated branch).
  CHECK(count(stmt, "prefetch(") >= 2);
  // Of y, at element (c, r): dim 0's stride is constrained to 1, so the column enters as is.
  const size_t at = stmt.find("prefetch(y, ");
  REQUIRE(at != std::string::npos);
  const std::string line = stmt.substr(at, stmt.find('\n', at) - at);
  CHECK_MESSAGE(line.find("y.stride.0") == std::string::npos, line);
  CHECK_MESSAGE(line.find("y.stride.1") != std::string::npos, line);
}

TEST_CASE("output prefetch: values unchanged at odd widths and row counts") {
  RowPipeline rp = row_pipeline("y", 2);
  rp.p.compile_jit(Halide::get_host_target());
  for (int w : {1, 5, 17, 1000}) {
    for (int h : {1, 3, 7}) {
      Buffer<float> X(w, h);
      for (int r = 0; r < h; ++r)
        for (int c = 0; c < w; ++c) X(c, r) = static_cast<float>((c * 7 + r * 3) % 29);
      rp.x.set(X);
      Buffer<float> Y = rp.p.realize({w, h});
      int wrong = 0;
      for (int r = 0; r < h; ++r)
        for (int c = 0; c < w; ++c) wrong += Y(c, r) != 2.0f * X(c, r) + 1.0f;
      CHECK_MESSAGE(wrong == 0, "w = ", w, ", h = ", h);
    }
  }
}

TEST_CASE("output prefetch: a marker of no output, or with the wrong coords, is refused") {
  RowPipeline no_output = row_pipeline("z", 2);
  CHECK_THROWS_WITH_AS(lowered_stmt(no_output.p, {no_output.x}),
                       "with_output_prefetch: 'z' is not an output of the pipeline",
                       std::invalid_argument);
  RowPipeline three = row_pipeline("y", 3);
  CHECK_THROWS_WITH_AS(lowered_stmt(three.p, {three.x}),
                       "with_output_prefetch: output 'y' has 2 dims, the marker 3 coords",
                       std::invalid_argument);
}

}  // namespace
}  // namespace opforge::dsl
