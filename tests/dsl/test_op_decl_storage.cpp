// dsl::Storage: its tags (variant ids, --attr storage=TAG, the runtime's storage_tag) and the
// argument dtypes with_storage gives a declaration.
#include <doctest/doctest.h>

#include "dsl/op_decl.h"

namespace opforge::dsl {
namespace {

using registry::DType;

TEST_CASE("Storage tags: every form round-trips through from_tag; unknown tags throw") {
  for (const char* tag : {"f32", "bf16m", "f16m", "bf16g", "f16g", "bf16s", "f16s", "bf16ms",
                          "f16ms", "bf16gs", "f16gs", "e4m3g", "e5m2g", "e4m3gq8s"}) {
    CAPTURE(tag);
    CHECK(Storage::from_tag(tag).tag() == tag);
  }
  CHECK(Storage{DType::f32, std::nullopt, DType::bf16}.tag() == "bf16s");
  CHECK(Storage{DType::bf16, DType::bf16, DType::bf16}.tag() == "bf16ms");
  CHECK(Storage{DType::f16, DType::f16, DType::bf16}.tag() == "f16mbf16s");
  CHECK_FALSE(Storage::from_tag("bf16s").is_f32());
  CHECK_THROWS_AS(Storage::from_tag("f8m"), std::invalid_argument);
  CHECK_THROWS_AS(Storage::from_tag("bf16sm"), std::invalid_argument);
  CHECK(Storage::from_tag("e4m3g").grad == DType::f8e4m3);
  CHECK(Storage::from_tag("e5m2g").grad == DType::f8e5m2);
  CHECK_THROWS_AS(Storage::from_tag("e4m3m"), std::invalid_argument);  // no FP8 model copy
}

OptimizerDecl adam_like() {
  return OptimizerDecl("adam_like")
      .state("var", "parameter")
      .state("m", "first moment")
      .state("v", "second moment")
      .grad("grad", "gradient")
      .scalar("lr", "learning rate")
      .update([](const UpdateContext& c) {
        Expr m = c["m"] + c["grad"], v = c["v"] + c["grad"] * c["grad"];
        return Updates{{"var", c["var"] - c["lr"] * m / v}, {"m", m}, {"v", v}};
      });
}

std::map<std::string, DType> dtypes(const OptimizerDecl& d) {
  std::map<std::string, DType> out;
  for (const auto& a : d.args()) out[a.name] = a.dtype;
  return out;
}

TEST_CASE("with_storage: bf16 states narrow every state but the first; the model copy stays bf16") {
  const OptimizerDecl base = adam_like();
  const OptimizerDecl s = base.with_storage(Storage::from_tag("bf16s"));
  CHECK(dtypes(s) == std::map<std::string, DType>{{"var", DType::f32},
                                                  {"m", DType::bf16},
                                                  {"v", DType::bf16},
                                                  {"grad", DType::f32},
                                                  {"lr", DType::f32}});
  const OptimizerDecl ms = base.with_storage(Storage::from_tag("bf16ms"));
  std::vector<std::string> order;
  for (const auto& a : ms.args()) order.push_back(a.name);
  CHECK(order == std::vector<std::string>{"var", "m", "v", "model", "grad", "lr"});
  CHECK(dtypes(ms) == std::map<std::string, DType>{{"var", DType::f32},
                                                   {"m", DType::bf16},
                                                   {"v", DType::bf16},
                                                   {"model", DType::bf16},
                                                   {"grad", DType::bf16},
                                                   {"lr", DType::f32}});
  // The update stores m and v as bf16 and var as fp32 (the model copy is bf16 too).
  std::map<std::string, Expr> values;
  for (const auto& a : ms.args()) {
    values[a.name] = Halide::Internal::Variable::make(Halide::Float(32), a.name);
  }
  std::map<std::string, Halide::Type> stored;
  for (const auto& [n, e] : ms.update_fn()(UpdateContext(values, {}, "adam_like"))) {
    stored[n] = e.type();
  }
  CHECK(stored.at("var") == Halide::Float(32));
  CHECK(stored.at("m") == Halide::BFloat(16));
  CHECK(stored.at("v") == Halide::BFloat(16));
  CHECK(stored.at("model") == Halide::BFloat(16));
}

TEST_CASE("with_storage: FP8 gradients are bytes scaled by a grad_scale_inv scalar") {
  const OptimizerDecl base = adam_like();
  for (const char* tag : {"e4m3g", "e5m2g"}) {
    CAPTURE(tag);
    const OptimizerDecl d = base.with_storage(Storage::from_tag(tag));
    std::vector<std::string> order;
    for (const auto& a : d.args()) order.push_back(a.name);
    CHECK(order == std::vector<std::string>{"var", "m", "v", "grad", "lr", "grad_scale_inv"});
    CHECK(dtypes(d).at("grad") == Storage::from_tag(tag).grad);
    CHECK(d.args().back().domain == "(0, inf)");
    // The update reads grad * grad_scale_inv wherever it reads grad.
    std::map<std::string, Expr> values;
    for (const auto& a : d.args())
      values[a.name] = Halide::Internal::Variable::make(Halide::Float(32), a.name);
    for (const auto& [n, e] : d.update_fn()(UpdateContext(values, {}, "adam_like"))) {
      if (n != "m") continue;
      const Expr want = values.at("m") + values.at("grad") * values.at("grad_scale_inv");
      CHECK(
          Halide::Internal::equal(Halide::Internal::simplify(e), Halide::Internal::simplify(want)));
    }
  }
  // A model copy or narrow states with FP8 gradients, or an FP8 model: refused by name.
  CHECK_THROWS_WITH_AS(
      base.with_storage(Storage{DType::f8e4m3, DType::bf16, std::nullopt, std::nullopt}),
      doctest::Contains("FP8 gradients"), std::invalid_argument);
  CHECK_THROWS_AS(base.with_storage(Storage{DType::f32, DType::f8e4m3, std::nullopt, std::nullopt}),
                  std::invalid_argument);
}

}  // namespace
}  // namespace opforge::dsl
