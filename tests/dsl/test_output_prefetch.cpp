// dsl/output_prefetch: a scratch Func whose values carry the marker, computed per row of the
// output and vectorized, lowers to one prefetch of the output per vector and no marker; the
// JIT-compiled pipeline computes the same values as without the marker, at odd widths; a
// marker naming no output or with the wrong coordinate count is refused. An input's marker
// lowers to one prefetcht0 call per 64-byte line of the vector, under its condition, and the
// pipeline (linked with dsl/table_lookup.c's bitcode, as the kernels are) computes the same
// values with the condition true or false.
#include <doctest/doctest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/kernel_pipeline.h"
#include "dsl/nn_op_decl.h"
#include "dsl/output_prefetch.h"
#include "dsl/table_lookup.h"
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

// y(i) = 3 x(i) - 1, 16 lanes, through a scratch e per 64-element chunk whose values carry a
// prefetch of x at i + ahead (clamped to the last element) where `when`.
struct InputPipeline {
  ImageParam x{Halide::Float(32), 1, "x"};
  Func y = output_func("y");
  Halide::Pipeline p;
};

InputPipeline input_pipeline(int ahead, int from) {
  InputPipeline ip;
  Var i("i"), io("io"), ii("ii");
  Func e("e");
  const Expr n = ip.x.dim(0).extent();
  e(i) = with_input_prefetch(ip.x(i) * 3.0f, ip.x, Halide::min(i + ahead, n - 1), n >= from);
  ip.y(i) = e(i) - 1.0f;
  ip.y.split(i, io, ii, 64, Halide::TailStrategy::GuardWithIf);
  e.compute_at(ip.y, io).vectorize(i, 16, Halide::TailStrategy::GuardWithIf);
  ip.p = Halide::Pipeline(ip.y);
  add_output_prefetch_pass(ip.p, {ip.y}, algorithm_text(ip.y));
  return ip;
}

TEST_CASE("input prefetch: one prefetcht0 per line of a vector, under its condition") {
  InputPipeline ip = input_pipeline(512, 1000);
  const std::string stmt = lowered_stmt(ip.p, {ip.x});
  CHECK(stmt.find("opforge_prefetch_input") == std::string::npos);
  // 16 fp32 lanes are one line: one call per vector (the loop and its guarded tail), each
  // the only statement of an if on the condition (which Halide hoists into a let).
  CHECK(count(stmt, "opforge_prefetch_t0(x, ") >= 1);
  CHECK(stmt.find("= 1000 <= x.extent.0") != std::string::npos);
  std::istringstream lines(stmt);
  std::string previous, line;
  int calls = 0;
  while (std::getline(lines, line)) {
    if (line.find("opforge_prefetch_t0(x, ") != std::string::npos) {
      ++calls;
      CHECK_MESSAGE(previous.find("if (") != std::string::npos, previous, "\n", line);
    }
    previous = line;
  }
  CHECK(calls == count(stmt, "opforge_prefetch_t0("));
}

TEST_CASE("input prefetch: values unchanged with the prefetch on or off, at odd sizes") {
  const Halide::Target host = Halide::get_host_target();
  if (permutes_of(host) == Permutes::none) {
    MESSAGE("skipped: dsl/table_lookup.c's bitcode is built for x86-64 AVX2 and AVX-512 only");
    return;
  }
  for (int from : {0, 1 << 30}) {
    InputPipeline ip = input_pipeline(512, from);
    Halide::Module m = ip.p.compile_to_module({ip.x}, "prefetched", host);
    link_table_lookups(m);
    Halide::Internal::JITModule jit(m, m.get_function_by_name("prefetched"), {});
    for (int n : {1, 5, 17, 1000, 65543}) {
      Buffer<float> X(n), Y(n);
      for (int k = 0; k < n; ++k) X(k) = static_cast<float>((k * 7) % 31);
      std::vector<const void*> argv = {X.raw_buffer(), Y.raw_buffer()};
      REQUIRE(jit.argv_function()(argv.data()) == 0);
      int wrong = 0;
      for (int k = 0; k < n; ++k) wrong += Y(k) != 3.0f * X(k) - 1.0f;
      CHECK_MESSAGE(wrong == 0, "n = ", n, ", from = ", from);
    }
  }
}

}  // namespace
}  // namespace opforge::dsl
