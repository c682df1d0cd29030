// runtime/dense_call: the compact call path of dense ops takes every valid call of every dense
// variant (the `required` mode turns a decline into an error), computes what the full path
// computes (bit for bit), and accepts nothing the full path refuses: a bad call gets the full
// path's error whether the dense path is on or off.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/dense_args.h"
#include "runtime/dense_call.h"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

using registry::Descriptor;
using registry::DType;
using registry::Input;

// Sets the mode for a scope; back to `on` after it, also when a check throws.
struct Mode {
  explicit Mode(DenseCalls m) { set_dense_calls(m); }
  ~Mode() { set_dense_calls(DenseCalls::on); }
};

bool dense(const Descriptor& d) {
  return !d.shape.named_dims && d.shape.elementwise && d.shape.segments.empty() &&
         d.shape.indices.empty();
}

// Every dense variant of the registry this CPU runs.
std::vector<std::string> dense_variants(Registry& reg) {
  std::vector<std::string> out;
  for (const auto& e : reg.index().variants) {
    const Descriptor d = reg.descriptor(e.variant);
    if (dense(d) && runs_here(d)) out.push_back(e.variant);
  }
  return out;
}

TEST_CASE("dense calls: every dense variant takes the dense path, bit for bit as the full path") {
  Registry& reg = shared_registry();
  const std::vector<std::string> variants = dense_variants(reg);
  CHECK(variants.size() >= 50);
  for (const auto& id : variants) {
    Kernel& k = reg.load(id);
    for (const int64_t n : {int64_t(1), int64_t(17), int64_t(1000)}) {
      CAPTURE(id);
      CAPTURE(n);
      DenseArgs fast(k.descriptor(), n, 29), full = fast;
      {
        Mode m(DenseCalls::required);
        call_whole(k, fast);
      }
      {
        Mode m(DenseCalls::off);
        call_whole(k, full);
      }
      CHECK(first_difference(fast, full) == "");
    }
  }
}

// One argument mistake: a change to a valid call's tensors and scalars.
struct Mistake {
  const char* what;
  std::function<bool(const Descriptor&, std::vector<TensorView>&, std::vector<ScalarView>&)>
      apply;  // false: does not apply to this op
};

int64_t kNegative = -1, kTwo = 2, kRank2[2] = {1, 17}, kLonger = 18;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

size_t slot(const std::vector<TensorView>& v, Input::Role role, const Descriptor& d) {
  for (size_t k = 0; k < v.size(); ++k) {
    const Input* in = d.find_input(v[k].name);
    if (in && in->role == role) return k;
  }
  return v.size();
}

const std::vector<Mistake>& mistakes() {
  using V = std::vector<TensorView>;
  using S = std::vector<ScalarView>;
  static const std::vector<Mistake> m = {
      {"unknown tensor", [](auto&, V& v, S&) { return v[0].name = "bogus", true; }},
      {"missing tensor", [](auto&, V& v, S&) { return v.pop_back(), true; }},
      {"tensor twice", [](auto&, V& v, S&) { return v.push_back(v[0]), true; }},
      {"wrong dtype",
       [](auto&, V& v, S&) {
         return v[0].dtype = v[0].dtype == DType::f64 ? DType::f32 : DType::f64, true;
       }},
      {"bad rank", [](auto&, V& v, S&) { return v[0].rank = -1, true; }},
      {"no shape", [](auto&, V& v, S&) { return v[0].shape = nullptr, true; }},
      {"negative dim", [](auto&, V& v, S&) { return v[0].shape = &kNegative, true; }},
      {"other length", [](auto&, V& v, S&) { return v.back().shape = &kLonger, true; }},
      {"other rank, same elements",
       [](auto&, V& v, S&) { return v.back().shape = kRank2, v.back().rank = 2, true; }},
      {"no data", [](auto&, V& v, S&) { return v[1].data = nullptr, true; }},
      {"overlap",
       [](auto&, V& v, S&) { return v[1].dtype == v[0].dtype && (v[1].data = v[0].data, true); }},
      {"unknown scalar", [](auto&, V&, S& s) { return !s.empty() && (s[0].name = "bogus", true); }},
      {"missing scalar", [](auto&, V&, S& s) { return !s.empty() && (s.pop_back(), true); }},
      {"scalar twice", [](auto&, V&, S& s) { return !s.empty() && (s.push_back(s[0]), true); }},
      {"scalar NaN outside its domain",
       [](const Descriptor& d, V&, S& s) {
         for (auto& x : s) {
           const Input* in = d.find_input(x.name);
           if (in && !in->domain.empty() && in->domain != "any") return x.value = kNaN, true;
         }
         return false;
       }},
      {"scalar overflowing float32",
       [](const Descriptor& d, V&, S& s) {
         for (auto& x : s) {
           const Input* in = d.find_input(x.name);
           if (in && in->dtype == DType::f32 && in->domain == "finite") return x.value = 1e39, true;
         }
         return false;
       }},
      {"block scales of another count",
       [](const Descriptor& d, V& v, S&) {
         const size_t k = slot(v, Input::Role::block_scale, d);
         return k < v.size() && (v[k].shape = &kTwo, true);
       }},
      {"result of two elements",
       [](const Descriptor& d, V& v, S&) {
         const size_t k = slot(v, Input::Role::result, d);
         return k < v.size() && (v[k].shape = &kTwo, true);
       }},
  };
  return m;
}

// The first runnable dense variant the predicate takes.
Kernel& first_dense(const std::function<bool(const Descriptor&)>& take) {
  Registry& reg = shared_registry();
  for (const auto& id : dense_variants(reg)) {
    if (take(reg.descriptor(id))) return reg.load(id);
  }
  FAIL("no such variant in the test registry");
  throw;
}

TEST_CASE("dense calls: a bad call gets the full path's error, dense path on or off") {
  auto has = [](Input::Role role) {
    return [role](const Descriptor& d) {
      for (const auto& in : d.inputs)
        if (in.role == role) return true;
      return false;
    };
  };
  Kernel* kernels[] = {
      &first_dense([](const Descriptor& d) { return d.op == "apply_adam"; }),
      &first_dense(has(Input::Role::block_scale)),  // 8-bit states
      &first_dense(has(Input::Role::result)),       // found_inf
  };
  int applied = 0;
  for (Kernel* k : kernels) {
    const Descriptor& d = k->descriptor();
    for (const Mistake& mistake : mistakes()) {
      DenseArgs a(d, 17, 3);
      std::vector<TensorView> v = a.views();
      std::vector<ScalarView> s = a.scalars;
      if (!mistake.apply(d, v, s)) continue;
      ++applied;
      CAPTURE(d.variant);
      CAPTURE(mistake.what);
      auto call = [&] { k->call(v.data(), v.size(), s.data(), s.size()); };
      std::string on, off;
      {
        Mode m(DenseCalls::on);
        on = error_of(call);
      }
      {
        Mode m(DenseCalls::off);
        off = error_of(call);
      }
      CHECK(on == off);
      CHECK(contains(on, "op '" + d.op + "'"));
    }
  }
  CHECK(applied >= 3 * 14);
}

// Nothing to compute: the dense path accepts it (`required` would throw otherwise), as the full
// path does.
TEST_CASE("dense calls: empty tensors are accepted by both paths") {
  Kernel& k = first_dense([](const Descriptor& d) { return d.op == "apply_adam"; });
  for (const DenseCalls mode : {DenseCalls::required, DenseCalls::off}) {
    Mode m(mode);
    DenseArgs a(k.descriptor(), 0, 5);
    call_whole(k, a);
  }
}

}  // namespace
}  // namespace opforge::testing
