// The command table: --help, unknown commands, and an op's own help from its descriptor.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

TEST_CASE("help and unknown commands") {
  const Result top = opforge({"--help"});
  CHECK(top.rc == 0);
  for (const char* c : {"build", "list", "describe", "inspect", "run", "bench", "cache"}) {
    CHECK(contains(top.out, c));
  }
  const Result none = opforge({});
  CHECK(none.rc == 2);

  const Result run = opforge({"run", "--help"});
  CHECK(run.rc == 0);
  CHECK(contains(run.out, "usage: opforge run"));
  for (const char* o : {"--in", "--scalar", "--attr", "--isa", "--out", "--registry"}) {
    CHECK(contains(run.out, o));
  }

  const Result bad = opforge({"frobnicate"});
  CHECK(bad.rc == 2);
  CHECK(one_line(bad.err));
  CHECK(contains(bad.err, "'frobnicate'"));
  const Result near = opforge({"lsit"});
  CHECK(near.rc == 2);
  CHECK(contains(near.err, "did you mean 'list'"));
}

TEST_CASE("run OP --help lists the op's own arguments in order, from its descriptor") {
  const Result r = opforge_reg({"run", "apply_adam", "--help"});
  CHECK(r.rc == 0);
  size_t at = 0;
  for (const char* arg :
       {"--in var=", "--in m=", "--in v=", "--scalar beta1_power=", "--scalar beta2_power=",
        "--scalar lr=", "--scalar beta1=", "--scalar beta2=", "--scalar epsilon=", "--in grad="}) {
    const size_t next = r.out.find(arg, at);
    CHECK_MESSAGE(next != std::string::npos, arg << " missing or out of order");
    if (next != std::string::npos) at = next;
  }
  CHECK(contains(r.out, "--attr use_nesterov=bool"));
  CHECK(contains(r.out, "Nesterov"));
}

}  // namespace
}  // namespace opforge::testing
