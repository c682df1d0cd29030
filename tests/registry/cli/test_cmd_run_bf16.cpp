// `opforge run` with bf16 tensors: ml_dtypes' convention ('<V2', what np.save writes for a
// bfloat16 array) and raw bits ('<u2' with --dtype NAME=bf16), checked against an fp64
// reference; every registered variant with bf16 tensors runs from the command line.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "cli_util.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

// float -> bf16 bits, round to nearest even (the test's own; finite inputs only).
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

float from_bf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

npy::Array bf16_array(const std::vector<float>& v, const std::string& descr) {
  npy::Array a;
  a.descr = descr;
  a.shape = {static_cast<int64_t>(v.size())};
  a.data.resize(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t b = to_bf16(v[i]);
    std::memcpy(a.data.data() + 2 * i, &b, 2);
  }
  return a;
}

std::vector<float> bf16_values(const npy::Array& a) {
  std::vector<float> out(a.data.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t b;
    std::memcpy(&b, a.data.data() + 2 * i, 2);
    out[i] = from_bf16(b);
  }
  return out;
}

const char* const kGdBf16m = "apply_gradient_descent__bf16m__avx2";

// apply_gradient_descent with bf16 gradients and a bf16 model copy (fp32 master var):
// var -= alpha * delta; model = bf16(var). Inputs in `descr` ('<u2' raw or '<V2').
void check_gradient_descent(const std::string& descr) {
  CAPTURE(descr);
  TempDir dir;
  const size_t n = 777;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> var(n), delta(n);
  for (size_t i = 0; i < n; ++i) {
    var[i] = u(rng);
    delta[i] = from_bf16(to_bf16(u(rng)));  // exactly representable in bf16
  }
  const float alpha = 0.375f;
  npy::write_atomic(dir / "var.npy", npy::from_f32(var, {int64_t(n)}));
  npy::write_atomic(dir / "delta.npy", bf16_array(delta, descr));
  npy::write_atomic(dir / "model.npy", bf16_array(std::vector<float>(n, 0.f), descr));
  std::vector<std::string> args = {"run",      "apply_gradient_descent",
                                   "--isa",    "avx2",
                                   "--in",     "var=" + (dir / "var.npy"),
                                   "--in",     "delta=" + (dir / "delta.npy"),
                                   "--in",     "model=" + (dir / "model.npy"),
                                   "--scalar", "alpha=0.375",
                                   "--out",    dir / "out"};
  if (descr == "<u2") args.insert(args.end(), {"--dtype", "delta=bf16", "--dtype", "model=bf16"});
  const Result r = opforge_reg(args);
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, kGdBf16m));
  const npy::Array got_var = npy::read(dir / "out/var.npy");
  const npy::Array got_model = npy::read(dir / "out/model.npy");
  CHECK(got_var.descr == "<f4");
  CHECK(got_model.descr == descr);  // written as the input came
  const std::vector<float> v = npy::to_f32(got_var, "var");
  const std::vector<float> m = bf16_values(got_model);
  REQUIRE(v.size() == n);
  REQUIRE(m.size() == n);
  for (size_t i = 0; i < n; ++i) {
    const double want = double(var[i]) - double(alpha) * double(delta[i]);
    CHECK(std::abs(v[i] - want) <= 1e-6 * std::max(1.0, std::abs(want)));
    // bf16 keeps 8 significant bits: rounding moves a value by at most half a unit in the
    // 8th bit, 2^-8 of it.
    CHECK(std::abs(m[i] - want) <= std::ldexp(std::abs(want), -8) + 1e-30);
  }
}

TEST_CASE("run: bf16 as ml_dtypes saves it ('<V2') and as raw bits ('<u2' --dtype NAME=bf16)") {
  check_gradient_descent("<V2");
  check_gradient_descent("<u2");
}

