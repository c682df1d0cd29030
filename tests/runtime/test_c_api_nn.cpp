// The C ABI of NN ops: select by shape, output shapes, a call with a fresh output, errors.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "opforge/opforge.h"
#include "test_registry.h"

TEST_CASE("C API: conv2d picked by shape, output shape, call, forced algorithm refused") {
  opforge_registry* reg = nullptr;
  REQUIRE(opforge_open(opforge::testing::test_registry_dir().c_str(), &reg) == 0);
  std::vector<float> x(2 * 3 * 6 * 6, 1.f), w(4 * 3 * 3 * 3, 0.5f);
  const int64_t xs[] = {2, 3, 6, 6}, ws[] = {4, 3, 3, 3};
  std::vector<opforge_tensor> t = {{"x", x.data(), OPFORGE_F32, 4, xs},
                                   {"weight", w.data(), OPFORGE_F32, 4, ws}};
  const opforge_scalar s[] = {{"stride_h", 1},   {"stride_w", 1},   {"pad_h", 0}, {"pad_w", 0},
                              {"dilation_h", 1}, {"dilation_w", 1}, {"groups", 1}};
  opforge_kernel* k = nullptr;
  REQUIRE(opforge_select_for(reg, "conv2d", nullptr, nullptr, t.data(), t.size(), s, 7, &k) == 0);
  // 4x4 outputs: direct_oc_small (tasks over output channels).
  CHECK(std::string(opforge_kernel_variant(k)).find("__direct_oc_small__") != std::string::npos);
  int64_t ys[4];
  int rank = 0;
  REQUIRE(opforge_output_shape(k, t.data(), t.size(), s, 7, 0, ys, 4, &rank) == 0);
  REQUIRE(rank == 4);
  CHECK(std::vector<int64_t>(ys, ys + 4) == std::vector<int64_t>{2, 4, 4, 4});
  CHECK(opforge_output_shape(k, t.data(), t.size(), s, 7, 1, ys, 4, &rank) != 0);
  CHECK(std::string(opforge_last_error()).find("has 1 outputs") != std::string::npos);
  std::vector<float> y(2 * 4 * 4 * 4, -1.f);
  t.push_back({"y", y.data(), OPFORGE_F32, 4, ys});
  REQUIRE(opforge_call(k, t.data(), t.size(), s, 7) == 0);
  // 27 products of 1 * 0.5 per output.
  for (float v : y) CHECK(v == doctest::Approx(13.5f).epsilon(1e-5));
  const int64_t w5s[] = {4, 3, 5, 5};
  std::vector<float> w5(4 * 3 * 25);
  t[1] = {"weight", w5.data(), OPFORGE_F32, 4, w5s};
  CHECK(opforge_select_for(reg, "conv2d", "algorithm=winograd", nullptr, t.data(), 2, s, 7, &k) !=
        0);
  CHECK(std::string(opforge_last_error()).find("applies only when KH == 3") != std::string::npos);
  opforge_close(reg);
}

TEST_CASE("C API: a shape expression evaluated for a call (matmul's cost.flops)") {
  opforge_registry* reg = nullptr;
  REQUIRE(opforge_open(opforge::testing::test_registry_dir().c_str(), &reg) == 0);
  std::vector<float> a(3 * 5 * 7), b(7 * 2);
  const int64_t as[] = {3, 5, 7}, bs[] = {7, 2};
  const opforge_tensor t[] = {{"a", a.data(), OPFORGE_F32, 3, as},
                              {"b", b.data(), OPFORGE_F32, 2, bs}};
  opforge_kernel* k = nullptr;
  REQUIRE(opforge_select_for(reg, "matmul", nullptr, nullptr, t, 2, nullptr, 0, &k) == 0);
  int64_t v = 0;
  REQUIRE(opforge_shape_value(k, t, 2, nullptr, 0, "2 * B * a_rows * a_cols * b_cols", &v) == 0);
  CHECK(v == 2 * 3 * 5 * 7 * 2);
  CHECK(opforge_shape_value(k, t, 2, nullptr, 0, "a_rows + Q", &v) != 0);
  CHECK(std::string(opforge_last_error()).find("does not bind") != std::string::npos);
  CHECK(opforge_shape_value(k, t, 2, nullptr, 0, "a_rows +", &v) != 0);
  CHECK(std::string(opforge_last_error()).find("col") != std::string::npos);
  opforge_close(reg);
}

// A zero-size array (numpy's, torch's) has a null data pointer, which Halide reads as a bounds
// query: the kernel computed nothing and the call returned 0, so `linear` with K = 0 left
// zeros where its output is the bias. Now the kernel runs: the bias, or a bounds error.
TEST_CASE("C API: an input with no elements (a null pointer) is not a silent no-op") {
  opforge_registry* reg = nullptr;
  REQUIRE(opforge_open(opforge::testing::test_registry_dir().c_str(), &reg) == 0);
  std::vector<float> bias = {1, 2, 3, 4, 5};
  const int64_t xs[] = {4, 0}, ws[] = {5, 0}, bs[] = {5}, ys[] = {4, 5};
  std::vector<opforge_tensor> t = {{"x", nullptr, OPFORGE_F32, 2, xs},
                                   {"weight", nullptr, OPFORGE_F32, 2, ws},
                                   {"bias", bias.data(), OPFORGE_F32, 1, bs}};
  opforge_kernel* k = nullptr;
  REQUIRE(opforge_select_for(reg, "linear", nullptr, nullptr, t.data(), t.size(), nullptr, 0, &k) ==
          0);
  std::vector<float> y(20, 0.f);
  t.push_back({"y", y.data(), OPFORGE_F32, 2, ys});
  if (opforge_call(k, t.data(), t.size(), nullptr, 0) == 0) {
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 5; ++c) CHECK(y[r * 5 + c] == bias[c]);
  } else {
    CHECK(std::string(opforge_last_error()).find("Halide error") != std::string::npos);
  }
  opforge_close(reg);
}
