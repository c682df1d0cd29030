// `opforge run` failures: non-zero exit, a one-line message naming the offending thing, and
// nothing written to --out.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>

#include "cli_util.h"

namespace opforge::testing {
namespace {

// A valid apply_adam invocation over files in a scratch directory; each test breaks one
// thing and checks the failure.
struct RunCase {
  TempDir dir;
  AdamInputs in{{100}, 42};
  std::string out = dir / "out";
  std::map<std::string, std::string> ins;  // name -> file
  std::map<std::string, std::string> scalars;

  RunCase() {
    for (const auto& [name, v] : in.t) {
      ins[name] = dir / (name + ".npy");
      npy::write_atomic(ins[name], npy::from_f32(v, in.shape));
    }
    for (const auto& [name, v] : adam_scalars()) scalars[name] = std::to_string(v);
  }

  std::vector<std::string> args(const std::string& op = "apply_adam") const {
    std::vector<std::string> a = {"run", op, "--isa", "avx2", "--out", out};
    for (const auto& [name, file] : ins) a.insert(a.end(), {"--in", name + "=" + file});
    for (const auto& [name, text] : scalars) a.insert(a.end(), {"--scalar", name + "=" + text});
    return a;
  }

  // Runs, and checks what every failure must do; returns the message.
  std::string fails(const std::vector<std::string>& a, int want_rc = 1) const {
    const Result r = opforge_reg(a);
    CHECK_MESSAGE(r.rc == want_rc, "exit " << r.rc << ": " << r.all());
    CHECK_MESSAGE(one_line(r.err), "stderr: [" << r.err << "]");
    CHECK_MESSAGE(r.out.empty(), "stdout: [" << r.out << "]");
    CHECK_MESSAGE(empty_or_absent(out), out << " was written to");
    return r.err;
  }
};

TEST_CASE("run errors: the unbroken case succeeds") {
  RunCase c;
  const Result r = opforge_reg(c.args());
  CHECK_MESSAGE(r.rc == 0, r.all());
  CHECK(fs::exists(c.out + "/var.npy"));
}

TEST_CASE("run errors: unknown op, with a suggestion") {
  RunCase c;
  const std::string msg = c.fails(c.args("apply_adma"));
  CHECK(contains(msg, "'apply_adma'"));
  CHECK(contains(msg, "did you mean 'apply_adam'"));
}

TEST_CASE("run errors: a malformed .npy is named") {
  RunCase c;
  const std::string bad = c.dir / "garbage.npy";
  std::ofstream(bad, std::ios::binary) << "this is not a NumPy file at all, just bytes\x01\x02";
  c.ins["m"] = bad;
  const std::string msg = c.fails(c.args());
  CHECK(contains(msg, bad));
}

// --in grad=/dev/zero grew to 8.6 GB before; a FIFO hung the run.
TEST_CASE("run errors: a device or a FIFO as --in is refused without reading it") {
  RunCase c;
  c.ins["grad"] = "/dev/zero";
  std::string msg = c.fails(c.args());
  CHECK(contains(msg, "/dev/zero: is a character device, not a regular file"));
  RunCase f;
  const std::string fifo = f.dir / "grad.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  f.ins["grad"] = fifo;
  msg = f.fails(f.args());
  CHECK(contains(msg, fifo + ": is a FIFO, not a regular file"));
}

TEST_CASE("run errors: a missing .npy file is named") {
  RunCase c;
  c.ins["v"] = c.dir / "no-such-file.npy";
  const std::string msg = c.fails(c.args());
  CHECK(contains(msg, c.ins["v"]));
}

TEST_CASE("run errors: a float64 .npy for a float32 op names the argument and dtypes") {
  RunCase c;
  npy::Array a;
  a.descr = "<f8";
  a.shape = {100};
  std::vector<double> d(100, 0.5);
  a.data.resize(d.size() * sizeof(double));
  std::memcpy(a.data.data(), d.data(), a.data.size());
  c.ins["var"] = c.dir / "var64.npy";
  npy::write_atomic(c.ins["var"], a);
  const std::string msg = c.fails(c.args());
  CHECK(contains(msg, "'var'"));
  CHECK(contains(msg, "float64"));
  CHECK(contains(msg, "float32"));
}

TEST_CASE("run errors: a shape mismatch between var and grad names both") {
  RunCase c;
  c.ins["grad"] = c.dir / "grad99.npy";
  npy::write_atomic(c.ins["grad"], npy::from_f32(std::vector<float>(99, 0.25f), {99}));
  const std::string msg = c.fails(c.args());
  CHECK(contains(msg, "'grad'"));
  CHECK(contains(msg, "[99]"));
  CHECK(contains(msg, "'var'"));
  CHECK(contains(msg, "[100]"));
}

TEST_CASE("run errors: a missing --in is named") {
  RunCase c;
  c.ins.erase("m");
  const std::string msg = c.fails(c.args());
  CHECK(contains(msg, "missing tensor argument 'm'"));
}

TEST_CASE("run errors: an unknown --in name is named, with a suggestion") {
  RunCase c;
  c.ins["grads"] = c.ins["grad"];
  c.ins.erase("grad");
  const std::string msg = c.fails(c.args());
  CHECK(contains(msg, "'grads'"));
  CHECK(contains(msg, "did you mean 'grad'"));
}

TEST_CASE("run errors: an --in given twice is named") {
  RunCase c;
  auto a = c.args();
  a.insert(a.end(), {"--in", "var=" + c.ins["m"]});
  const std::string msg = c.fails(a, 2);
  CHECK(contains(msg, "var"));
  CHECK(contains(msg, "twice"));
}

TEST_CASE("run errors: a missing --scalar is named") {
  RunCase c;
  c.scalars.erase("beta2_power");
  const std::string msg = c.fails(c.args());
  CHECK(contains(msg, "missing scalar argument 'beta2_power'"));
}

TEST_CASE("run errors: an unknown --scalar is named") {
  RunCase c;
  c.scalars["learning_rate"] = "0.1";
  const std::string msg = c.fails(c.args());
  CHECK(contains(msg, "'learning_rate'"));
}

TEST_CASE("run errors: --scalar lr=abc is not a number") {
  RunCase c;
  c.scalars["lr"] = "abc";
  const std::string msg = c.fails(c.args(), 2);
  CHECK(contains(msg, "lr=abc"));
  CHECK(contains(msg, "not a number"));
}

TEST_CASE("run errors: --in without '='") {
  RunCase c;
  auto a = c.args();
  a.insert(a.end(), {"--in", c.ins["var"]});
  const std::string msg = c.fails(a, 2);
  CHECK(contains(msg, "--in"));
  CHECK(contains(msg, "NAME=VALUE"));
}

TEST_CASE("run errors: an unknown --attr is named") {
  RunCase c;
  auto a = c.args();
  a.insert(a.end(), {"--attr", "use_nestrov=true"});
  const std::string msg = c.fails(a);
  CHECK(contains(msg, "'use_nestrov'"));
  CHECK(contains(msg, "did you mean 'use_nesterov'"));
}

TEST_CASE("run errors: an unknown option exits 2 with a suggestion") {
  RunCase c;
  auto a = c.args();
  a.insert(a.end(), {"--scalr", "lr=0.1"});
  const std::string msg = c.fails(a, 2);
  CHECK(contains(msg, "--scalr"));
  CHECK(contains(msg, "did you mean 'scalar'"));
}

TEST_CASE("run errors: a missing --out exits 2") {
  RunCase c;
  auto a = c.args();
  auto it = std::find(a.begin(), a.end(), "--out");
  REQUIRE(it != a.end());
  a.erase(it, it + 2);
  const std::string msg = c.fails(a, 2);
  CHECK(contains(msg, "--out"));
}

// main.cpp prefixes every usage error with "opforge <command>: "; the message must not
// repeat it.
TEST_CASE("run errors: usage messages name the command once") {
  RunCase c;
  auto a = c.args();
  a.insert(a.end(), {"--scalr", "lr=0.1"});
  CHECK_FALSE(contains(c.fails(a, 2), "opforge run: opforge run:"));
  a = c.args();
  a.erase(std::find(a.begin(), a.end(), "--out"), std::find(a.begin(), a.end(), "--out") + 2);
  CHECK_FALSE(contains(c.fails(a, 2), "opforge run: opforge run:"));
}

// A repeated --attr is a usage error, like a repeated --in or --scalar (not "first wins").
TEST_CASE("run errors: an --attr given twice is rejected") {
  RunCase c;
  auto a = c.args();
  a.insert(a.end(), {"--attr", "use_nesterov=false", "--attr", "use_nesterov=true"});
  const std::string msg = c.fails(a, 2);
  CHECK(contains(msg, "use_nesterov"));
  CHECK(contains(msg, "twice"));
}

TEST_CASE("run errors: a missing op exits 2") {
  RunCase c;
  const Result r = opforge_reg({"run", "--out", c.out});
  CHECK(r.rc == 2);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, "OP"));
}

TEST_CASE("run errors: an --out that exists keeps only what was there") {
  RunCase c;
  fs::create_directories(c.out);
  c.ins.erase("v");
  c.fails(c.args());
}

}  // namespace
}  // namespace opforge::testing

namespace opforge::testing {
namespace {

TEST_CASE("run errors: a scalar outside its declared domain; --unchecked-scalars lets it through") {
  RunCase c;
  c.scalars["beta2_power"] = "1.5";
  const std::string msg = c.fails(c.args());
  CHECK(contains(msg, "scalar beta2_power = 1.5 is outside its domain [0, 1)"));
  std::vector<std::string> args = c.args();
  args.push_back("--unchecked-scalars");
  const Result r = opforge_reg(args);
  CHECK_MESSAGE(r.rc == 0, r.all());
}

}  // namespace
}  // namespace opforge::testing
