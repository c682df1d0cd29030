// dsl::Storage: its tags (variant ids, --attr storage=TAG, the runtime's storage_tag) and the
// argument dtypes with_storage gives a declaration.
#include <doctest/doctest.h>

#include "dsl/op_decl.h"

namespace opforge::dsl {
namespace {

using registry::DType;

TEST_CASE("Storage tags: every form round-trips through from_tag; unknown tags throw") {
  for (const char* tag : {"f32", "bf16m", "f16m", "bf16g", "f16g", "bf16s", "f16s", "bf16ms",
                          "f16ms", "bf16gs", "f16gs"}) {
    CAPTURE(tag);
    CHECK(Storage::from_tag(tag).tag() == tag);
  }
  CHECK(Storage{DType::f32, std::nullopt, DType::bf16}.tag() == "bf16s");
  CHECK(Storage{DType::bf16, DType::bf16, DType::bf16}.tag() == "bf16ms");
  CHECK(Storage{DType::f16, DType::f16, DType::bf16}.tag() == "f16mbf16s");
  CHECK_FALSE(Storage::from_tag("bf16s").is_f32());
  CHECK_THROWS_AS(Storage::from_tag("f8m"), std::invalid_argument);
  CHECK_THROWS_AS(Storage::from_tag("bf16sm"), std::invalid_argument);
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

}  // namespace
}  // namespace opforge::dsl
