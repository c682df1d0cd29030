// The C ABI: every failure is a non-zero return with a message from opforge_last_error();
// a successful call updates the caller's arrays in place.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "opforge/opforge.h"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

struct CRegistry {
  opforge_registry* reg = nullptr;
  CRegistry() {
    REQUIRE_MESSAGE(opforge_open(test_registry_dir().c_str(), &reg) == 0, opforge_last_error());
    REQUIRE(reg != nullptr);
  }
  ~CRegistry() { opforge_close(reg); }
};

// Gradient descent's arguments over caller-owned arrays.
struct Sgd {
  std::vector<float> var, delta;
  int64_t n;
  opforge_tensor t[2];
  opforge_scalar s[1];
  Sgd(int64_t n_, double alpha) : var(n_), delta(n_), n(n_) {
    for (int64_t i = 0; i < n; ++i) {
      var[i] = static_cast<float>(0.001 * (i % 1000) - 0.5);
      delta[i] = static_cast<float>(std::sin(0.1 * i));
    }
    t[0] = {"var", var.data(), OPFORGE_F32, 1, &n};
    t[1] = {"delta", delta.data(), OPFORGE_F32, 1, &n};
    s[0] = {"alpha", alpha};
  }
};

TEST_CASE("C ABI: opforge_open on a missing directory names the path") {
  const std::string dir = "/nonexistent/opforge-registry-xyz";
  opforge_registry* reg = reinterpret_cast<opforge_registry*>(0x1);
  CHECK(opforge_open(dir.c_str(), &reg) != 0);
  CHECK(reg == nullptr);
  CHECK(contains(opforge_last_error(), dir));
  CHECK(opforge_open(dir.c_str(), nullptr) != 0);
  CHECK(std::string(opforge_last_error()).size() > 0);
}

TEST_CASE("C ABI: opforge_select failures return non-zero with a message") {
  CRegistry r;
  opforge_kernel* k = reinterpret_cast<opforge_kernel*>(0x1);
  CHECK(opforge_select(r.reg, "apply_adma", nullptr, nullptr, &k) != 0);
  CHECK(k == nullptr);
  CHECK(contains(opforge_last_error(), "apply_adma"));
  CHECK(contains(opforge_last_error(), "did you mean 'apply_adam'"));

  CHECK(opforge_select(r.reg, "../x", nullptr, nullptr, &k) != 0);
  CHECK(contains(opforge_last_error(), "not a valid op name"));

  CHECK(opforge_select(r.reg, "apply_adam", "use_nesterov", nullptr, &k) != 0);
  CHECK(contains(opforge_last_error(), "'use_nesterov'"));
  CHECK(contains(opforge_last_error(), "NAME=VALUE"));

  CHECK(opforge_select(r.reg, "apply_adam", "use_nesterov=maybe", "avx2", &k) != 0);
  CHECK(contains(opforge_last_error(), "'maybe'"));

  CHECK(opforge_select(r.reg, "apply_adam", "nesterov=true", "avx2", &k) != 0);
  CHECK(contains(opforge_last_error(), "'nesterov'"));

  CHECK(opforge_select(r.reg, "apply_adam", nullptr, "sse2", &k) != 0);
  CHECK(contains(opforge_last_error(), "'sse2'"));

  CHECK(opforge_select(nullptr, "apply_adam", nullptr, nullptr, &k) != 0);
  CHECK(std::string(opforge_last_error()).size() > 0);
  CHECK(opforge_select(r.reg, nullptr, nullptr, nullptr, &k) != 0);
  CHECK(opforge_select(r.reg, "apply_adam", nullptr, nullptr, nullptr) != 0);
}

