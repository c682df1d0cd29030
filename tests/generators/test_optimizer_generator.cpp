// The ops as a standard Halide Generator: opforge_gen (GenGen's command line) emits each op
// with its arguments in the declaration's (TensorFlow's) order and rejects unknown ops.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "generators/op_table.h"

namespace opforge::testing {
namespace {

namespace fs = std::filesystem;

int run(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  return WEXITSTATUS(pclose(p));
}

TEST_CASE("opforge_gen emits every op with its arguments in declaration order") {
  char tmpl[] = "/tmp/opforge-gen-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  std::set<std::string> done;
  for (const auto& row : generators::op_table()) {
    const dsl::ResolvedOp op = row.resolve();
    if (!op.optimizer()) continue;  // NN ops have no Generator form
    const dsl::OptimizerDecl& d = op.as_optimizer();
    if (!done.insert(d.name()).second) continue;
    if (op.states.empty()) continue;  // results only: no Generator form
    CAPTURE(d.name());
    std::string out;
    const std::string cmd = std::string(OPFORGE_GEN_EXE) + " -g opforge_optimizer -o " +
                            dir.string() + " -e c_header -n " + d.name() + " -f gen_" + d.name() +
                            " target=x86-64-linux-avx2-no_runtime op=" + d.name() +
                            " schedule=tasks:4";
    REQUIRE_MESSAGE(run(cmd, &out) == 0, out);
    std::ifstream h(dir / (d.name() + ".h"));
    std::stringstream text;
    text << h.rdbuf();
    const std::string header = text.str();
    const auto sig = header.find("int gen_" + d.name() + "(");
    REQUIRE(sig != std::string::npos);
    size_t at = sig;
    for (const auto& a : dsl::resolve(d).args) {
      const size_t next = header.find(
          "_" + a.name + (a.role == registry::Input::Role::scalar ? "," : "_buffer"), at);
      CHECK_MESSAGE(next != std::string::npos, "argument " << a.name << " missing or out of order");
      if (next != std::string::npos) at = next;
    }
  }
  std::string out;
  CHECK(run(std::string(OPFORGE_GEN_EXE) + " -g opforge_optimizer -o " + dir.string() +
                " -e c_header target=x86-64-linux-avx2 op=apply_adma",
            &out) == 1);
  CHECK(out.find("unknown op 'apply_adma'") != std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace opforge::testing
