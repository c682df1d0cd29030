// Choosing an NN op's algorithm by shape (matmul: small_m > packed_b_once > packed; conv2d:
// depthwise > direct_oc_small_8_16x16 (AVX-512) > gemm_3x3 > winograd > the 4-image gemm algorithms
// > the gemm algorithms and direct_oc_small_8 > direct_oc_small(_14x14) > direct_oc_unpadded >
// direct_oc_blocked > direct_oc > direct by priority, each where its descriptor's condition holds),
// forcing one, and the errors of a forced algorithm that does not apply and of shapes that break
// the op's checks.
#include <doctest/doctest.h>

#include <cstdlib>
#include <functional>
#include <vector>

#include "host_isa.h"
#include "opforge/runtime.hpp"
#include "runtime/runtime_test_util.h"
#include "test_registry.h"

using namespace opforge;
using opforge::testing::error_of;

namespace {

struct Conv {
  std::vector<float> x, w, y;
  std::vector<Tensor> tensors;
  std::map<std::string, double> scalars;
  Conv(int64_t n, int64_t c, int64_t h, int64_t o, int64_t cg, int64_t k, int stride, int groups) {
    x.assign(n * c * h * h, 0.5f);
    w.assign(o * cg * k * k, 0.25f);
    tensors = {{"x", x.data(), registry::DType::f32, {n, c, h, h}},
               {"weight", w.data(), registry::DType::f32, {o, cg, k, k}}};
    scalars = {{"stride_h", stride}, {"stride_w", stride}, {"pad_h", 1},      {"pad_w", 1},
               {"dilation_h", 1},    {"dilation_w", 1},    {"groups", groups}};
  }
};

std::string algorithm_for(Registry& reg, const Conv& c, std::map<std::string, std::string> a = {},
                          const std::string& isa = "") {
  return reg.select("conv2d", a, c.tensors, c.scalars, isa).descriptor().algorithm.name;
}

}  // namespace