TEST_CASE("C ABI: variant and ISA strings") {
  CRegistry r;
  opforge_kernel* k = nullptr;
  REQUIRE(opforge_select(r.reg, "apply_gradient_descent", "", "avx2", &k) == 0);
  CHECK(std::string(opforge_kernel_variant(k)) == "apply_gradient_descent__f32__avx2");
  CHECK(std::string(opforge_kernel_isa(k)) == "avx2");

  opforge_kernel* nest = nullptr;
  REQUIRE(opforge_select(r.reg, "apply_adam", "use_nesterov=true", "avx2", &nest) == 0);
  CHECK(std::string(opforge_kernel_variant(nest)) ==
        "apply_adam__use_nesterov_1__epsilon_mode_tf__f32__avx2");

  opforge_kernel* best = nullptr;
  REQUIRE(opforge_select(r.reg, "apply_gradient_descent", nullptr, nullptr, &best) == 0);
  const std::string isa = opforge_kernel_isa(best);
  // The best ISA the runtime sees (as OPFORGE_CPU_FEATURES masks it).
  CHECK(isa == (host_isas(shared_registry()).runs("avx512") ? "avx512" : "avx2"));
  CHECK(std::string(opforge_kernel_variant(best)) == "apply_gradient_descent__f32__" + isa);

  CHECK(std::string(opforge_kernel_variant(nullptr)).empty());
  CHECK(std::string(opforge_kernel_isa(nullptr)).empty());
}

TEST_CASE("C ABI: listing ops and their descriptors as JSON") {
  CRegistry r;
  const auto cpp = Registry::open(test_registry_dir());
  CHECK(std::string(opforge_registry_dir(r.reg)) == cpp->dir());
  std::vector<std::string> ops;
  for (size_t i = 0; const char* op = opforge_registry_op(r.reg, i); ++i) ops.push_back(op);
  CHECK(ops == cpp->ops());
  CHECK(opforge_registry_op(nullptr, 0) == nullptr);

  const char* json = nullptr;
  REQUIRE_MESSAGE(opforge_op_variants_json(r.reg, "apply_adam", &json) == 0, opforge_last_error());
  const std::string text = json;
  const auto variants = cpp->variants("apply_adam");
  REQUIRE(!variants.empty());
  // The array holds every variant's descriptor in variants() order, as to_json prints it.
  size_t at = 0;
  for (const auto& d : variants) {
    const size_t pos = text.find(registry::to_json(d), at);
    CHECK_MESSAGE(pos != std::string::npos, d.variant);
    at = pos == std::string::npos ? at : pos + 1;
  }
  CHECK(text.front() == '[');

  CHECK(opforge_op_variants_json(r.reg, "apply_adma", &json) != 0);
  CHECK(json == nullptr);
  CHECK(contains(opforge_last_error(), "did you mean 'apply_adam'"));
  CHECK(opforge_op_variants_json(r.reg, nullptr, &json) != 0);

  opforge_kernel* k = nullptr;
  REQUIRE(opforge_select(r.reg, "apply_adam", "use_nesterov=true", "avx2", &k) == 0);
  REQUIRE(opforge_kernel_descriptor_json(k, &json) == 0);
  CHECK(std::string(json) == registry::to_json(cpp->descriptor(opforge_kernel_variant(k))));
  CHECK(opforge_kernel_descriptor_json(nullptr, &json) != 0);
  CHECK(contains(opforge_last_error(), "NULL"));
}

TEST_CASE("C ABI: a successful call matches a hand computation") {
  CRegistry r;
  opforge_kernel* k = nullptr;
  REQUIRE(opforge_select(r.reg, "apply_gradient_descent", nullptr, "avx2", &k) == 0);
  const double alpha = 0.125;
  Sgd a(37, alpha);
  const std::vector<float> var0 = a.var;
  REQUIRE_MESSAGE(opforge_call(k, a.t, 2, a.s, 1) == 0, opforge_last_error());
  for (int i : {0, 1, 7, 18, 36}) {
    CAPTURE(i);
    const double want = double(var0[i]) - double(float(alpha)) * double(a.delta[i]);
    CHECK(std::fabs(a.var[i] - want) <= 1e-6);
  }
  // Hand values: var[3] = 0.003 - 0.5, delta[3] = sin(0.3).
  CHECK(std::fabs(a.var[3] - ((0.003 - 0.5) - 0.125 * std::sin(0.3))) <= 1e-6);
}

