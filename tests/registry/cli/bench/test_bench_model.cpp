// bench OP --model PRESET (multi-tensor apply: one call over the model's flat buffers, one call
// per tensor, the bandwidth kernel) and bench --models. Smoke tests with one rep: no timing
// is asserted, only that every series ran and the output says what it measured.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "../cli_util.h"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

void check_series(const json& s, long long calls) {
  CHECK(s.at("calls").get<long long>() == calls);
  CHECK(s.at("us").get<double>() > 0);
  CHECK(s.at("gbps").get<double>() > 0);
  CHECK(s.at("elements_per_s").get<double>() > 0);
  CHECK(s.at("pct_of_bw").get<double>() > 0);
}

TEST_CASE("bench apply_adam --model transformer-small --json: GPT-2 small in one call") {
  const Result r =
      opforge_reg({"bench", "apply_adam", "--model", "transformer-small", "--reps", "1", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json j = parse_json(r);
  CHECK(j.at("op") == "apply_adam");
  CHECK(j.at("model") == "transformer-small");
  CHECK(j.at("tensors").get<int>() == 148);
  CHECK(j.at("model_elements").get<long long>() == 124439808);
  CHECK(j.at("padded_elements").get<long long>() == 124439808);
  CHECK(j.at("alignment").get<int>() == 32);
  CHECK(j.at("reps").get<int>() == 1);
  CHECK(j.at("storage") == "f32");
  CHECK(j.at("bytes_per_element").get<double>() == 28);
  check_series(j.at("one_call"), 1);
  check_series(j.at("per_tensor"), 148);
  CHECK(j.at("bandwidth_kernel").get<std::string>().rfind("bandwidth_s3_g1__", 0) == 0);
  CHECK(j.at("bandwidth_shares_buffers").get<bool>());
  CHECK(j.at("bandwidth").at("gbps").get<double>() > 0);
  CHECK(j.at("speedup").get<double>() > 0);
}

TEST_CASE("bench --model resnet-1001, bf16m storage and --align: the text report") {
  const Result r = opforge_reg({"bench", "apply_adam", "--model", "resnet-1001", "--attr",
                                "storage=bf16m", "--align", "1", "--reps", "1", "--threads", "1"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, "__bf16m__"));
  CHECK(contains(r.out,
                 "model resnet-1001: 3005 tensors, 10327706 elements (10327706 with "
                 "padding to 1)"));
  CHECK(contains(r.out, "one call "));
  CHECK(contains(r.out, "3005 calls, per tensor"));
  CHECK(contains(r.out, "bandwidth_s3_g1_bf16m__"));
  CHECK(contains(r.out, "% of bandwidth"));
  CHECK(contains(r.out, "the speed of one call per tensor"));
  const Result sgd = opforge_reg(
      {"bench", "apply_gradient_descent", "--model", "resnet-1001", "--reps", "1", "--json"});
  REQUIRE_MESSAGE(sgd.rc == 0, sgd.all());
  const json j = parse_json(sgd);
  CHECK(j.at("padded_elements").get<long long>() > j.at("model_elements").get<long long>());
  check_series(j.at("per_tensor"), 3005);
}

TEST_CASE("bench --models lists the presets; --help names them") {
  const Result r = opforge({"bench", "--models"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, "transformer-small"));
  CHECK(contains(r.out, "148 tensors    124439808 elements"));
  CHECK(contains(r.out, "resnet-1001"));
  CHECK(contains(r.out, "3005 tensors"));
  const Result j = opforge({"bench", "--models", "--json"});
  REQUIRE_MESSAGE(j.rc == 0, j.all());
  const json list = parse_json(j);
  REQUIRE(list.size() == 3);
  CHECK(list[0].at("name") == "transformer-small");
  CHECK(list[0].at("elements").get<long long>() == 124439808);
  const Result help = opforge({"bench", "--help"});
  CHECK(help.rc == 0);
  CHECK(contains(help.out, "--model PRESET"));
  CHECK(contains(help.out, "transformer-small, transformer-medium, resnet-1001"));
  CHECK(contains(help.out, "--models"));
  CHECK(opforge({"bench"}).rc == 2);  // an op is still required without --models
}

TEST_CASE("bench --model: ops that cannot run on flat buffers and bad options are errors") {
  const Result lamb = opforge_reg({"bench", "apply_lamb", "--model", "resnet-1001"});
  CHECK(lamb.rc == 1);
  CHECK(contains(lamb.err, "op 'apply_lamb' needs per-tensor norms"));
  CHECK(lamb.out.empty());
  const Result sparse = opforge_reg({"bench", "sparse_adam", "--model", "resnet-1001"});
  CHECK(sparse.rc == 1);
  CHECK(contains(sparse.err, "op 'sparse_adam' is a sparse op"));
  const Result unknown = opforge_reg({"bench", "apply_adam", "--model", "resnet1001"});
  CHECK(unknown.rc == 1);
  CHECK(contains(unknown.err, "unknown model preset 'resnet1001' (did you mean 'resnet-1001'?)"));
  const Result align =
      opforge_reg({"bench", "apply_adam", "--model", "resnet-1001", "--align", "3"});
  CHECK(align.rc == 1);
  CHECK(contains(align.err, "alignment must be a power of two"));
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--n", "1000"}, {"--split", "2^20"}, {"--rows", "10"}}) {
    std::vector<std::string> args = {"bench", "apply_adam", "--model", "resnet-1001"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = opforge_reg(args);
    CHECK(r.rc == 2);
    CHECK(contains(r.err, "--model sets the tensors"));
  }
  CHECK(contains(opforge_reg({"bench", "all", "--model", "resnet-1001"}).err,
                 "--model takes one op"));
  CHECK(contains(opforge_reg({"bench", "apply_adam", "--align", "16"}).err,
                 "--align goes with --model"));
}

}  // namespace
}  // namespace opforge::testing