TEST_CASE("conv2d picks the highest-priority algorithm whose condition holds") {
  auto reg = Registry::open(testing::test_registry_dir());
  // Winograd: 3x3 stride 1, C >= 64 and C x output pixels >= 131072 (32x32 at 128).
  CHECK(algorithm_for(*reg, Conv(1, 128, 32, 16, 128, 3, 1, 1)) == "winograd");
  CHECK(algorithm_for(*reg, Conv(1, 128, 31, 16, 128, 3, 1, 1)) == "direct_oc_blocked");
  CHECK(algorithm_for(*reg, Conv(1, 64, 46, 16, 64, 3, 1, 1)) == "winograd");  // 135424
  CHECK(algorithm_for(*reg, Conv(1, 63, 64, 16, 63, 3, 1, 1)) == "direct_oc");
  // 3x3 on 65-256 output pixels with large C: the GEMM (16x16 with C x pixels >= 131072, or
  // C >= 1536); Winograd needs more than 256 pixels.
  CHECK(algorithm_for(*reg, Conv(1, 1600, 10, 16, 1600, 3, 1, 1)) == "gemm_3x3");
  // 16x16 (65-256 pixels, 7 or a multiple of 8 wide): 8-pixel row blocks on AVX-512, above
  // gemm_3x3; AVX2 keeps the channel-blocked x (320) and the GEMM (520).
  const Conv unet16(1, 320, 16, 16, 320, 3, 1, 1), big16(1, 520, 16, 16, 520, 3, 1, 1);
  CHECK(algorithm_for(*reg, unet16, {}, "avx2") == "direct_oc_blocked");
  CHECK(algorithm_for(*reg, big16, {}, "avx2") == "gemm_3x3");
  if (opforge::testing::host_isas(*reg).runs("avx512")) {
    CHECK(algorithm_for(*reg, unet16, {}, "avx512") == "direct_oc_small_8_16x16");
    CHECK(algorithm_for(*reg, big16, {}, "avx512") == "direct_oc_small_8_16x16");
    CHECK(algorithm_for(*reg, Conv(1, 320, 31, 16, 320, 3, 2, 1), {}, "avx512") ==
          "direct_oc_small_8_16x16");  // stride 2: 16x16 out
    CHECK(algorithm_for(*reg, Conv(1, 1600, 15, 16, 1600, 3, 1, 1), {}, "avx512") ==
          "gemm_3x3");  // 15 wide
    CHECK(algorithm_for(*reg, Conv(1, 640, 17, 16, 640, 3, 1, 1), {}, "avx512") ==
          "winograd");  // 289 pixels
  }
  CHECK(algorithm_for(*reg, Conv(1, 2100, 8, 16, 2100, 3, 1, 1)) == "direct_oc_small_8");
  CHECK(algorithm_for(*reg, Conv(1, 8, 9, 16, 8, 3, 1, 1)) == "direct_oc_small");  // 9x9 out
  // Small outputs (<= 64 pixels; <= 196 with 3x3 or larger filters): tasks over channels.
  CHECK(algorithm_for(*reg, Conv(1, 8, 9, 16, 8, 3, 2, 1)) == "direct_oc_small");   // 5x5 out
  CHECK(algorithm_for(*reg, Conv(1, 8, 11, 16, 8, 5, 1, 1)) == "direct_oc_small");  // 9x9 out
  CHECK(algorithm_for(*reg, Conv(1, 8, 27, 16, 8, 3, 2, 1)) == "direct_oc_small");  // 14x14
  CHECK(algorithm_for(*reg, Conv(1, 8, 29, 16, 8, 3, 2, 1)) == "direct_oc");        // 15x15
  // Outputs of at most 64 pixels 7 or a multiple of 8 wide, 3x3 or larger: 8-pixel row blocks.
  CHECK(algorithm_for(*reg, Conv(1, 8, 9, 16, 8, 5, 1, 1)) == "direct_oc_small_8");  // 7x7
  CHECK(algorithm_for(*reg, Conv(1, 8, 8, 16, 8, 3, 1, 1)) == "direct_oc_small_8");  // 8x8
  CHECK(algorithm_for(*reg, Conv(1, 64, 16, 16, 64, 3, 2, 1)) == "direct_oc_small_8");
  CHECK(algorithm_for(*reg, Conv(1, 8, 6, 16, 8, 1, 1, 1)) == "direct_oc_small");  // 1x1, 8x8
  CHECK(algorithm_for(*reg, Conv(1, 8, 19, 16, 8, 5, 1, 1)) == "direct_oc");       // 5x5, 17x17 out
  CHECK(algorithm_for(*reg, Conv(1, 8, 9, 16, 4, 3, 1, 2)) == "direct");           // groups 2
  // 64 or more input channels: x read channel-blocked.
  CHECK(algorithm_for(*reg, Conv(1, 64, 29, 16, 64, 3, 2, 1)) == "direct_oc_blocked");
  CHECK(algorithm_for(*reg, Conv(1, 63, 29, 16, 63, 3, 2, 1)) == "direct_oc");
  // 65-196 pixel outputs, 3x3, C >= 64: direct_oc_small's tasks on AVX-512, the
  // channel-blocked x on AVX2 (faster there; nn_conv2d.cpp).
  const Conv mid14(1, 64, 27, 16, 64, 3, 2, 1);  // 14x14 out
  if (opforge::testing::host_isas(*reg).runs("avx512"))
    CHECK(algorithm_for(*reg, mid14, {}, "avx512") == "direct_oc_small_14x14");
  CHECK(algorithm_for(*reg, mid14, {}, "avx2") == "direct_oc_blocked");
  CHECK(algorithm_for(*reg, Conv(1, 64, 13, 16, 64, 3, 2, 1), {}, "avx2") ==
        "direct_oc_small_8");  // 7x7 out: 8-pixel row blocks on both
  // Pad 0 with an output of at least 7 x 2: x read in place.
  Conv down(1, 8, 29, 16, 8, 1, 2, 1);  // 1x1 stride 2: 15x15 output
  down.scalars["pad_h"] = down.scalars["pad_w"] = 0;
  CHECK(algorithm_for(*reg, down) == "direct_oc_unpadded");
  Conv small(1, 8, 11, 16, 8, 1, 2, 1);  // 1x1 stride 2, pad 0: 6x6 output
  small.scalars["pad_h"] = small.scalars["pad_w"] = 0;
  CHECK(algorithm_for(*reg, small) == "direct_oc_small");
  Conv mid(1, 8, 11, 16, 8, 1, 1, 1);  // 1x1 stride 1, pad 0: 11x11 output, read in place
  mid.scalars["pad_h"] = mid.scalars["pad_w"] = 0;
  CHECK(algorithm_for(*reg, mid) == "direct_oc_unpadded");
  Conv padded(1, 8, 29, 16, 8, 1, 2, 1);  // pad 1: the padded copy
  CHECK(algorithm_for(*reg, padded) == "direct_oc");
  // 1x1, pad 0, at least two 256 x 256 tiles of channels x pixels (per image): the GEMMs.
  auto pad0 = [](Conv c) {
    c.scalars["pad_h"] = c.scalars["pad_w"] = 0;
    return c;
  };
  const bool avx512 = opforge::testing::host_isas(*reg).runs("avx512");
  CHECK(algorithm_for(*reg, pad0(Conv(1, 16, 28, 300, 16, 1, 1, 1))) == "gemm_1x1");
  CHECK(algorithm_for(*reg, pad0(Conv(1, 16, 28, 300, 16, 1, 2, 1))) == "gemm_1x1_s2");
  // <= 64 output pixels: tiles of 4 images at a batch divisible by 4, else one image a tile
  // (AVX-512; AVX2 runs direct_oc_small there).
  CHECK(algorithm_for(*reg, pad0(Conv(8, 16, 7, 300, 16, 1, 1, 1))) == "gemm_1x1_images");
  CHECK(algorithm_for(*reg, pad0(Conv(4, 16, 14, 300, 16, 1, 2, 1))) == "gemm_1x1_s2_images");
  // Stride 2 to <= 64 pixels at another batch: one image a tile on AVX-512, direct_oc_small
  // on AVX2 (as at stride 1).
  CHECK(algorithm_for(*reg, pad0(Conv(6, 16, 14, 300, 16, 1, 2, 1)), {}, "avx2") ==
        "direct_oc_small");
  if (avx512)
    CHECK(algorithm_for(*reg, pad0(Conv(6, 16, 14, 300, 16, 1, 2, 1)), {}, "avx512") ==
          "gemm_1x1_s2_small");
  CHECK(algorithm_for(*reg, pad0(Conv(6, 16, 7, 300, 16, 1, 1, 1)), {}, "avx2") ==
        "direct_oc_small");
  if (avx512)
    CHECK(algorithm_for(*reg, pad0(Conv(6, 16, 7, 300, 16, 1, 1, 1)), {}, "avx512") ==
          "gemm_1x1_small");
  // AVX2 where the pixels fill whole 16-column register blocks (8x8).
  CHECK(algorithm_for(*reg, pad0(Conv(2, 16, 8, 300, 16, 1, 1, 1)), {}, "avx2") ==
        "gemm_1x1_small_16");
  CHECK(algorithm_for(*reg, Conv(1, 8, 9, 8, 1, 3, 1, 8)) == "depthwise");
  CHECK(algorithm_for(*reg, Conv(1, 8, 9, 8, 1, 3, 2, 8)) == "depthwise");  // any stride
  // Forced: direct always applies.
  CHECK(algorithm_for(*reg, Conv(1, 8, 9, 16, 8, 3, 1, 1), {{"algorithm", "direct"}}) == "direct");
  // Without shapes: the algorithm that applies to every shape.
  CHECK(reg->select("conv2d").descriptor().algorithm.name == "direct");
}