TEST_CASE("run: bf16 optimizer states (apply_adam bf16s) against an fp64 Adam") {
  TempDir dir;
  const size_t n = 500;
  const AdamInputs in({int64_t(n)}, 99);
  std::vector<float> m(n), v(n);
  for (size_t i = 0; i < n; ++i) {
    m[i] = from_bf16(to_bf16(in.t.at("m")[i]));
    v[i] = from_bf16(to_bf16(in.t.at("v")[i]));
  }
  npy::write_atomic(dir / "var.npy", npy::from_f32(in.t.at("var"), {int64_t(n)}));
  npy::write_atomic(dir / "grad.npy", npy::from_f32(in.t.at("grad"), {int64_t(n)}));
  npy::write_atomic(dir / "m.npy", bf16_array(m, "<V2"));
  npy::write_atomic(dir / "v.npy", bf16_array(v, "<u2"));
  const Result r =
      opforge_reg(concat({"run", "apply_adam", "--isa", "avx2", "--attr", "storage=bf16s", "--in",
                          "var=" + (dir / "var.npy"), "--in", "grad=" + (dir / "grad.npy"), "--in",
                          "m=" + (dir / "m.npy"), "--in", "v=" + (dir / "v.npy"), "--dtype",
                          "v=bf16", "--out", dir / "out"},
                         scalar_args(adam_scalars())));
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(npy::read(dir / "out/m.npy").descr == "<V2");
  CHECK(npy::read(dir / "out/v.npy").descr == "<u2");
  const std::vector<float> got_var = npy::to_f32(npy::read(dir / "out/var.npy"), "var");
  const std::vector<float> got_m = bf16_values(npy::read(dir / "out/m.npy"));
  const std::vector<float> got_v = bf16_values(npy::read(dir / "out/v.npy"));
  const auto s = adam_scalars();
  const double b1 = s.at("beta1"), b2 = s.at("beta2"), eps = s.at("epsilon");
  const double lr_t =
      double(s.at("lr")) * std::sqrt(1 - double(s.at("beta2_power"))) / (1 - s.at("beta1_power"));
  REQUIRE(got_var.size() == n);
  for (size_t i = 0; i < n; ++i) {
    const double g = in.t.at("grad")[i];
    const double mm = m[i] + (g - m[i]) * (1 - b1);
    const double vv = v[i] + (g * g - v[i]) * (1 - b2);
    const double var = in.t.at("var")[i] - lr_t * mm / (std::sqrt(vv) + eps);
    CAPTURE(i);
    CHECK(std::abs(got_m[i] - mm) <= std::ldexp(std::abs(mm), -8) + 1e-30);
    CHECK(std::abs(got_v[i] - vv) <= std::ldexp(std::abs(vv), -8) + 1e-30);
    // The var update uses the fp32 m and v (before their bf16 rounding): fp32 accuracy.
    CHECK(std::abs(got_var[i] - var) <= 1e-5 * std::max(1.0, std::abs(var)));
  }
}

TEST_CASE("run: bf16 errors name the tensor") {
  TempDir dir;
  const std::vector<float> x = {1.f, 2.f, 3.f};
  npy::write_atomic(dir / "var.npy", npy::from_f32(x, {3}));
  npy::write_atomic(dir / "f32.npy", npy::from_f32(x, {3}));
  npy::write_atomic(dir / "raw.npy", bf16_array(x, "<u2"));
  npy::write_atomic(dir / "bf.npy", bf16_array(x, "<V2"));
  auto run = [&](std::vector<std::string> extra) {
    return opforge_reg(concat({"run", "apply_gradient_descent", "--scalar", "alpha=0.5", "--out",
                               dir / "out", "--in", "var=" + (dir / "var.npy")},
                              extra));
  };
  // A bf16 variant given a float32 gradient.
  const Result mismatch = run({"--variant", kGdBf16m, "--in", "delta=" + (dir / "f32.npy"), "--in",
                               "model=" + (dir / "bf.npy")});
  CHECK(mismatch.rc == 1);
  CHECK_MESSAGE(contains(mismatch.err, "'delta' has dtype float32, expected bfloat16"),
                mismatch.err);
  // Raw bits without --dtype, and --dtype on a file that is not '<u2'.
  const Result raw = run({"--in", "delta=" + (dir / "raw.npy")});
  CHECK(raw.rc == 2);
  CHECK_MESSAGE(contains(raw.err, "add --dtype delta=bf16"), raw.err);
  const Result not_raw = run({"--in", "delta=" + (dir / "f32.npy"), "--dtype", "delta=bf16"});
  CHECK(not_raw.rc == 2);
  CHECK_MESSAGE(contains(not_raw.err, "--dtype delta=bf16: " + (dir / "f32.npy") + " holds '<f4'"),
                not_raw.err);
  const Result unknown = run({"--in", "delta=" + (dir / "raw.npy"), "--dtype", "grad=bf16"});
  CHECK(unknown.rc == 2);
  CHECK_MESSAGE(contains(unknown.err, "--dtype grad: no --in grad="), unknown.err);
  const Result other = run({"--in", "delta=" + (dir / "raw.npy"), "--dtype", "delta=f16"});
  CHECK(other.rc == 2);
  CHECK_MESSAGE(contains(other.err, "--dtype delta=f16"), other.err);
  CHECK(empty_or_absent(dir / "out"));  // nothing written by a failed run
}

