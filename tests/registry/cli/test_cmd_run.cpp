// `opforge run` end to end: .npy in, .npy out, bitwise equal to the same kernel called
// in-process, and within tolerance of a double-precision TensorFlow ApplyAdam reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cli_util.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

// The updated var, m and v as the opforge CLI wrote them to DIR.
std::map<std::string, npy::Array> read_outputs(const fs::path& out) {
  std::map<std::string, npy::Array> got;
  for (const char* name : {"var", "m", "v"}) {
    got[name] = npy::read((out / (std::string(name) + ".npy")).string());
  }
  return got;
}

// The same kernel on copies of the same inputs, in this process.
std::map<std::string, std::vector<float>> in_process(const AdamInputs& in, bool nesterov) {
  static std::unique_ptr<Registry> reg = Registry::open(test_registry_dir());
  Kernel& k = reg->select("apply_adam", {{"use_nesterov", nesterov ? "true" : "false"}}, "avx2");
  std::map<std::string, std::vector<float>> t = in.t;
  std::vector<Tensor> tensors;
  for (auto& [name, v] : t) tensors.push_back({name, v.data(), registry::DType::f32, in.shape});
  std::map<std::string, double> s;
  for (const auto& [name, v] : adam_scalars()) s[name] = v;
  k.call(tensors, s);
  return t;
}

// TensorFlow ApplyAdam in double precision (the scalars are the float32 values the kernel
// receives).
std::map<std::string, std::vector<double>> reference(const AdamInputs& in, bool nesterov) {
  const auto s = adam_scalars();
  const double b1 = s.at("beta1"), b2 = s.at("beta2"), eps = s.at("epsilon");
  const double lr_t =
      double(s.at("lr")) * std::sqrt(1 - double(s.at("beta2_power"))) / (1 - s.at("beta1_power"));
  std::map<std::string, std::vector<double>> r;
  const size_t n = in.t.at("var").size();
  for (size_t i = 0; i < n; ++i) {
    const double g = in.t.at("grad")[i];
    double m = in.t.at("m")[i], v = in.t.at("v")[i], var = in.t.at("var")[i];
    m += (g - m) * (1 - b1);
    v += (g * g - v) * (1 - b2);
    const double num = nesterov ? g * (1 - b1) + b1 * m : m;
    var -= lr_t * num / (std::sqrt(v) + eps);
    r["var"].push_back(var);
    r["m"].push_back(m);
    r["v"].push_back(v);
  }
  return r;
}

void check_run(const std::vector<int64_t>& shape, bool nesterov) {
  TempDir dir;
  const AdamInputs in(shape, 1234 + static_cast<unsigned>(shape.size()));
  const std::string out = dir / "out";
  std::vector<std::string> args = {"run", "apply_adam", "--isa", "avx2", "--out", out};
  if (nesterov) args.insert(args.end(), {"--attr", "use_nesterov=true"});
  args = concat(concat(args, in.write(dir)), scalar_args(adam_scalars()));
  const Result r = opforge_reg(args);
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, nesterov ? "apply_adam__use_nesterov_1__epsilon_mode_tf__f32__avx2"
                                 : "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx2"));
  CHECK(r.err.empty());

  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(out)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  CHECK(files == std::vector<std::string>{"m.npy", "v.npy", "var.npy"});

  const auto got = read_outputs(out);
  const auto want = in_process(in, nesterov);
  const auto ref = reference(in, nesterov);
  const size_t n = in.t.at("var").size();
  for (const char* name : {"var", "m", "v"}) {
    CAPTURE(name);
    const npy::Array& a = got.at(name);
    CHECK(a.descr == "<f4");
    CHECK(a.shape == shape);
    REQUIRE(a.data.size() == n * sizeof(float));
    CHECK(std::memcmp(a.data.data(), want.at(name).data(), a.data.size()) == 0);
    const std::vector<float> f = npy::to_f32(a, name);
    int bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const double r_i = ref.at(name)[i];
      if (!(std::fabs(f[i] - r_i) <= 1e-7 + 4e-7 * std::fabs(r_i))) {
        if (++bad <= 3) {
          MESSAGE(name << "[" << i << "] = " << f[i] << ", fp64 reference " << r_i);
        }
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("run apply_adam: n=1000, equal to the in-process kernel and the fp64 reference") {
  check_run({1000}, false);
}

TEST_CASE("run apply_adam: a [7,13] tensor keeps its shape") {
  check_run({7, 13}, false);
}

TEST_CASE("run apply_adam --attr use_nesterov=true: the nesterov variant") {
  check_run({1000}, true);
  // ... whose result differs from the default variant's.
  TempDir dir;
  const AdamInputs in({1000}, 77);
  const auto inputs = in.write(dir);
  auto run = [&](const std::string& out, bool nesterov) {
    std::vector<std::string> args = {"run", "apply_adam", "--isa", "avx2", "--out", out};
    if (nesterov) args.insert(args.end(), {"--attr", "use_nesterov=true"});
    return opforge_reg(concat(concat(args, inputs), scalar_args(adam_scalars())));
  };
  REQUIRE(run(dir / "plain", false).rc == 0);
  REQUIRE(run(dir / "nest", true).rc == 0);
  CHECK(npy::read(dir / "plain/var.npy").data != npy::read(dir / "nest/var.npy").data);
  CHECK(npy::read(dir / "plain/m.npy").data == npy::read(dir / "nest/m.npy").data);
}

TEST_CASE("run: scalar text forms and --threads are accepted") {
  TempDir dir;
  AdamInputs in({64}, 5);
  std::vector<std::string> args = {
      "run", "apply_adam", "--isa", "avx2", "--threads", "1", "--out=" + (dir / "out")};
  const Result r = opforge_reg(concat(
      concat(args, in.write(dir)),
      {"--scalar", "beta1_power=7.29e-1", "--scalar", "beta2_power=0.997002999", "--scalar",
       "lr=1E-2", "--scalar", "beta1=.9", "--scalar", "beta2=0.999", "--scalar", "epsilon=1e-7"}));
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(npy::read(dir / "out/var.npy").data.size() == 64 * sizeof(float));
}

}  // namespace
}  // namespace opforge::testing