// The registry remembers its selections (a selection copies every candidate descriptor):
// the same question gets the same kernel back (as it did before the memo), and whatever a
// selection depends on (shapes, scalars, the forced ISA, $OPFORGE_ISA) still changes the
// answer when it changes (these fail with a key that leaves one out).
TEST_CASE("selections are remembered per shapes, scalars and ISA, and still follow them") {
  auto reg = Registry::open(testing::test_registry_dir());
  const Conv wino(1, 128, 32, 16, 128, 3, 1, 1), blocked(1, 128, 31, 16, 128, 3, 1, 1);
  Kernel& first = reg->select("conv2d", {}, wino.tensors, wino.scalars);
  CHECK(first.descriptor().algorithm.name == "winograd");
  CHECK(algorithm_for(*reg, blocked) == "direct_oc_blocked");
  CHECK(&reg->select("conv2d", {}, wino.tensors, wino.scalars) == &first);
  Conv strided = wino;  // the same tensors, stride 2: no longer Winograd's
  strided.scalars["stride_h"] = strided.scalars["stride_w"] = 2;
  CHECK(algorithm_for(*reg, strided) != "winograd");
  CHECK(algorithm_for(*reg, wino) == "winograd");
  if (!opforge::testing::host_isas(*reg).runs("avx512")) return;
  // $OPFORGE_ISA unset for the checks below (whatever the run set), and put back after.
  struct IsaEnv {
    const char* saved = std::getenv("OPFORGE_ISA");
    std::string keep = saved ? saved : "";
    IsaEnv() { unsetenv("OPFORGE_ISA"); }
    ~IsaEnv() { saved ? setenv("OPFORGE_ISA", keep.c_str(), 1) : unsetenv("OPFORGE_ISA"); }
  } env;
  CHECK(reg->select("layer_norm").descriptor().target.isa == "avx512");
  CHECK(reg->select("layer_norm", {}, "avx2").descriptor().target.isa == "avx2");
  setenv("OPFORGE_ISA", "avx2", 1);
  CHECK(reg->select("layer_norm").descriptor().target.isa == "avx2");
  CHECK(reg->select("conv2d", {}, wino.tensors, wino.scalars).descriptor().target.isa == "avx2");
  unsetenv("OPFORGE_ISA");
  CHECK(reg->select("layer_norm").descriptor().target.isa == "avx512");
}

