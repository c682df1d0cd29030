// Registry::select and Kernel::call reject every malformed request with an opforge::Error
// whose message names the offending op, argument, attr or ISA.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

using registry::DType;

Kernel& adam() {
  return shared_registry().select("apply_adam", {}, "avx2");
}

// ---------------------------------------------------------------------------------------
// Selection

TEST_CASE("select: an unknown op is named, with a suggestion") {
  const std::string msg = error_of([] { shared_registry().select("apply_adma"); });
  CHECK(contains(msg, "unknown op 'apply_adma'"));
  CHECK(contains(msg, "did you mean 'apply_adam'"));
  // Far from every op: no suggestion, still named.
  const std::string far = error_of([] { shared_registry().select("zzzzzzzzzzzzzzzzzz"); });
  CHECK(contains(far, "'zzzzzzzzzzzzzzzzzz'"));
  CHECK_FALSE(contains(far, "did you mean"));
}

TEST_CASE("select: invalid op names are rejected before any path is built") {
  for (const std::string bad : {"../x", "Adam", "", "apply adam", "a/b", "1op"}) {
    CAPTURE(bad);
    const std::string msg = error_of([&] { shared_registry().select(bad); });
    CHECK(contains(msg, "'" + bad + "' is not a valid op name"));
  }
}

TEST_CASE("select: unknown attr is named, with a suggestion") {
  const std::string msg = error_of([] {
    shared_registry().select("apply_adam", {{"use_nesterv", "true"}}, "avx2");
  });
  CHECK(contains(msg, "apply_adam"));
  CHECK(contains(msg, "no attr 'use_nesterv'"));
  CHECK(contains(msg, "did you mean 'use_nesterov'"));
  // An op without attrs has nothing to suggest.
  const std::string none = error_of([] {
    shared_registry().select("apply_gradient_descent", {{"use_nesterov", "true"}});
  });
  CHECK(contains(none, "no attr 'use_nesterov'"));
}

TEST_CASE("select: a bad attr value names the attr, the expected type and the value") {
  const std::string msg = error_of([] {
    shared_registry().select("apply_adam", {{"use_nesterov", "maybe"}}, "avx2");
  });
  CHECK(contains(msg, "apply_adam"));
  CHECK(contains(msg, "'use_nesterov'"));
  CHECK(contains(msg, "true or false"));
  CHECK(contains(msg, "'maybe'"));
}

TEST_CASE("select: attr spellings canonicalize to the same variant") {
  Registry& reg = shared_registry();
  Kernel& plain = reg.select("apply_adam", {}, "avx2");
  CHECK(&reg.select("apply_adam", {{"use_nesterov", "false"}}, "avx2") == &plain);
  CHECK(&reg.select("apply_adam", {{"use_nesterov", "0"}}, "avx2") == &plain);
  Kernel& nesterov = reg.select("apply_adam", {{"use_nesterov", "true"}}, "avx2");
  CHECK(&nesterov != &plain);
  CHECK(&reg.select("apply_adam", {{"use_nesterov", "1"}}, "avx2") == &nesterov);
  CHECK(nesterov.descriptor().attr_values().at("use_nesterov") == "true");
  CHECK(plain.descriptor().attr_values().at("use_nesterov") == "false");
}

TEST_CASE("select: a forced ISA that no variant has is named") {
  for (const std::string isa : {"sse2", "avx1024", "AVX2"}) {
    CAPTURE(isa);
    const std::string msg = error_of([&] { shared_registry().select("apply_adam", {}, isa); });
    CHECK(contains(msg, "apply_adam"));
    CHECK(contains(msg, "'" + isa + "'"));
    CHECK(contains(msg, "its ISAs: avx2, avx512"));
  }
  CHECK(contains(error_of([] { shared_registry().select("apply_adam", {}, "avx51"); }),
                 "'avx51' (did you mean 'avx512'?); its ISAs"));
  // The avx512_bf16 tier holds the bf16 NN variants only: an optimizer op names its own ISAs.
  CHECK(contains(error_of([] { shared_registry().select("apply_adam", {}, "avx512_bf16"); }),
                 "no variant for ISA 'avx512_bf16'; its ISAs: avx2, avx512"));
  CHECK(shared_registry().select("apply_adam", {}, "avx2").descriptor().target.isa == "avx2");
}

TEST_CASE("parse_attr_list: NAME=VALUE pairs, malformed items named") {
  CHECK(parse_attr_list("").empty());
  auto m = parse_attr_list("a=1,b=true");
  CHECK(m.size() == 2);
  CHECK(m.at("a") == "1");
  CHECK(m.at("b") == "true");
  CHECK(contains(error_of([] { parse_attr_list("use_nesterov"); }), "'use_nesterov'"));
  CHECK(contains(error_of([] { parse_attr_list("=true"); }), "'=true'"));
}

