// Large tensors: a splittable op run on consecutive slices (Kernel::call_chunked, and call()
// past the descriptor's max_elements) writes the bytes one whole-tensor call writes; ops that
// cannot be split (whole-tensor reductions, sparse rows) refuse, saying why. Every test stays
// far below 100 MB: the 32-bit limit itself is exercised by lowering max_elements in a copy of
// the registry, not with 2^31-element tensors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "opforge/opforge.h"
#include "runtime/dense_args.h"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

using registry::Descriptor;
using registry::DType;
using registry::Input;

void call_chunks(Kernel& k, DenseArgs& a, int64_t chunk) {
  auto v = a.views();
  k.call_chunked(v.data(), v.size(), a.scalars.data(), a.scalars.size(), chunk);
}
// The slicing done by hand: one plain call() per slice, pointers offset.
// With 8-bit states the slices start on block boundaries (the runtime rounds the chunk down
// to whole blocks, at least one) and take their blocks' scales.
void call_slices_by_hand(Kernel& k, DenseArgs& a, int64_t chunk) {
  if (a.block > 0 && chunk < a.n) chunk = std::max(a.block, chunk - chunk % a.block);
  for (int64_t off = 0; off < a.n; off += chunk) {
    int64_t len = std::min(chunk, a.n - off);
    int64_t blocks = a.block > 0 ? (len + a.block - 1) / a.block : 0;
    std::vector<TensorView> v = a.views();
    for (size_t t = 0; t < v.size(); ++t) {
      const int64_t at = a.scales[t] ? off / a.block : off;
      v[t].data = a.bytes[t].data() + at * registry::dtype_bytes(a.dtypes[t]);
      v[t].shape = a.scales[t] ? &blocks : &len;
    }
    k.call(v.data(), v.size(), a.scalars.data(), a.scalars.size());
  }
}

double value_at(const DenseArgs& a, size_t t, int64_t i) {
  const uint8_t* p = a.bytes[t].data();
  switch (a.dtypes[t]) {
    case DType::f32: {
      float x;
      std::memcpy(&x, p + 4 * i, 4);
      return x;
    }
    case DType::f64: {
      double x;
      std::memcpy(&x, p + 8 * i, 8);
      return x;
    }
    case DType::bf16: {
      uint32_t bits = uint32_t(p[2 * i]) << 16 | uint32_t(p[2 * i + 1]) << 24;
      float x;
      std::memcpy(&x, &bits, 4);
      return x;
    }
    default:
      return 0;  // f16 and integer tensors: compared by bytes only
  }
}

// Elements further apart than twice the op's tolerance (each result may be that far from
// the fp64 reference), as "'NAME' element I: A vs B" ("" when none; NaN equals NaN). A bf16
// tensor (model copy, bf16 state) holds such results rounded: one more bf16 ulp (2^-7 |x|).
std::string beyond_tolerance(const Descriptor& d, const DenseArgs& a, const DenseArgs& b) {
  for (size_t t = 0; t < a.bytes.size(); ++t) {
    const double ulp = a.dtypes[t] == DType::bf16 ? std::ldexp(1.0, -7) : 0;
    for (int64_t i = 0; i < a.lengths[t]; ++i) {
      const double x = value_at(a, t, i), y = value_at(b, t, i);
      if (std::isnan(x) && std::isnan(y)) continue;
      const double allowed =
          2 * (d.tolerance.atol + d.tolerance.rtol * std::fabs(x)) + ulp * std::fabs(x);
      if (!(std::fabs(x - y) <= allowed)) {
        return "'" + a.names[t] + "' element " + std::to_string(i) + ": " + std::to_string(x) +
               " vs " + std::to_string(y);
      }
    }
  }
  return "";
}

// Every splittable variant of the registry this CPU runs: every op, attr combination, ISA
// and autoscheduled twin, so a new op is covered by construction.
std::vector<std::string> splittable_variants(Registry& reg) {
  std::vector<std::string> out;
  for (const auto& e : reg.index().variants) {
    const Descriptor d = reg.descriptor(e.variant);
    if (d.shape.splittable && runs_here(d)) out.push_back(e.variant);
  }
  return out;
}