TEST_CASE("a forced algorithm that does not apply says why, with the values it read") {
  auto reg = Registry::open(testing::test_registry_dir());
  Conv c(1, 8, 9, 16, 8, 5, 1, 1);
  const std::string e = error_of([&] {
    reg->select("conv2d", {{"algorithm", "winograd"}}, c.tensors, c.scalars);
  });
  CHECK(e.find("op 'conv2d': algorithm 'winograd' applies only when KH == 3 && KW == 3") == 0);
  CHECK(e.find("KH = 5 (weight [16, 8, 5, 5])") != std::string::npos);
  // Loading the variant directly and calling it on those shapes is refused the same way.
  Kernel& wino = reg->select("conv2d", {{"algorithm", "winograd"}});
  const auto shapes = wino.output_shapes(c.tensors, c.scalars);
  REQUIRE(shapes.size() == 1);
  CHECK(shapes[0] == std::vector<int64_t>{1, 16, 7, 7});
  c.y.assign(16 * 7 * 7, 0.f);
  c.tensors.push_back({"y", c.y.data(), registry::DType::f32, shapes[0]});
  CHECK(error_of([&] { wino.call(c.tensors, c.scalars); }).find("applies only when") !=
        std::string::npos);
  CHECK(error_of([&] {
          reg->select("conv2d", {{"algorithm", "wingrad"}});
        }).find("did you mean 'winograd'") != std::string::npos);
}

TEST_CASE("shapes that break conv2d's checks name the argument, the rule and both shapes") {
  auto reg = Registry::open(testing::test_registry_dir());
  Conv c(1, 8, 9, 16, 3, 3, 1, 1);  // weight has 3 input channels, x has 8
  CHECK(error_of([&] { reg->select("conv2d", {}, c.tensors, c.scalars); }) ==
        "op 'conv2d': weight's input channels CG times groups must equal x's channels C "
        "(`CG * groups == C` does not hold: C = 8 (x [1, 8, 9, 9]), CG = 3 (weight [16, 3, 3, "
        "3]), groups = 1)");
  Conv s(1, 8, 9, 16, 8, 3, 0, 1);
  CHECK(error_of([&] {
          reg->select("conv2d", {}, s.tensors, s.scalars);
        }).find("stride_h and stride_w must be >= 1") != std::string::npos);
  Conv r(1, 8, 9, 16, 8, 3, 1, 1);
  r.tensors[0].shape = {8, 9, 9};
  CHECK(error_of([&] { reg->select("conv2d", {}, r.tensors, r.scalars); }) ==
        "op 'conv2d': argument 'x' has shape [8, 9, 9] (rank 3), expected rank 4: [N, C, H, W]");
  Conv big(1, 8, 2, 16, 8, 5, 1, 1);  // 5x5 filter on a 2x2 input padded by 1
  CHECK(error_of([&] {
          reg->select("conv2d", {}, big.tensors, big.scalars);
        }).find("the (dilated) filter is larger than the padded input") != std::string::npos);
}