// ---------------------------------------------------------------------------------------
// Tensor arguments

TEST_CASE("call: a missing tensor argument is named") {
  AdamData d(10);
  auto t = d.tensors({10});
  t.erase(t.begin() + 1);  // m
  const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
  CHECK(contains(msg, "op 'apply_adam'"));
  CHECK(contains(msg, "missing tensor argument 'm'"));
}

TEST_CASE("call: an unknown tensor argument is named, with a suggestion") {
  AdamData d(10);
  std::vector<float> extra(10);
  SUBCASE("misspelled in place of grad") {
    auto t = d.tensors({10});
    t[3].name = "grads";
    const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
    CHECK(contains(msg, "unknown tensor argument 'grads'"));
    CHECK(contains(msg, "did you mean 'grad'"));
  }
  SUBCASE("extra argument besides all the right ones") {
    auto t = d.tensors({10});
    t.push_back({"accum", extra.data(), DType::f32, {10}});
    const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
    CHECK(contains(msg, "unknown tensor argument 'accum'"));
  }
  SUBCASE("a scalar's name given as a tensor") {
    auto t = d.tensors({10});
    t.push_back({"lr", extra.data(), DType::f32, {10}});
    const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
    CHECK(contains(msg, "'lr'"));
  }
}

TEST_CASE("call: a tensor given twice is named") {
  AdamData d(10);
  std::vector<float> other(10);
  auto t = d.tensors({10});
  t.push_back({"var", other.data(), DType::f32, {10}});
  const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
  CHECK(contains(msg, "'var' given twice"));
}

TEST_CASE("call: a wrong dtype names the argument and both dtypes") {
  AdamData d(10);
  std::vector<double> var64(10, 0.5);
  auto t = d.tensors({10});
  t[0] = {"var", var64.data(), DType::f64, {10}};
  const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
  CHECK(contains(msg, "'var'"));
  CHECK(contains(msg, "float64"));
  CHECK(contains(msg, "float32"));
  for (double x : var64) CHECK(x == 0.5);
}

TEST_CASE("call: a shape mismatch names both arguments and both shapes") {
  AdamData d(12);
  SUBCASE("different length") {
    auto t = d.tensors({12});
    t[3].shape = {11};  // grad
    const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
    CHECK(contains(msg, "'grad'"));
    CHECK(contains(msg, "[11]"));
    CHECK(contains(msg, "'var'"));
    CHECK(contains(msg, "[12]"));
  }
  SUBCASE("same element count, different shape") {
    auto t = d.tensors({3, 4});
    t[2].shape = {4, 3};  // v
    const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
    CHECK(contains(msg, "'v'"));
    CHECK(contains(msg, "[4, 3]"));
    CHECK(contains(msg, "'var'"));
    CHECK(contains(msg, "[3, 4]"));
  }
  SUBCASE("same element count, different rank") {
    auto t = d.tensors({12});
    t[1].shape = {3, 4};  // m
    const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
    CHECK(contains(msg, "'m'"));
    CHECK(contains(msg, "[3, 4]"));
    CHECK(contains(msg, "[12]"));
  }
  AdamData fresh(12);
  CHECK(d.var == fresh.var);  // nothing ran
}

TEST_CASE("call: a negative dimension is named") {
  AdamData d(10);
  auto t = d.tensors({10});
  t[3].shape = {-10};
  const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
  CHECK(contains(msg, "'grad'"));
  CHECK(contains(msg, "negative dimension"));
  CHECK(contains(msg, "[-10]"));
  // Negative in every tensor (equal shapes) is still rejected.
  auto all = d.tensors({2, -5});
  CHECK(contains(error_of([&] { adam().call(all, adam_scalars()); }), "negative dimension"));
}

// Only an op that cannot be split: a splittable one (Adam) updates more than max_elements
// elements in slices (test_kernel_chunked_calls.cpp).
TEST_CASE("call: more elements than the kernel's limit are rejected before any access") {
  AdamData d(4);  // the kernel must never touch these small buffers
  const AdamData before = d;
  auto t = d.tensors({int64_t(1) << 31});
  Kernel& lamb = shared_registry().select("apply_lamb", {}, "avx2");
  REQUIRE_FALSE(lamb.splittable());
  const std::map<std::string, double> s = {{"lr", 0.01},           {"beta1", 0.9},
                                           {"beta2", 0.999},       {"epsilon", 1e-6},
                                           {"weight_decay", 0.01}, {"step", 3}};
  const std::string msg = error_of([&] { lamb.call(t, s); });
  CHECK(contains(msg, "apply_lamb"));
  CHECK(contains(msg, "'var'"));
  CHECK(contains(msg, "2147483648"));
  CHECK(contains(msg, "limit of " + std::to_string(lamb.descriptor().shape.max_elements)));
  CHECK(d.var == before.var);
}

