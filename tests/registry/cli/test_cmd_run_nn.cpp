// NN ops through the CLI: `opforge run` allocates the outputs with the descriptor's shape rule,
// picks the algorithm by shape (and honours --attr algorithm=NAME), writes .npy; bad shapes exit
// non-zero with one line naming the argument and the shapes, and write nothing; `describe`
// prints the dims, checks and the algorithm rule; `bench` runs an NN op's example.
#include <doctest/doctest.h>

#include "cli_util.h"

namespace opforge::testing {
namespace {

npy::Array f32(std::vector<int64_t> shape, float scale) {
  npy::Array a;
  a.descr = "<f4";
  a.shape = std::move(shape);
  a.data.resize(a.elements() * 4);
  auto* f = reinterpret_cast<float*>(a.data.data());
  for (int64_t i = 0; i < a.elements(); ++i) f[i] = scale * static_cast<float>((i * 7) % 11 - 5);
  return a;
}

const std::vector<std::string> kConvScalars = {
    "--scalar", "stride_h=1", "--scalar",     "stride_w=1", "--scalar",     "pad_h=1",  "--scalar",
    "pad_w=1",  "--scalar",   "dilation_h=1", "--scalar",   "dilation_w=1", "--scalar", "groups=1"};

}  // namespace

TEST_CASE("opforge run conv2d: outputs shaped by the rule, same values for every algorithm") {
  TempDir tmp;
  npy::write_atomic(tmp / "x.npy", f32({2, 3, 5, 6}, 0.125f));
  npy::write_atomic(tmp / "w.npy", f32({4, 3, 3, 3}, 0.25f));
  std::map<std::string, std::vector<float>> y;
  for (const char* algo : {"", "direct", "direct_oc"}) {
    std::vector<std::string> args = {"run",   "conv2d",
                                     "--in",  "x=" + (tmp / "x.npy"),
                                     "--in",  "weight=" + (tmp / "w.npy"),
                                     "--out", tmp / (std::string("out_") + algo)};
    args.insert(args.end(), kConvScalars.begin(), kConvScalars.end());
    if (*algo) args.insert(args.end(), {"--attr", std::string("algorithm=") + algo});
    const Result r = opforge_reg(args);
    REQUIRE_MESSAGE(r.rc == 0, r.all());
    // Without --attr the shapes pick direct_oc_small (a 3x3 filter, 30 output pixels).
    CHECK(contains(r.out, *algo ? std::string("__") + algo + "__" : "__direct_oc_small__"));
    const npy::Array out = npy::read(tmp / (std::string("out_") + algo + "/y.npy"));
    CHECK(out.shape == std::vector<int64_t>{2, 4, 5, 6});
    const auto* p = reinterpret_cast<const float*>(out.data.data());
    y[algo].assign(p, p + out.elements());
  }
  // Inputs are small multiples of 1/8 and 1/4: every algorithm's sums are exact.
  for (const char* algo : {"", "direct_oc"}) CHECK(y[algo] == y["direct"]);
}

TEST_CASE("opforge run with bad NN shapes exits 1, names the argument, writes nothing") {
  TempDir tmp;
  npy::write_atomic(tmp / "x.npy", f32({1, 3, 5, 5}, 1));
  npy::write_atomic(tmp / "w.npy", f32({4, 2, 3, 3}, 1));
  std::vector<std::string> args = {
      "run",   "conv2d",   "--in", "x=" + (tmp / "x.npy"), "--in", "weight=" + (tmp / "w.npy"),
      "--out", tmp / "out"};
  args.insert(args.end(), kConvScalars.begin(), kConvScalars.end());
  Result r = opforge_reg(args);
  CHECK(r.rc == 1);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, "CG = 2 (weight [4, 2, 3, 3])"));
  CHECK(contains(r.err, "C = 3 (x [1, 3, 5, 5])"));
  CHECK(empty_or_absent(tmp / "out"));
  // A forced algorithm that does not apply.
  npy::write_atomic(tmp / "w5.npy", f32({4, 3, 5, 5}, 1));
  args[5] = "weight=" + (tmp / "w5.npy");
  args.insert(args.end(), {"--attr", "algorithm=winograd"});
  r = opforge_reg(args);
  CHECK(r.rc == 1);
  CHECK(contains(r.err, "algorithm 'winograd' applies only when KH == 3"));
  CHECK(empty_or_absent(tmp / "out"));
}

TEST_CASE("opforge describe conv2d shows dims, checks and the algorithm rule") {
  const Result r = opforge_reg({"describe", "conv2d"});
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "[N, C, H, W]"));
  CHECK(contains(r.out, "CG * groups == C"));
  CHECK(contains(r.out, "winograd   priority 10  when KH == 3 && KW == 3"));
  CHECK(contains(r.out, "direct     priority 0   when always"));
}

TEST_CASE("opforge bench runs an NN op on given shapes with its bandwidth kernel") {
  const Result r = opforge_reg(
      {"bench", "matmul", "--shape", "a=3,40,33", "--shape", "b=33,20", "--reps", "3", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const auto j = parse_json(r);
  CHECK(j["problem"] == "a=3,40,33 b=33,20");
  CHECK(j["flops"] == 2.0 * 3 * 40 * 33 * 20);
  CHECK(j["runs"][0]["ms"].get<double>() > 0);
  const Result bad = opforge_reg({"bench", "matmul", "--shape", "a=3,40,33", "--shape", "b=34,20"});
  CHECK(bad.rc == 1);
  CHECK(contains(bad.err, "a's columns (K) must equal b's rows (K)"));
}

}  // namespace opforge::testing