TEST_CASE("matmul without a batch dim on one operand broadcasts it; a mismatch names both") {
  auto reg = Registry::open(testing::test_registry_dir());
  std::vector<float> a(3 * 2 * 4, 1.f), b(4 * 5, 2.f), c(3 * 2 * 5, 0.f);
  std::vector<Tensor> t = {{"a", a.data(), registry::DType::f32, {3, 2, 4}},
                           {"b", b.data(), registry::DType::f32, {4, 5}}};
  Kernel& k = reg->select("matmul", {}, t, {});
  CHECK(k.output_shapes(t, {}) == std::vector<std::vector<int64_t>>{{3, 2, 5}});
  t.push_back({"c", c.data(), registry::DType::f32, {3, 2, 5}});
  k.call(t, {});
  CHECK(c == std::vector<float>(30, 8.f));
  t[1].shape = {3, 4};
  CHECK(error_of([&] { k.call(t, {}); }).find("a's columns (K) must equal b's rows (K)") !=
        std::string::npos);
}

TEST_CASE("matmul: small_m for a few rows, packed_b_once from 1024 rows, packed between") {
  auto reg = Registry::open(testing::test_registry_dir());
  // Shapes only: selection reads no data.
  auto algorithm = [&](int64_t m, int64_t k, int64_t n, bool tb) {
    std::vector<Tensor> t = {{"a", nullptr, registry::DType::f32, {m, k}},
                             {"b", nullptr, registry::DType::f32,
                              tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}}};
    return reg->select("matmul", {{"transpose_b", tb ? "true" : "false"}}, t, {})
        .descriptor()
        .algorithm.name;
  };
  CHECK(algorithm(16, 768, 3072, true) == "small_m");
  CHECK(algorithm(17, 768, 3072, true) == "packed");
  CHECK(algorithm(1023, 768, 3072, true) == "packed");
  CHECK(algorithm(1024, 768, 3072, true) == "packed_b_once");
  CHECK(algorithm(4096, 3072, 768, true) == "packed_b_once");
  CHECK(algorithm(1024, 64, 64, false) == "packed_b_once");
  CHECK(algorithm(1023, 64, 64, false) == "packed");
}

TEST_CASE("linear picks matmul's algorithms by its own dims") {
  auto reg = Registry::open(testing::test_registry_dir());
  auto algorithm = [&](int64_t m, int64_t k, int64_t n) {
    std::vector<Tensor> t = {{"x", nullptr, registry::DType::f32, {m, k}},
                             {"weight", nullptr, registry::DType::f32, {n, k}},
                             {"bias", nullptr, registry::DType::f32, {n}}};
    return reg->select("linear", {}, t, {}).descriptor().algorithm.name;
  };
  CHECK(algorithm(1, 768, 3072) == "small_m");
  CHECK(algorithm(16, 768, 128) == "small_m");
  CHECK(algorithm(16, 768, 127) == "packed");
  CHECK(algorithm(17, 768, 3072) == "packed");
  CHECK(algorithm(1024, 768, 3072) == "packed_b_once");
  std::vector<Tensor> bad = {{"x", nullptr, registry::DType::f32, {4, 8}},
                             {"weight", nullptr, registry::DType::f32, {6, 8}},
                             {"bias", nullptr, registry::DType::f32, {5}}};
  CHECK(error_of([&] { reg->select("linear", {}, bad, {}); }).find("bias") != std::string::npos);
}
