// `opforge run` with FP8 gradients: a uint8 .npy of OCP FP8 bits named by --dtype NAME=e4m3 /
// e5m2 selects the e4m3g / e5m2g variant; accumulate_grad's result against the spec's value of
// each code (tests/fp8_reference.h) times grad_scale_inv; refusals name the file and tensor.
#include <doctest/doctest.h>

#include <cmath>

#include "cli_util.h"
#include "fp8_reference.h"
#include "opforge/runtime.hpp"

namespace opforge::testing {
namespace {

npy::Array bytes_array(const std::vector<uint8_t>& v) {
  npy::Array a;
  a.descr = "|u1";
  a.shape = {static_cast<int64_t>(v.size())};
  a.data.assign(v.begin(), v.end());
  return a;
}

TEST_CASE("run: FP8 gradients as uint8 bits with --dtype NAME=e4m3|e5m2") {
  for (const auto& [name, spec] : {std::pair{"e4m3", &kE4M3}, std::pair{"e5m2", &kE5M2}}) {
    CAPTURE(name);
    TempDir dir;
    std::vector<uint8_t> codes;
    for (int c = 0; c < 256; ++c) codes.push_back(static_cast<uint8_t>(c));
    const std::vector<float> acc(codes.size(), 1.f);
    npy::write_atomic(dir / "acc.npy", npy::from_f32(acc, {int64_t(acc.size())}));
    npy::write_atomic(dir / "grad.npy", bytes_array(codes));
    const Result r =
        opforge_reg({"run", "accumulate_grad", "--isa", "avx2", "--in", "acc=" + (dir / "acc.npy"),
                     "--in", "grad=" + (dir / "grad.npy"), "--dtype", std::string("grad=") + name,
                     "--scalar", "grad_scale_inv=0.0625", "--out", dir / "out"});
    REQUIRE_MESSAGE(r.rc == 0, r.all());
    CHECK(contains(r.out, std::string("__") + name + "g__avx2"));
    const std::vector<float> got = npy::to_f32(npy::read(dir / "out/acc.npy"), "acc");
    REQUIRE(got.size() == codes.size());
    for (size_t i = 0; i < codes.size(); ++i) {
      const double want = 1.0 + fp8_value(*spec, codes[i]) * 0.0625;
      CAPTURE(i);
      if (std::isnan(want)) {
        CHECK(std::isnan(got[i]));
      } else {
        CHECK(double(got[i]) == double(static_cast<float>(want)));  // one fp32 rounding
      }
    }
  }
}

TEST_CASE("run: FP8 errors name the file and the tensor, nothing written") {
  TempDir dir;
  npy::write_atomic(dir / "acc.npy", npy::from_f32({0.f, 0.f}, {2}));
  npy::write_atomic(dir / "f32.npy", npy::from_f32({1.f, 2.f}, {2}));
  npy::write_atomic(dir / "bits.npy", bytes_array({0x38, 0x40}));
  auto run = [&](std::vector<std::string> extra) {
    return opforge_reg(
        concat({"run", "accumulate_grad", "--out", dir / "out", "--in", "acc=" + (dir / "acc.npy")},
               extra));
  };
  const Result not_bytes = run({"--in", "grad=" + (dir / "f32.npy"), "--dtype", "grad=e4m3",
                                "--scalar", "grad_scale_inv=1"});
  CHECK(not_bytes.rc == 2);
  CHECK_MESSAGE(contains(not_bytes.err, "--dtype grad=float8_e4m3fn: " + (dir / "f32.npy") +
                                            " holds '<f4', not FP8 bits"),
                not_bytes.err);
  const Result bad_scale = run({"--in", "grad=" + (dir / "bits.npy"), "--dtype", "grad=e5m2",
                                "--scalar", "grad_scale_inv=-1"});
  CHECK(bad_scale.rc != 0);
  CHECK_MESSAGE(contains(bad_scale.err, "grad_scale_inv"), bad_scale.err);
  // FP8 bits without --dtype: the uint8 file is named, with the option that reads it.
  const Result no_dtype =
      run({"--in", "grad=" + (dir / "bits.npy"), "--scalar", "grad_scale_inv=1"});
  CHECK(no_dtype.rc == 2);
  CHECK_MESSAGE(contains(no_dtype.err,
                         "--in grad: a uint8 ('|u1') file; if those are FP8 bits, "
                         "add --dtype grad=e4m3 or --dtype grad=e5m2"),
                no_dtype.err);
  CHECK(empty_or_absent(dir / "out"));
}

}  // namespace
}  // namespace opforge::testing