TEST_CASE("C ABI: opforge_call failures return non-zero with a message") {
  CRegistry r;
  opforge_kernel* k = nullptr;
  REQUIRE(opforge_select(r.reg, "apply_gradient_descent", nullptr, "avx2", &k) == 0);
  Sgd a(8, 0.5);
  const std::vector<float> var0 = a.var;

  SUBCASE("missing tensor") {
    CHECK(opforge_call(k, a.t, 1, a.s, 1) != 0);
    CHECK(contains(opforge_last_error(), "missing tensor argument 'delta'"));
  }
  SUBCASE("missing scalar") {
    CHECK(opforge_call(k, a.t, 2, nullptr, 0) != 0);
    CHECK(contains(opforge_last_error(), "missing scalar argument 'alpha'"));
  }
  SUBCASE("unknown scalar, with a suggestion") {
    a.s[0].name = "alpah";
    CHECK(opforge_call(k, a.t, 2, a.s, 1) != 0);
    CHECK(contains(opforge_last_error(), "'alpah'"));
    CHECK(contains(opforge_last_error(), "did you mean 'alpha'"));
  }
  SUBCASE("wrong dtype") {
    a.t[1].dtype = OPFORGE_F64;
    CHECK(opforge_call(k, a.t, 2, a.s, 1) != 0);
    CHECK(contains(opforge_last_error(), "'delta'"));
    CHECK(contains(opforge_last_error(), "float64"));
  }
  SUBCASE("unknown dtype code") {
    a.t[0].dtype = 99;
    CHECK(opforge_call(k, a.t, 2, a.s, 1) != 0);
    CHECK(contains(opforge_last_error(), "99"));
  }
  SUBCASE("shape mismatch") {
    const int64_t seven = 7;
    a.t[1].shape = &seven;
    CHECK(opforge_call(k, a.t, 2, a.s, 1) != 0);
    CHECK(contains(opforge_last_error(), "'delta'"));
    CHECK(contains(opforge_last_error(), "[7]"));
    CHECK(contains(opforge_last_error(), "[8]"));
  }
  SUBCASE("negative rank") {
    a.t[0].rank = -1;
    CHECK(opforge_call(k, a.t, 2, a.s, 1) != 0);
    CHECK(contains(opforge_last_error(), "'var'"));
  }
  SUBCASE("NULL name") {
    a.t[1].name = nullptr;
    CHECK(opforge_call(k, a.t, 2, a.s, 1) != 0);
    CHECK(contains(opforge_last_error(), "tensor 1"));
  }
  SUBCASE("NULL arrays and kernel") {
    CHECK(opforge_call(k, nullptr, 2, a.s, 1) != 0);
    CHECK(std::string(opforge_last_error()).size() > 0);
    CHECK(opforge_call(nullptr, a.t, 2, a.s, 1) != 0);
    CHECK(std::string(opforge_last_error()).size() > 0);
  }
  CHECK(a.var == var0);  // a failed call changes nothing
}

TEST_CASE("C ABI: one thread, n = 100000") {
  CRegistry r;
  REQUIRE_MESSAGE(opforge_set_num_threads(r.reg, 1) == 0, opforge_last_error());
  opforge_kernel* k = nullptr;
  REQUIRE(opforge_select(r.reg, "apply_gradient_descent", nullptr, nullptr, &k) == 0);
  const double alpha = 0.25;
  Sgd a(100000, alpha);
  const std::vector<float> var0 = a.var;
  REQUIRE_MESSAGE(opforge_call(k, a.t, 2, a.s, 1) == 0, opforge_last_error());
  int bad = 0;
  for (int64_t i = 0; i < a.n; ++i) {
    const double want = double(var0[i]) - alpha * double(a.delta[i]);
    if (!(std::fabs(a.var[i] - want) <= 1e-6)) ++bad;
  }
  CHECK(bad == 0);
  CHECK(opforge_set_num_threads(r.reg, 0) == 0);
  CHECK(opforge_set_num_threads(nullptr, 1) != 0);
}

}  // namespace
}  // namespace opforge::testing
