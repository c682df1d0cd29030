// opforge describe: an op's declaration from its descriptors, as text and JSON.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

TEST_CASE("describe apply_adam: formula and every argument in TF order") {
  const Result r = opforge_reg({"describe", "apply_adam"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, "lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)"));
  CHECK(contains(r.out, "var -= lr_t * m / (sqrt(v) + epsilon)"));
  // A string attr's choices, under it (rule choice attrs are string attrs too).
  CHECK(contains(r.out, "\n  epsilon_mode   string default tf "));
  CHECK(contains(r.out, "\n                 choices tf | torch\n"));
  // Each variant line names its storage, which --attr storage=TAG selects.
  CHECK(contains(r.out, "attrs epsilon_mode=tf,skip_if_nonfinite=false,storage=f32,"));
  // The "arguments (in order):" section, one argument per line.
  const size_t start = r.out.find("arguments (in order):\n");
  REQUIRE(start != std::string::npos);
  std::istringstream lines(r.out.substr(start));
  std::string line;
  std::getline(lines, line);
  std::vector<std::string> names;
  // (Lines "  with ATTRS: ..." list the arguments of variants with more of them.)
  while (std::getline(lines, line) && line.rfind("  ", 0) == 0 && line.rfind("  with ", 0) != 0) {
    std::istringstream w(line);
    std::string name;
    w >> name;
    names.push_back(name);
  }
  const std::vector<std::string> tf = {"var", "m",     "v",     "beta1_power", "beta2_power",
                                       "lr",  "beta1", "beta2", "epsilon",     "grad"};
  CHECK(names == tf);
  // The suggested command line lists them in the same order.
  size_t pos = r.out.find("run it: opforge run apply_adam");
  REQUIRE(pos != std::string::npos);
  for (const auto& n : tf) {
    const size_t at = r.out.find(" " + n + "=", pos);
    CHECK_MESSAGE(at != std::string::npos, n << " out of order in the run line");
    if (at != std::string::npos) pos = at;
  }
}

TEST_CASE("describe --json: every variant's descriptor") {
  const Result r = opforge_reg({"describe", "apply_adam", "--json"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const json v = parse_json(r);
  REQUIRE(v.is_array());
  // 8 hand-scheduled fp32, 1 autoscheduled (recipe adams2019), 12 mixed precision (bf16m,
  // f16m, bf16s, bf16ms), 12 with loss scaling (10 of them bf16m, f16m or bf16ms), 8 with 8-bit
  // states (q8s, q8ls, bf16mq8s, q8s with loss scaling), 4 with FP8 gradients (e4m3g, e5m2g)
  CHECK(v.size() == 45);
  int autoscheduled = 0, mixed = 0;
  for (const auto& d : v) autoscheduled += d.at("schedule").at("recipe") == "adams2019";
  CHECK(autoscheduled == 1);
  for (const auto& d : v) {
    CHECK(d.at("op") == "apply_adam");
    const std::string id = d.at("variant");
    const bool mp = id.find("__f32__") == std::string::npos;
    bool copy = false;  // master weights: fp32 var + model copy
    for (const char* tag : {"__bf16m__", "__f16m__", "__bf16ms__", "__bf16mq8s__"})
      copy = copy || id.find(tag) != std::string::npos;
    // 8-bit states: m_absmax and v_absmax
    const bool q8 = id.find("q8s__") != std::string::npos || id.find("q8ls__") != std::string::npos;
    // FP8 gradients: + grad_scale_inv
    const bool fp8 =
        id.find("__e4m3g__") != std::string::npos || id.find("__e5m2g__") != std::string::npos;
    mixed += mp;
    // + the write-only model copy, + inv_scale (unscale), + found_inf (unscale or skip)
    const bool unscale = id.find("__unscale_1") != std::string::npos;
    const bool skip = id.find("__skip_if_nonfinite_1") != std::string::npos;
    CHECK(d.at("inputs").size() == 10u + copy + unscale + (unscale || skip) + 2 * q8 + fp8);
  }
  CHECK(mixed == 34);
}

TEST_CASE("describe: an unknown op exits 1 naming it") {
  const Result r = opforge_reg({"describe", "apply_adma"});
  CHECK(r.rc == 1);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, "did you mean 'apply_adam'"));
}

}  // namespace
}  // namespace opforge::testing
