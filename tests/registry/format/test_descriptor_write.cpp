// Descriptor writing (descriptor_write.cpp): exact round trips and the documented JSON shape.
#include <doctest/doctest.h>

#include "descriptor_samples.h"

using namespace opforge::registry;
using namespace opforge::registry::testing;

TEST_CASE("descriptor round trip is exact") {
  Descriptor d = make_adam();
  std::string text = to_json(d);
  Descriptor back = descriptor_from_json(text, kOrigin);
  check_same(back, d);
  CHECK(to_json(back) == text);
}

TEST_CASE("descriptor round trip keeps typed attrs of every type") {
  Descriptor d = make_adam();
  Attr width;
  width.name = "tile";
  width.type = Attr::Type::integer;
  width.default_value = "-3";
  width.value = "9007199254740993";  // above 2^53: must not pass through a double
  width.choices = {"-3", "9007199254740993"};
  Attr decay;
  decay.name = "decay";
  decay.type = Attr::Type::real;
  decay.default_value = "0.90000000000000002";  // %.17g of 0.9
  decay.value = "1.2345678901234568e+17";       // %.17g of 123456789012345678.0
  Attr mode;
  mode.name = "mode";
  mode.type = Attr::Type::string;
  mode.default_value = "fast";
  mode.value = "exact \"quoted\" \xc3\xa9";
  mode.choices = {"fast", "exact \"quoted\" \xc3\xa9"};
  d.attrs.push_back(width);
  d.attrs.push_back(decay);
  d.attrs.push_back(mode);
  std::string text = to_json(d);
  check_same(descriptor_from_json(text, kOrigin), d);

  json j = json::parse(text);
  CHECK(j["attrs"][1]["type"] == "int");
  CHECK(j["attrs"][1]["default"].is_number_integer());
  CHECK(j["attrs"][1]["default"].get<int64_t>() == -3);
  CHECK(j["attrs"][1]["value"].get<int64_t>() == 9007199254740993LL);
  CHECK(j["attrs"][1]["choices"][1].get<int64_t>() == 9007199254740993LL);
  CHECK(j["attrs"][2]["type"] == "float");
  CHECK(j["attrs"][2]["default"].is_number_float());
  CHECK(j["attrs"][2]["default"].get<double>() == 0.9);
  CHECK(j["attrs"][2]["value"].get<double>() == 123456789012345678.0);
  CHECK(j["attrs"][2]["choices"].empty());
  CHECK(j["attrs"][3]["type"] == "string");
  CHECK(j["attrs"][3]["value"] == "exact \"quoted\" \xc3\xa9");
}

TEST_CASE("to_json writes the documented shape") {
  std::string text = to_json(make_adam());
  json j = json::parse(text);
  CHECK(j["schema"] == "opforge.op/1");
  CHECK(j["op"] == "apply_adam");
  CHECK(j["op_version"] == 1);
  CHECK(j["attrs"][0]["name"] == "use_nesterov");
  CHECK(j["attrs"][0]["type"] == "bool");
  CHECK(j["attrs"][0]["default"].is_boolean());
  CHECK(j["attrs"][0]["default"] == false);
  CHECK(j["attrs"][0]["value"] == true);
  CHECK(j["inputs"].size() == 10);
  CHECK(j["inputs"][0]["role"] == "state");
  CHECK(j["inputs"][0]["rank"] == -1);
  CHECK(j["inputs"][2]["dtype"] == "float32");
  CHECK(j["inputs"][5]["role"] == "scalar");
  CHECK(j["inputs"][5]["rank"] == 0);
  CHECK(j["inputs"][9]["role"] == "gradient");
  CHECK(j["outputs"][1]["kernel_arg"] == "updated.1");
  CHECK(j["outputs"][1]["aliases"] == "m");
  CHECK(j["kernel"]["args"][5]["kind"] == "input_scalar");
  CHECK(j["kernel"]["args"][5]["dims"] == 0);
  CHECK(j["kernel"]["args"][10]["kind"] == "output_buffer");
  CHECK(j["shape"]["max_elements"] == 2147483647);
  CHECK(j["shape"]["splittable"] == true);
  CHECK(j["target"]["cpu_features"] == json({"sse4.1", "avx2", "fma", "f16c"}));
  CHECK(j["schedule"]["params"]["vector_width"] == "8");
  CHECK(j["tolerance"]["rtol"].is_number_float());
  CHECK(j["traffic"]["bytes_written_per_element"] == 12);
  CHECK(j.size() == 20);  // every top-level field, nothing else

  // Pretty, 2-space indent, keys in the documented order.
  CHECK(text.rfind("{\n  \"schema\": \"opforge.op/1\",\n  \"op\": \"apply_adam\",\n", 0) == 0);
  CHECK(contains(text, "\n    {\n      \"name\": \"var\",\n      \"role\": \"state\",\n"));
  const char* order[] = {"\"schema\"",  "\"op\"",        "\"op_version\"",     "\"variant\"",
                         "\"kind\"",    "\"summary\"",   "\"formula\"",        "\"reference\"",
                         "\"inputs\"",  "\"outputs\"",   "\"attrs\"",          "\"shape\"",
                         "\"kernel\"",  "\"target\"",    "\"schedule\"",       "\"tolerance\"",
                         "\"traffic\"", "\"cache_key\"", "\"halide_version\"", "\"bandwidth_op\""};
  size_t last = 0;
  for (const char* key : order) {
    size_t at = text.find(std::string("\n  ") + key + ":");
    CHECK_MESSAGE(at != std::string::npos, key);
    CHECK_MESSAGE(at >= last, key);
    last = at;
  }
}

TEST_CASE("to_json refuses attr strings that are not canonical") {
  Descriptor d = make_adam();
  d.attrs[0].value = "True";
  std::string msg = error_of([&] { to_json(d); });
  CHECK_MESSAGE(contains(msg, "/attrs/0/value"), msg);
  d = make_adam();
  Attr f;
  f.name = "decay";
  f.type = Attr::Type::real;
  f.default_value = "0.90000000000000002";
  f.value = "0.9";  // parses, but is not %.17g: it would not round-trip
  d.attrs.push_back(f);
  msg = error_of([&] { to_json(d); });
  CHECK_MESSAGE(contains(msg, "/attrs/1/value"), msg);
  d.attrs[1].value = "nan";
  CHECK(contains(error_of([&] { to_json(d); }), "/attrs/1/value"));
  d.attrs[1].value = "1";
  d.attrs[1].type = Attr::Type::integer;
  d.attrs[1].default_value = "007";
  CHECK(contains(error_of([&] { to_json(d); }), "/attrs/1/default"));
}
