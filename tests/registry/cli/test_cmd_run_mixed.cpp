// Mixed-precision variants (bf16m / f16m: narrow gradients and model copy, fp32 master) through
// the CLI: --attr storage=... selects them; bench allocates buffers of their dtypes and compares
// with the bandwidth kernel of the same dtypes; check runs them against the fp64 golden.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

TEST_CASE("bench apply_adam --attr storage=bf16m: typed buffers, same-dtype bandwidth kernel") {
  for (const std::string storage : {"bf16m", "f16m"}) {
    CAPTURE(storage);
    const Result r = opforge_reg({"bench", "apply_adam", "--attr", "storage=" + storage, "--n",
                                  "10007", "--reps", "11", "--json"});
    REQUIRE_MESSAGE(r.rc == 0, r.all());
    const json v = parse_json(r);
    CHECK(v.at("variant").get<std::string>().find("__" + storage + "__") != std::string::npos);
    CHECK(
        v.at("bandwidth_kernel").get<std::string>().rfind("bandwidth_s3_g1_" + storage + "__", 0) ==
        0);
    CHECK(v.at("op_us").get<double>() > 0);
  }
  // fp32 stays the default.
  const Result f = opforge_reg({"bench", "apply_adam", "--n", "1000", "--reps", "3", "--json"});
  REQUIRE_MESSAGE(f.rc == 0, f.all());
  CHECK(parse_json(f).at("variant").get<std::string>().find("__f32__") != std::string::npos);
}

// `check OP --attr storage=S` passes against the fp64 golden and reports these states (and
// not the `absent` ones).
void check_storage(const std::string& op, const std::string& storage,
                   const std::vector<std::string>& states,
                   const std::vector<std::string>& absent = {}) {
  CAPTURE(op);
  CAPTURE(storage);
  const Result r =
      opforge_reg({"check", op, "--attr", "storage=" + storage, "--n", "5003", "--json"});
  CHECK_MESSAGE(r.rc == 0, r.all());
  if (r.rc != 0) return;
  const json j = parse_json(r);
  for (const auto& state : states) CHECK_MESSAGE(j.at("states").contains(state), state);
  for (const auto& state : absent) CHECK_MESSAGE(!j.at("states").contains(state), state);
}

TEST_CASE("check --attr storage=bf16m|f16m: master and model copy against the fp64 golden") {
  for (const std::string op :
       {"apply_adam", "apply_momentum", "apply_gradient_descent", "apply_adamw"}) {
    for (const std::string storage : {"bf16m", "f16m"})
      check_storage(op, storage, {"model", "var"});
  }
}

TEST_CASE("bf16 states (bf16s, bf16ms): check against the golden, bench with the same dtypes") {
  for (const std::string op : {"apply_adam", "apply_adamw"}) {
    check_storage(op, "bf16s", {"var", "m", "v"}, {"model"});
    check_storage(op, "bf16ms", {"var", "m", "v", "model"});
  }
  const Result b = opforge_reg(
      {"bench", "apply_adam", "--attr", "storage=bf16s", "--n", "10007", "--reps", "11", "--json"});
  REQUIRE_MESSAGE(b.rc == 0, b.all());
  const json v = parse_json(b);
  CHECK(v.at("bandwidth_kernel").get<std::string>().rfind("bandwidth_s3_g1_bf16s__", 0) == 0);
  CHECK(v.at("bytes_per_call").get<double>() == 20.0 * 10007);  // var, m, v, grad: 12 + 8 B
}

TEST_CASE("an unknown storage is an error naming it") {
  const Result r = opforge_reg({"bench", "apply_adam", "--attr", "storage=f8m", "--n", "100"});
  CHECK(r.rc != 0);
  CHECK(contains(r.err, "storage=f8m"));
}

}  // namespace
}  // namespace opforge::testing