// Every registered variant with a bf16 tensor runs from the command line: bf16 tensors as
// '<V2' files, others as their own dtype, results as one-element tensors; NN ops' tensors
// (bf16 activations) with every named dim 5 (a leading optional "B?" left out).
TEST_CASE("run: every bf16 variant of the registry runs from the command line") {
  auto reg = Registry::open(test_registry_dir());
  int ran = 0;
  for (const auto& e : reg->index().variants) {
    const registry::Descriptor d = reg->descriptor(e.variant);
    bool bf16 = false, runs_here = true;
    for (const auto& in : d.inputs) bf16 = bf16 || in.dtype == registry::DType::bf16;
    for (const auto& f : d.target.cpu_features) runs_here = runs_here && cpu_supports(f);
    if (!bf16 || !runs_here) continue;
    REQUIRE_MESSAGE((d.shape.elementwise || d.shape.named_dims),
                    e.variant << ": a bf16 variant neither elementwise nor NN; extend this test "
                                 "to build its inputs");
    CAPTURE(e.variant);
    TempDir dir;
    std::vector<std::string> args = {"run", d.op, "--variant", e.variant, "--out", dir / "out"};
    for (const auto& in : d.inputs) {
      if (in.role == registry::Input::Role::scalar) {
        const bool integer = in.dtype == registry::DType::i32 || in.dtype == registry::DType::i64;
        args.insert(args.end(), {"--scalar", in.name + "=" + (integer ? "1" : "0.5")});
        continue;
      }
      // 64 elements; results one; an 8-bit state's absmaxes one per block: ceil(64 / 256).
      const bool one =
          in.role == registry::Input::Role::result || in.role == registry::Input::Role::block_scale;
      std::vector<int64_t> shape = {one ? 1 : 64};
      if (d.shape.named_dims) {
        shape.clear();
        for (const auto& dim : in.dims) {
          if (dim != "B?") shape.push_back(5);
        }
      }
      int64_t n = 1;
      for (int64_t e : shape) n *= e;
      npy::Array a;
      const std::vector<float> half(n, 0.25f);
      switch (in.dtype) {
        case registry::DType::bf16:
          a = bf16_array(half, "<V2");
          a.shape = shape;
          break;
        case registry::DType::f32:
          a = npy::from_f32(half, shape);
          break;
        case registry::DType::u8:  // 8-bit state codes
          a.descr = "|u1";
          a.shape = shape;
          a.data.assign(static_cast<size_t>(n), 200);
          break;
        default:
          FAIL("input " << in.name << " has a dtype this test does not write");
      }
      npy::write_atomic(dir / (in.name + ".npy"), a);
      args.insert(args.end(), {"--in", in.name + "=" + (dir / (in.name + ".npy"))});
    }
    const Result r = opforge_reg(args);
    CHECK_MESSAGE(r.rc == 0, r.all());
    for (const auto& o : d.outputs) {
      CHECK(fs::exists(dir.path() / "out" / (o.name + ".npy")));
      if (o.dtype == registry::DType::bf16 && r.rc == 0) {
        CHECK(npy::read(dir / ("out/" + o.name + ".npy")).descr == "<V2");
      }
    }
    ++ran;
  }
  CHECK(ran > 10);
}

}  // namespace
}  // namespace opforge::testing
