// Descriptor basics: enum names, dtype sizes, lookups, attr_values (descriptor.cpp).
#include <doctest/doctest.h>

#include "descriptor_samples.h"

using namespace opforge::registry;
using namespace opforge::registry::testing;

TEST_CASE("enum names, dtype sizes and lookups") {
  CHECK(std::string(dtype_name(DType::f16)) == "float16");
  CHECK(std::string(dtype_name(DType::bf16)) == "bfloat16");
  CHECK(std::string(dtype_name(DType::f32)) == "float32");
  CHECK(std::string(dtype_name(DType::f64)) == "float64");
  CHECK(std::string(dtype_name(DType::i32)) == "int32");
  CHECK(std::string(dtype_name(DType::i64)) == "int64");
  CHECK(parse_dtype("bfloat16") == DType::bf16);
  CHECK(parse_dtype("int64") == DType::i64);
  CHECK_FALSE(parse_dtype("f32").has_value());
  CHECK_FALSE(parse_dtype("Float32").has_value());
  CHECK(dtype_bytes(DType::f16) == 2);
  CHECK(dtype_bytes(DType::bf16) == 2);
  CHECK(dtype_bytes(DType::f32) == 4);
  CHECK(dtype_bytes(DType::i32) == 4);
  CHECK(dtype_bytes(DType::f64) == 8);
  CHECK(dtype_bytes(DType::i64) == 8);
  CHECK(std::string(role_name(Input::Role::gradient)) == "gradient");
  CHECK(std::string(role_name(Input::Role::scalar)) == "scalar");
  CHECK(std::string(attr_type_name(Attr::Type::real)) == "float");
  CHECK(std::string(attr_type_name(Attr::Type::boolean)) == "bool");
  CHECK(std::string(kernel_arg_kind_name(KernelArg::Kind::output_buffer)) == "output_buffer");

  Descriptor d = make_adam();
  REQUIRE(d.find_input("grad") != nullptr);
  CHECK(d.find_input("grad") == &d.inputs[9]);
  CHECK(d.find_input("nope") == nullptr);
  CHECK(d.find_attr("use_nesterov") == &d.attrs[0]);
  CHECK(d.find_attr("var") == nullptr);
}

TEST_CASE("attr_values maps attr names to the compiled values") {
  Descriptor d = make_adam();
  Attr mode;
  mode.name = "mode";
  mode.type = Attr::Type::string;
  mode.default_value = "fast";
  mode.value = "exact";
  d.attrs.push_back(mode);
  std::map<std::string, std::string> expected = {{"use_nesterov", "true"}, {"mode", "exact"}};
  CHECK(d.attr_values() == expected);
  CHECK(Descriptor().attr_values().empty());
}
