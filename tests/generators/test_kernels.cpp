// Every variant of the op table, for every ISA the CPU can run, against its fp64 reference:
// in place (states are updated where they lie, as the runtime passes them aliased), on
// random data with fixed seeds, at sizes that hit every tail (1, 5, 17), the serial path
// (1000), the parallel path with ragged chunks (65543) and a large tensor (1 << 20).
// Autoscheduled twins ("__auto", Adams2019 schedules) are loaded by id and run the same
// checks, plus a size ragged across their fixed 131072-element parallel tiles.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "generators/auto_schedules.h"
#include "generators/op_table.h"
#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

const std::vector<size_t> kSizes = {1, 5, 17, 1000, 65543, 1 << 20};
// Adams2019 tiles the 1<<20 estimate into parallel chunks of 131072: three and a ragged tail.
const size_t kAutoExtraSize = 3 * 131072 + 17;

struct Worst {
  double excess = 0;  // max of |err| / (atol + rtol*|ref|)
  std::string where;
};

// `variant` empty: the variant select() picks for (op, attrs, isa); else that variant by id.
void check_variant(Registry& reg, const std::string& op, const Attrs& attrs, const std::string& isa,
                   Worst& worst, const std::string& variant = "") {
  Kernel& k = variant.empty() ? reg.select(op, attrs, isa) : reg.load(variant);
  const registry::Descriptor& d = k.descriptor();
  const Reference* ref = find_reference(op);
  REQUIRE_MESSAGE(ref, "no fp64 reference registered for op " << op);
  std::vector<size_t> sizes = kSizes;
  if (!variant.empty()) sizes.push_back(kAutoExtraSize);
  for (size_t n : sizes) {
    std::mt19937 rng(static_cast<unsigned>(1000003 * n + 17));
    Tensors t;
    Scalars s;
    ref->inputs(rng, n, d.attr_values(), t, s);
    // fp32 copies the kernel updates in place.
    std::map<std::string, std::vector<float>> f32;
    std::vector<Tensor> tensors;
    for (auto& [name, v] : t) f32[name].assign(v.begin(), v.end());
    for (auto& [name, v] : f32) {
      tensors.push_back({name, v.data(), registry::DType::f32, {static_cast<int64_t>(n)}});
    }
    k.call(tensors, s);
    Tensors expected = t;
    ref->update(d.attr_values(), s, expected);
    for (const auto& [name, want] : expected) {
      const std::vector<float>& got = f32.at(name);
      for (size_t i = 0; i < n; ++i) {
        // Exact matches (infinities included), and NaN where NaN is due.
        if (got[i] == want[i] || (std::isnan(want[i]) && std::isnan(got[i]))) continue;
        const double err = std::fabs(got[i] - want[i]);
        const double allowed = d.tolerance.atol + d.tolerance.rtol * std::fabs(want[i]);
        const double excess = err / allowed;
        if (!(excess <= worst.excess)) {  // NaN lands here too
          worst.excess = std::isnan(err) ? INFINITY : excess;
          worst.where = d.variant + " n=" + std::to_string(n) + " " + name + "[" +
                        std::to_string(i) + "]: got " + std::to_string(got[i]) + " want " +
                        std::to_string(want[i]);
        }
        if (!(err <= allowed)) {
          FAIL(d.variant << " n=" << n << ": " << name << "[" << i << "] = " << got[i]
                         << ", fp64 reference " << want[i] << ", error " << err << " > "
                         << allowed);
        }
      }
    }
  }
}

TEST_CASE("every op-table variant matches its fp64 reference, in place, on every ISA") {
  auto reg = Registry::open(test_registry_dir());
  std::set<std::string> runnable;
  for (const auto& isa : generators::isas()) {
    bool ok = true;
    for (const auto& f : isa.cpu_features) ok = ok && cpu_supports(f);
    if (ok) runnable.insert(isa.name);
  }
  REQUIRE_MESSAGE(runnable.count("avx2"), "this CPU cannot run the AVX2 baseline");
  if (!runnable.count("avx512")) MESSAGE("CPU lacks AVX-512: only AVX2 variants run here");
  int checked = 0, checked_auto = 0;
  for (const auto& row : generators::op_table()) {
    // Sparse forms: test_sparse_ops.cpp applies the dense formula row by row.
    if (row.decl->sparse()) continue;
    const Attrs attrs = row.decl->resolve_attrs(row.attrs);
    for (const auto& isa : row.isas) {
      if (!runnable.count(isa)) continue;
      const std::string id = generators::variant_id(*row.decl, attrs, isa);
      Worst worst;
      check_variant(*reg, row.decl->name(), attrs, isa, worst);
      MESSAGE(id << ": worst error " << worst.excess << "x of tolerance at " << worst.where);
      ++checked;
    }
    for (const auto& isa : row.autoschedule) {
      if (!runnable.count(isa)) continue;
      const std::string hand = generators::variant_id(*row.decl, attrs, isa);
      const std::string id = generators::auto_variant_id(hand);
      // Same op, attrs and ISA: select() keeps the hand schedule, by default and forced.
      CHECK(reg->select(row.decl->name(), attrs, isa).descriptor().variant == hand);
      CHECK(reg->load(id).descriptor().schedule.recipe == generators::kAutoRecipe);
      Worst worst;
      check_variant(*reg, row.decl->name(), attrs, isa, worst, id);
      MESSAGE(id << ": worst error " << worst.excess << "x of tolerance at " << worst.where);
      ++checked_auto;
    }
  }
  if (runnable.count("avx512")) {
    int auto_rows = 0;
    for (const auto& row : generators::op_table()) auto_rows += !row.autoschedule.empty();
    CHECK(auto_rows > 0);
    CHECK(checked_auto >= auto_rows);
  }
  int dense_rows = 0;
  for (const auto& row : generators::op_table()) dense_rows += !row.decl->sparse();
  CHECK(checked >= 2 * dense_rows - 1);
}

TEST_CASE("every op in the registry has an fp64 reference") {
  auto reg = Registry::open(test_registry_dir());
  for (const auto& op : reg->ops()) {
    // A sparse op is checked against its dense twin's formula, applied row by row.
    std::string dense = op;
    if (op.rfind("sparse_apply_", 0) == 0) dense = op.substr(7);
    if (op == "sparse_adam") dense = "apply_adam";
    CHECK_MESSAGE(find_reference(dense), op);
  }
}

}  // namespace
}  // namespace opforge::testing