// Variants whose own whole-tensor call is not bit-stable across sizes: an element computed in
// a vector tail (the last N % vector elements), or by the serial rather than the parallel
// specialization, rounds differently from the same element in a full vector (measured: their
// whole call on N elements and on its first M < N elements disagree in the last bits). Any
// split moves tails, so their slices match the whole call within the op's tolerance, not in
// every bit; slice by slice they still equal plain calls exactly.
bool position_dependent(const std::string& variant) {
  for (const char* p : {"apply_adagrad__update_slots_1__", "apply_adagrad_v2__update_slots_1__",
                        "apply_ftrl__multiply_linear_by_lr_1__f32__avx2"}) {
    if (variant.rfind(p, 0) == 0) return true;
  }
  // AVX2 AdamW with bf16 states, 1 ulp of var: in the assembly, full vectors fuse
  // var * (1 - lr*weight_decay) into the fma of `decayed - step`, the tail fuses the step's
  // product instead. AVX2 has no 16-bit masked load: LLVM loads the tail's m and v element by
  // element behind branches, which splits the tail into basic blocks (the likely cause).
  for (const char* s : {"__bf16s__avx2", "__bf16ms__avx2"}) {
    const std::string suffix = s;
    if (variant.rfind("apply_adamw__", 0) == 0 && variant.size() > suffix.size() &&
        variant.compare(variant.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  }
  return false;
}

const int64_t kSizes[] = {1, 5, 17, 1000, 65543, (1 << 20) + 3};

// Which (n, chunk) pairs a variant runs: everything, except 1-element chunks of the largest
// size for all but each op's selected variant (a million kernel calls each), and at most 64
// calls for an autoscheduled twin (its fixed 131072-element tile costs up to ~4 ms per call,
// whatever the slice).
bool runs(const Descriptor& d, bool selected, int64_t n, int64_t chunk) {
  const int64_t calls = (n + chunk - 1) / chunk;
  if (d.schedule.recipe == "adams2019") return calls <= 64;
  return !(chunk == 1 && n > 65543 && !selected);
}

TEST_CASE("call_chunked: every splittable variant equals one plain call per slice, bit for bit") {
  Registry& reg = shared_registry();
  for (const auto& id : splittable_variants(reg)) {
    Kernel& k = reg.load(id);
    for (const int64_t n : {int64_t(1), int64_t(17), int64_t(1000), int64_t(65543)}) {
      for (const int64_t chunk : {int64_t(1), int64_t(7), int64_t(4096 + 3)}) {
        if (!runs(k.descriptor(), false, n, chunk)) continue;
        CAPTURE(id);
        CAPTURE(n);
        CAPTURE(chunk);
        DenseArgs sliced(k.descriptor(), n, 13), by_hand = sliced;
        call_chunks(k, sliced, chunk);
        call_slices_by_hand(k, by_hand, chunk);
        CHECK(first_difference(sliced, by_hand) == "");
      }
    }
  }
}

TEST_CASE("call_chunked: every splittable variant gives the whole call's bytes on odd sizes") {
  Registry& reg = shared_registry();
  const std::vector<std::string> variants = splittable_variants(reg);
  std::set<std::string> ops;
  for (const auto& id : variants) ops.insert(reg.load(id).descriptor().op);
  for (const char* op : {"apply_adam", "apply_gradient_descent", "apply_momentum", "apply_ftrl",
                         "apply_adamw", "apply_rms_prop"}) {
    CHECK_MESSAGE(ops.count(op), op << " should be splittable");
  }
  std::set<std::string> selected;
  for (const auto& op : ops) selected.insert(reg.select(op).descriptor().variant);
  std::map<std::string, int> differed;  // position-dependent variant -> slicings off in bits
  for (const auto& id : variants) {
    Kernel& k = reg.load(id);
    const Descriptor& d = k.descriptor();
    for (const int64_t n : kSizes) {
      const DenseArgs start(d, n, 11);
      DenseArgs whole = start;
      call_whole(k, whole);
      for (const int64_t chunk : {int64_t(1), int64_t(7), int64_t(4096 + 3), n, n + 1}) {
        if (!runs(d, selected.count(id) > 0, n, chunk)) continue;
        CAPTURE(id);
        CAPTURE(n);
        CAPTURE(chunk);
        DenseArgs sliced = start;
        call_chunks(k, sliced, chunk);
        if (!position_dependent(id)) {
          CHECK_MESSAGE(first_difference(whole, sliced) == "",
                        "a kernel whose slices differ from its whole call in bits (within "
                        "tolerance) computes vector tails differently from full vectors: see "
                        "position_dependent()");
        } else {
          CHECK(beyond_tolerance(d, whole, sliced) == "");
          differed[id] += first_difference(whole, sliced) != "";
        }
      }
    }
  }
  for (const auto& id : variants) {
    if (position_dependent(id) && !differed[id]) {
      WARN_MESSAGE(false, id << " now gives the whole call's bits in every slicing: drop it "
                                "from position_dependent()");
    }
  }
}

TEST_CASE("call_chunked: arguments are checked once, on the whole tensors") {
  Kernel& adam = shared_registry().select("apply_adam", {}, "avx2");
  std::vector<float> buf(30, 0.25f), v(10, 0.001f), g(10, 0.5f);
  SUBCASE("var and m overlap, though no single 1-element slice of them does") {
    std::vector<Tensor> t = {{"var", buf.data(), DType::f32, {10}},
                             {"m", buf.data() + 5, DType::f32, {10}},
                             {"v", v.data(), DType::f32, {10}},
                             {"grad", g.data(), DType::f32, {10}}};
    const std::string msg = error_of([&] { adam.call_chunked(t, adam_scalars(), 1); });
    CHECK(contains(msg, "'var'"));
    CHECK(contains(msg, "'m'"));
    CHECK(contains(msg, "overlap"));
  }
  SUBCASE("a shape mismatch names the whole shapes") {
    std::vector<Tensor> t = {{"var", buf.data(), DType::f32, {10}},
                             {"m", buf.data() + 10, DType::f32, {10}},
                             {"v", v.data(), DType::f32, {10}},
                             {"grad", g.data(), DType::f32, {9}}};
    const std::string msg = error_of([&] { adam.call_chunked(t, adam_scalars(), 4); });
    CHECK(contains(msg, "'grad'"));
    CHECK(contains(msg, "[9]"));
    CHECK(contains(msg, "[10]"));
  }
  SUBCASE("a missing scalar") {
    std::vector<Tensor> t = {{"var", buf.data(), DType::f32, {10}},
                             {"m", buf.data() + 10, DType::f32, {10}},
                             {"v", v.data(), DType::f32, {10}},
                             {"grad", g.data(), DType::f32, {10}}};
    auto s = adam_scalars();
    s.erase("epsilon");
    CHECK(contains(error_of([&] { adam.call_chunked(t, s, 3); }), "'epsilon'"));
  }
  SUBCASE("a chunk size below 1") {
    std::vector<Tensor> t = {{"var", buf.data(), DType::f32, {10}},
                             {"m", buf.data() + 10, DType::f32, {10}},
                             {"v", v.data(), DType::f32, {10}},
                             {"grad", g.data(), DType::f32, {10}}};
    for (const int64_t bad : {int64_t(0), int64_t(-3)}) {
      const std::string msg = error_of([&] { adam.call_chunked(t, adam_scalars(), bad); });
      CHECK(contains(msg, "apply_adam"));
      CHECK(contains(msg, "chunk_elements must be at least 1, got " + std::to_string(bad)));
    }
  }
  for (float x : v) CHECK(x == 0.001f);  // nothing ran
}

TEST_CASE("call_chunked: ops that are not splittable refuse, naming the op and why") {
  Registry& reg = shared_registry();
  SUBCASE("apply_lamb: its trust ratio needs norms over the whole tensor") {
    Kernel& lamb = reg.select("apply_lamb");
    CHECK_FALSE(lamb.splittable());
    DenseArgs a(lamb.descriptor(), 100, 3);
    const DenseArgs before = a;
    for (const int64_t chunk : {int64_t(7), int64_t(100), int64_t(1000)}) {
      CAPTURE(chunk);
      const std::string msg = error_of([&] { call_chunks(lamb, a, chunk); });
      CHECK(contains(msg, "apply_lamb"));
      CHECK(contains(msg, "cannot be called in chunks"));
      CHECK(contains(msg, "whole-tensor reductions"));
    }
    CHECK(first_difference(a, before) == "");
    call_whole(lamb, a);  // the plain call still works
    CHECK(first_difference(a, before) != "");
  }
  SUBCASE("apply_lars and a sparse op") {
    for (const char* op : {"apply_lars", "sparse_apply_adagrad"}) {
      CAPTURE(op);
      Kernel& k = reg.select(op);
      CHECK_FALSE(k.splittable());
      const std::string msg = error_of([&] { k.call_chunked(std::vector<Tensor>{}, {}, 1024); });
      CHECK(contains(msg, op));
      CHECK(contains(msg, "cannot be called in chunks"));
    }
  }
}

TEST_CASE("descriptors: splittable exactly for dense ops without whole-tensor reductions") {
  Registry& reg = shared_registry();
  std::map<std::string, bool> by_op;
  for (const auto& e : reg.index().variants) {
    const Descriptor d = reg.descriptor(e.variant);
    CAPTURE(e.variant);
    if (!d.shape.elementwise) CHECK_FALSE(d.shape.splittable);
    // A dense op's reduction pass is extra read traffic: splittable ops read each tensor once.
    if (d.shape.elementwise) {
      int once = 0;
      // `model` is written, never read (bf16m, bf16ms, ...)
      const bool master = storage_tag(d).find('m') != std::string::npos;
      for (const auto& in : d.inputs) {
        // Results (found_inf, global_norm) are one element, not per-element traffic.
        // Block scales (8-bit states' absmaxes) are 4 bytes per block, left out of traffic.
        if (in.role == Input::Role::scalar || in.role == Input::Role::result ||
            in.role == Input::Role::block_scale || (master && in.name == "model"))
          continue;
        once += registry::dtype_bytes(in.dtype);
      }
      // Results-only ops (global_norm) are one read pass: reduction, never splittable.
      bool states = false;
      for (const auto& in : d.inputs) states = states || in.role == Input::Role::state;
      if (states) {
        CHECK(d.shape.splittable == (d.traffic.bytes_read_per_element == once));
      } else {
        CHECK_FALSE(d.shape.splittable);
      }
    }
    // Every variant of an op agrees (attrs, ISAs and autoscheduled twins), except that loss
    // scaling (unscale / skip_if_nonfinite: a reduction over the gradients) never splits.
    bool scaled = false;
    for (const char* a : {"unscale", "skip_if_nonfinite"}) {
      const registry::Attr* at = d.find_attr(a);
      scaled = scaled || (at && at->value == "true");
    }
    if (scaled) CHECK_FALSE(d.shape.splittable);
    auto [it, fresh] = by_op.emplace(d.op + (scaled ? "+scaled" : ""), d.shape.splittable);
    if (!fresh) CHECK(it->second == d.shape.splittable);
  }
  for (const char* op : {"apply_adam", "apply_gradient_descent", "apply_momentum", "apply_adagrad",
                         "apply_lion", "bandwidth_s3_g1"}) {
    CAPTURE(op);
    CHECK(by_op.at(op) == true);
  }
  for (const char* op : {"apply_lamb", "apply_lars", "sparse_adam", "sparse_apply_ftrl"}) {
    CAPTURE(op);
    CHECK(by_op.at(op) == false);
  }
  CHECK(reg.select("apply_adam").splittable());
  CHECK_FALSE(reg.select("apply_lamb").splittable());
}

// ---------------------------------------------------------------------------------------
// Past max_elements, call() itself splits. A registry copy whose descriptors say
// max_elements = `limit` exercises that path with small tensors (the kernels are unchanged:
// only the runtime reads max_elements).

class LimitedRegistry {
 public:
  explicit LimitedRegistry(int64_t limit) {
    std::map<std::string, std::string> texts;
    for (const auto& e : shared_registry().index().variants) {
      const std::string path = (copy_ / e.descriptor).string();
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(text.str());
      j["shape"]["max_elements"] = limit;
      texts[e.variant] = j.dump(2) + "\n";
    }
    copy_.rewrite_descriptors(texts);
    reg_ = Registry::open(copy_.dir().string());
  }
  Registry& reg() { return *reg_; }

 private:
  RegistryCopy copy_;
  std::unique_ptr<Registry> reg_;
};

TEST_CASE("call: a splittable op past max_elements runs in slices, bit-identical") {
  for (const int64_t limit : {int64_t(1000), int64_t(5)}) {
    LimitedRegistry limited(limit);
    for (const char* op : {"apply_adam", "apply_gradient_descent", "apply_ftrl"}) {
      Kernel& small = limited.reg().select(op);
      REQUIRE(small.descriptor().shape.max_elements == limit);
      Kernel& full = shared_registry().load(small.descriptor().variant);
      for (const int64_t n : {limit, limit + 1, int64_t(17), int64_t(65543)}) {
        CAPTURE(op);
        CAPTURE(limit);
        CAPTURE(n);
        DenseArgs whole(full.descriptor(), n, 5);
        DenseArgs sliced = whole;
        call_whole(full, whole);
        call_whole(small, sliced);  // call(), not call_chunked()
        CHECK(first_difference(whole, sliced) == "");
        // An explicit chunk size above the limit is capped at it.
        DenseArgs capped(full.descriptor(), n, 5);
        call_chunks(small, capped, n);
        CHECK(first_difference(whole, capped) == "");
      }
    }
  }
}

TEST_CASE("call: an op that is not splittable past max_elements names op, tensor, count, limit") {
  LimitedRegistry limited(1000);
  Kernel& lamb = limited.reg().select("apply_lamb");
  DenseArgs a(lamb.descriptor(), 1001, 9);
  const DenseArgs before = a;
  const std::string msg = error_of([&] { call_whole(lamb, a); });
  CHECK(contains(msg, "op 'apply_lamb'"));
  CHECK(contains(msg, "'var'"));
  CHECK(contains(msg, "1001 elements"));
  CHECK(contains(msg, "limit of 1000"));
  CHECK(contains(msg, "splittable is false"));
  CHECK(first_difference(a, before) == "");
  DenseArgs fits(lamb.descriptor(), 1000, 9);
  CHECK_NOTHROW(call_whole(lamb, fits));
}

// ---------------------------------------------------------------------------------------
// The C ABI

TEST_CASE("C ABI: opforge_call_chunked and opforge_kernel_splittable") {
  opforge_registry* reg = nullptr;
  REQUIRE_MESSAGE(opforge_open(test_registry_dir().c_str(), &reg) == 0, opforge_last_error());
  opforge_kernel *sgd = nullptr, *lamb = nullptr;
  REQUIRE(opforge_select(reg, "apply_gradient_descent", nullptr, nullptr, &sgd) == 0);
  REQUIRE(opforge_select(reg, "apply_lamb", nullptr, nullptr, &lamb) == 0);
  CHECK(opforge_kernel_splittable(sgd) == 1);
  CHECK(opforge_kernel_splittable(lamb) == 0);
  CHECK(opforge_kernel_splittable(nullptr) == 0);

  const int64_t n = 65543;
  std::vector<float> var(n), delta(n);
  for (int64_t i = 0; i < n; ++i) {
    var[i] = static_cast<float>(0.001 * (i % 1000) - 0.5);
    delta[i] = static_cast<float>(std::sin(0.1 * static_cast<double>(i)));
  }
  std::vector<float> whole = var, sliced = var;
  opforge_tensor tw[2] = {{"var", whole.data(), OPFORGE_F32, 1, &n},
                          {"delta", delta.data(), OPFORGE_F32, 1, &n}};
  opforge_tensor ts[2] = {{"var", sliced.data(), OPFORGE_F32, 1, &n},
                          {"delta", delta.data(), OPFORGE_F32, 1, &n}};
  const opforge_scalar s[1] = {{"alpha", 0.125}};
  REQUIRE_MESSAGE(opforge_call(sgd, tw, 2, s, 1) == 0, opforge_last_error());
  REQUIRE_MESSAGE(opforge_call_chunked(sgd, ts, 2, s, 1, 4099) == 0, opforge_last_error());
  CHECK(std::memcmp(whole.data(), sliced.data(), n * sizeof(float)) == 0);
  CHECK(whole != var);

  CHECK(opforge_call_chunked(sgd, ts, 2, s, 1, 0) != 0);
  CHECK(contains(opforge_last_error(), "chunk_elements must be at least 1"));
  CHECK(opforge_call_chunked(nullptr, ts, 2, s, 1, 7) != 0);
  CHECK(contains(opforge_last_error(), "opforge_call_chunked: kernel is NULL"));
  CHECK(opforge_call_chunked(lamb, ts, 2, s, 1, 7) != 0);
  CHECK(contains(opforge_last_error(), "apply_lamb"));
  CHECK(contains(opforge_last_error(), "cannot be called in chunks"));
  opforge_close(reg);
}

}  // namespace
}  // namespace opforge::testing