// A shape whose element count wraps to 0 in int64 (2^32 * 2^32) must not pass for an empty
// tensor.
TEST_CASE("call: a shape whose element count overflows int64 is rejected") {
  AdamData d(4);
  const int64_t big = int64_t(1) << 32;
  auto t = d.tensors({big, big});
  const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
  CHECK(contains(msg, "'var'"));
}

TEST_CASE("call: tensor data missing for a non-empty tensor is named") {
  AdamData d(10);
  auto t = d.tensors({10});
  t[1].data = nullptr;
  const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
  CHECK(contains(msg, "'m'"));
  CHECK(contains(msg, "no data"));
}

TEST_CASE("call: overlapping tensors are rejected") {
  std::vector<float> buf(30, 0.25f), v(10, 0.001f), g(10, 0.5f);
  SUBCASE("var and m in one array, partly overlapping") {
    std::vector<Tensor> t = {{"var", buf.data(), DType::f32, {10}},
                             {"m", buf.data() + 5, DType::f32, {10}},
                             {"v", v.data(), DType::f32, {10}},
                             {"grad", g.data(), DType::f32, {10}}};
    const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
    CHECK(contains(msg, "'var'"));
    CHECK(contains(msg, "'m'"));
    CHECK(contains(msg, "overlap"));
  }
  SUBCASE("the same pointer twice") {
    std::vector<Tensor> t = {{"var", buf.data(), DType::f32, {10}},
                             {"m", v.data(), DType::f32, {10}},
                             {"v", v.data(), DType::f32, {10}},
                             {"grad", g.data(), DType::f32, {10}}};
    const std::string msg = error_of([&] { adam().call(t, adam_scalars()); });
    CHECK(contains(msg, "'m'"));
    CHECK(contains(msg, "'v'"));
    CHECK(contains(msg, "overlap"));
  }
  SUBCASE("adjacent halves of one array do not overlap") {
    std::vector<Tensor> t = {{"var", buf.data(), DType::f32, {10}},
                             {"m", buf.data() + 10, DType::f32, {10}},
                             {"v", buf.data() + 20, DType::f32, {10}},
                             {"grad", g.data(), DType::f32, {10}}};
    for (int i = 20; i < 30; ++i) buf[i] = 0.001f;
    CHECK_NOTHROW(adam().call(t, adam_scalars()));
  }
  for (float x : v) CHECK(x == 0.001f);
}

// ---------------------------------------------------------------------------------------
// Scalar arguments

TEST_CASE("call: a missing scalar is named") {
  AdamData d(10);
  auto s = adam_scalars();
  s.erase("epsilon");
  const std::string msg = error_of([&] { adam().call(d.tensors({10}), s); });
  CHECK(contains(msg, "missing scalar argument 'epsilon'"));
}

TEST_CASE("call: an unknown scalar is named, with a suggestion") {
  AdamData d(10);
  auto s = adam_scalars();
  s["epsilion"] = 1e-8;
  const std::string msg = error_of([&] { adam().call(d.tensors({10}), s); });
  CHECK(contains(msg, "unknown scalar argument 'epsilion'"));
  CHECK(contains(msg, "did you mean 'epsilon'"));
}

TEST_CASE("call: a scalar given twice through the view API is named") {
  AdamData d(4);
  const int64_t shape[] = {4};
  TensorView tv[] = {{"var", d.var.data(), DType::f32, shape, 1},
                     {"m", d.m.data(), DType::f32, shape, 1},
                     {"v", d.v.data(), DType::f32, shape, 1},
                     {"grad", d.grad.data(), DType::f32, shape, 1}};
  ScalarView sv[] = {{"beta1_power", 0.729}, {"beta2_power", 0.997}, {"lr", 0.01}, {"beta1", 0.9},
                     {"beta2", 0.999},       {"epsilon", 1e-7},      {"lr", 0.02}};
  const std::string msg = error_of([&] { adam().call(tv, 4, sv, 7); });
  CHECK(contains(msg, "'lr' given twice"));
  CHECK_NOTHROW(adam().call(tv, 4, sv, 6));
}

// ---------------------------------------------------------------------------------------
// Shapes that are valid

TEST_CASE("call: zero elements is a no-op") {
  AdamData d(8);
  const AdamData before = d;
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{0}, {3, 0}, {0, 5, 2}}) {
    CAPTURE(shape.size());
    CHECK_NOTHROW(adam().call(d.tensors(shape), adam_scalars()));
  }
  CHECK(std::memcmp(d.var.data(), before.var.data(), 8 * sizeof(float)) == 0);
  CHECK(std::memcmp(d.m.data(), before.m.data(), 8 * sizeof(float)) == 0);
  CHECK(std::memcmp(d.v.data(), before.v.data(), 8 * sizeof(float)) == 0);
  CHECK(std::memcmp(d.grad.data(), before.grad.data(), 8 * sizeof(float)) == 0);
  // No data at all is fine when there is nothing to read.
  std::vector<Tensor> null_data = {{"var", nullptr, DType::f32, {0}},
                                   {"m", nullptr, DType::f32, {0}},
                                   {"v", nullptr, DType::f32, {0}},
                                   {"grad", nullptr, DType::f32, {0}}};
  CHECK_NOTHROW(adam().call(null_data, adam_scalars()));
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("call: rank-2 tensors are flattened: [3,5] updates all 15 elements like [15]") {
  AdamData flat(15, 99), grid(15, 99);
  const AdamData before(15, 99);
  adam().call(flat.tensors({15}), adam_scalars());
  adam().call(grid.tensors({3, 5}), adam_scalars());
  for (size_t i = 0; i < 15; ++i) {
    CAPTURE(i);
    CHECK(grid.var[i] != before.var[i]);
    CHECK(grid.m[i] != before.m[i]);
    CHECK(grid.v[i] != before.v[i]);
  }
  CHECK(bitwise_equal(grid.var, flat.var));
  CHECK(bitwise_equal(grid.m, flat.m));
  CHECK(bitwise_equal(grid.v, flat.v));
  CHECK(bitwise_equal(grid.grad, before.grad));  // the gradient is read only
}

TEST_CASE("call: rank-0 tensors are one element") {
  AdamData scalar(1, 5), flat(1, 5);
  const AdamData before(1, 5);
  adam().call(scalar.tensors({}), adam_scalars());
  adam().call(flat.tensors({1}), adam_scalars());
  CHECK(scalar.var[0] != before.var[0]);
  CHECK(bitwise_equal(scalar.var, flat.var));
  CHECK(bitwise_equal(scalar.m, flat.m));
  CHECK(bitwise_equal(scalar.v, flat.v));
}

TEST_CASE("call: rank-3 across the parallel threshold equals the flat call") {
  const int64_t n = 4 * 64 * 129;  // above serial_below: the parallel path
  AdamData flat(n, 3), cube(n, 3);
  adam().call(flat.tensors({n}), adam_scalars());
  adam().call(cube.tensors({4, 64, 129}), adam_scalars());
  CHECK(bitwise_equal(cube.var, flat.var));
  CHECK(bitwise_equal(cube.m, flat.m));
  CHECK(bitwise_equal(cube.v, flat.v));
}

}  // namespace
}  // namespace opforge::testing

namespace opforge::testing {
namespace {

// Scalars outside the domains their descriptors declare used to run with rc 0: NaN and inf
// gave all-NaN output, beta2_power = 1.5 a wrong update, lr = 1e39 became inf.
TEST_CASE("scalars outside their declared domain are refused, naming the scalar and domain") {
  Kernel& k = shared_registry().select("apply_adam", {}, "avx2");
  CHECK(k.descriptor().find_input("beta2_power")->domain == "[0, 1)");
  CHECK(k.descriptor().find_input("lr")->domain == "finite");
  CHECK(k.descriptor().find_input("epsilon")->domain == "[0, inf)");
  const std::vector<std::pair<std::string, double>> bad = {
      {"beta2_power", 1.5},
      {"beta1", 1.0},
      {"epsilon", -1e-8},
      {"lr", std::nan("")},
      {"lr", 1e39},
      {"beta2", -0.1},
      {"lr", -std::numeric_limits<double>::infinity()}};
  for (const auto& [name, value] : bad) {
    CAPTURE(name);
    CAPTURE(value);
    AdamData data(17);
    const std::vector<float> var0 = data.var;
    auto scalars = adam_scalars();
    scalars[name] = value;
    const std::string msg = error_of([&] { k.call(data.tensors({17}), scalars); });
    CHECK(contains(msg, "op 'apply_adam': scalar " + name + " = "));
    CHECK(contains(msg, "is outside its domain"));
    CHECK(data.var == var0);  // nothing ran
  }
  AdamData data(17);
  auto scalars = adam_scalars();
  scalars["lr"] = 1e39;
  CHECK(contains(error_of([&] { k.call(data.tensors({17}), scalars); }), "overflows float32"));
  // The experiment's opt-out: the call runs (and gives what the formula gives).
  set_scalar_checks(false);
  scalars["beta2_power"] = 1.5;
  CHECK_NOTHROW(k.call(data.tensors({17}), scalars));
  set_scalar_checks(true);
  CHECK(scalar_checks());
}

TEST_CASE("a domain that admits inf: clip_norm (torch's max_norm = inf means no clipping)") {
  Kernel& k = shared_registry().select("clip_by_global_norm", {{"convention", "torch"}}, "avx2");
  CHECK(k.descriptor().find_input("clip_norm")->domain == "[0, inf]");
}

}  // namespace
}  // namespace opforge::testing
