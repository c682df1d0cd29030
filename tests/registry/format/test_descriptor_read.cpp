// Descriptor reading (descriptor_read.cpp): hand-written input, JSON errors as origin:line:col or
// pointer, missing or mistyped fields, unknown names and keys.
#include <doctest/doctest.h>

#include "descriptor_samples.h"

using namespace opforge::registry;
using namespace opforge::registry::testing;

TEST_CASE("a hand-written minimal descriptor parses; optional fields default") {
  const char* text = R"({
    "schema": "opforge.op/1", "op": "bandwidth_rmw", "op_version": 2,
    "variant": "bandwidth_rmw_r2_w1", "kind": "bandwidth",
    "inputs": [{"name": "x", "role": "state", "dtype": "bfloat16", "rank": -1},
               {"name": "y", "role": "tensor", "dtype": "float64", "rank": 3},
               {"name": "s", "role": "scalar", "dtype": "int64", "rank": 0}],
    "outputs": [{"name": "x", "kernel_arg": "out", "aliases": "x", "dtype": "bfloat16",
                 "rank": -1}],
    "shape": {"elementwise": true, "same_shape": ["x", "y"], "max_elements": 4294967296},
    "kernel": {"file": "kernels/bandwidth_rmw_r2_w1.so", "entry": "bandwidth_rmw_r2_w1",
               "args": [{"name": "out", "kind": "output_buffer", "dtype": "bfloat16", "dims": 1},
                        {"name": "s", "kind": "input_scalar", "dtype": "int64", "dims": 0},
                        {"name": "y", "kind": "input_buffer", "dtype": "float64", "dims": 3},
                        {"name": "x", "kind": "input_buffer", "dtype": "bfloat16", "dims": 1}]},
    "target": {"isa": "generic", "halide_target": "host", "cpu_features": [], "priority": -1},
    "tolerance": {"rtol": 0, "atol": 0.5},
    "traffic": {"bytes_read_per_element": 4, "bytes_written_per_element": 2},
    "cache_key": "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "halide_version": ""
  })";
  Descriptor d = descriptor_from_json(text, "hand.json");
  CHECK(d.op == "bandwidth_rmw");
  CHECK(d.op_version == 2);
  CHECK(d.kind == "bandwidth");
  CHECK(d.summary.empty());
  CHECK(d.formula.empty());
  CHECK(d.reference.empty());
  CHECK(d.bandwidth_op.empty());
  CHECK(d.attrs.empty());
  REQUIRE(d.inputs.size() == 3);
  CHECK(d.inputs[0].dtype == DType::bf16);
  CHECK(d.inputs[0].description.empty());
  CHECK(d.inputs[1].role == Input::Role::tensor);
  CHECK(d.inputs[1].rank == 3);
  CHECK(d.inputs[2].dtype == DType::i64);
  CHECK(d.outputs[0].aliases == "x");
  CHECK(d.shape.elementwise == true);
  CHECK(d.shape.indices.empty());
  CHECK(d.shape.max_elements == 4294967296LL);
  CHECK(d.shape.splittable == false);  // written before the field existed: never split
  REQUIRE(d.kernel.args.size() == 4);
  CHECK(d.kernel.args[0].kind == KernelArg::Kind::output_buffer);
  CHECK(d.kernel.args[2].dims == 3);
  CHECK(d.target.cpu_features.empty());
  CHECK(d.target.priority == -1);
  CHECK(d.schedule.recipe.empty());
  CHECK(d.schedule.params.empty());
  CHECK(d.tolerance.rtol == 0.0);
  CHECK(d.tolerance.atol == 0.5);
  CHECK(d.traffic.bytes_read_per_element == 4);
}

TEST_CASE("malformed JSON is reported as origin:line:col") {
  // Line 3 is `  "variant": ,`: the ',' is column 14.
  std::string msg = error_of(
      [] { descriptor_from_json("{\n  \"op\": \"adam\",\n  \"variant\": ,\n}", "bad.json"); });
  CHECK_MESSAGE(msg.rfind("bad.json:3:14: JSON syntax error: ", 0) == 0, msg);
  // Truncated after line 2 (`  "op": "adam"`, 14 characters): end of input is column 15.
  msg = error_of([] { descriptor_from_json("{\n  \"op\": \"adam\"", "cut.json"); });
  CHECK_MESSAGE(msg.rfind("cut.json:2:15: JSON syntax error: ", 0) == 0, msg);
  msg = error_of([] { descriptor_from_json("", "empty.json"); });
  CHECK_MESSAGE(msg.rfind("empty.json:1:1: JSON syntax error: ", 0) == 0, msg);
  // A number a double cannot hold.
  msg = error_of([] { descriptor_from_json("{\"op_version\": 1e400}", "big.json"); });
  CHECK_MESSAGE(msg.rfind("big.json: ", 0) == 0, msg);
  // Not an object at all.
  msg = error_of([] { descriptor_from_json("[1, 2]", "arr.json"); });
  CHECK_MESSAGE(contains(msg, "arr.json: (root): expected object, got array"), msg);
}

TEST_CASE("duplicate JSON keys are rejected with their pointer") {
  std::string text = to_json(make_adam());
  std::string dup = text;
  dup.replace(dup.find("\"op\": \"apply_adam\""), 0, "\"op\": \"x\", ");
  check_rejected(error_of([&] { descriptor_from_json(dup, kOrigin); }), "/op", "duplicate key");
  dup = text;
  size_t in2 = dup.find("\"name\": \"v\"");
  dup.replace(in2, 0, "\"rank\": 1, ");
  check_rejected(error_of([&] { descriptor_from_json(dup, kOrigin); }), "/inputs/2/rank",
                 "duplicate key");
}

TEST_CASE("reject: missing required field") {
  check_rejected(reject([](json& j) { j.erase("cache_key"); }), "/cache_key",
                 "missing required field");
  check_rejected(reject([](json& j) { j["kernel"].erase("entry"); }), "/kernel/entry",
                 "missing required field");
  check_rejected(reject([](json& j) { j["inputs"][4].erase("dtype"); }), "/inputs/4/dtype",
                 "missing required field");
  check_rejected(reject([](json& j) { j["attrs"][0].erase("value"); }), "/attrs/0/value",
                 "missing required field");
  check_rejected(reject([](json& j) { j.erase("tolerance"); }), "/tolerance",
                 "missing required field");
}

TEST_CASE("reject: wrong JSON type") {
  check_rejected(reject([](json& j) { j["op_version"] = "1"; }), "/op_version",
                 "expected integer, got string");
  check_rejected(reject([](json& j) { j["inputs"][0]["rank"] = 1.5; }), "/inputs/0/rank",
                 "expected integer");
  check_rejected(reject([](json& j) { j["inputs"] = json::object(); }), "/inputs",
                 "expected array, got object");
  check_rejected(reject([](json& j) { j["inputs"][3] = "beta1_power"; }), "/inputs/3",
                 "expected object, got string");
  check_rejected(reject([](json& j) { j["shape"]["elementwise"] = 1; }), "/shape/elementwise",
                 "expected boolean");
  check_rejected(reject([](json& j) { j["target"]["cpu_features"][1] = 7; }),
                 "/target/cpu_features/1", "expected string");
  check_rejected(reject([](json& j) { j["schedule"]["params"]["vector_width"] = 8; }),
                 "/schedule/params/vector_width", "expected string");
  check_rejected(reject([](json& j) { j["op_version"] = 0; }), "/op_version", "out of range");
  check_rejected(reject([](json& j) { j["schedule"]["params"]["tasks@0300"] = "2"; }),
                 "/schedule/params/tasks@0300", "is not a valid name");
}

TEST_CASE("reject: wrong schema") {
  check_rejected(reject([](json& j) { j["schema"] = "opforge.op/2"; }), "/schema", "opforge.op/2");
  check_rejected(reject([](json& j) { j["schema"] = "opforge.index/1"; }), "/schema",
                 "unsupported schema");
}

TEST_CASE("reject: unknown dtype") {
  check_rejected(reject([](json& j) { j["inputs"][2]["dtype"] = "float8"; }), "/inputs/2/dtype",
                 "\"float8\"");
  check_rejected(reject([](json& j) { j["outputs"][0]["dtype"] = "f32"; }), "/outputs/0/dtype",
                 "unknown dtype");
  check_rejected(reject([](json& j) { j["kernel"]["args"][0]["dtype"] = "Float32"; }),
                 "/kernel/args/0/dtype", "unknown dtype");
}

TEST_CASE("reject: unknown role") {
  check_rejected(reject([](json& j) { j["inputs"][9]["role"] = "grad"; }), "/inputs/9/role",
                 "unknown role \"grad\"");
}

TEST_CASE("reject: unknown kind") {
  check_rejected(reject([](json& j) { j["kind"] = "loss"; }), "/kind", "unknown kind \"loss\"");
  check_rejected(reject([](json& j) { j["kernel"]["args"][1]["kind"] = "input"; }),
                 "/kernel/args/1/kind", "unknown kernel argument kind \"input\"");
}

TEST_CASE("reject: unknown attr type") {
  check_rejected(reject([](json& j) { j["attrs"][0]["type"] = "boolean"; }), "/attrs/0/type",
                 "unknown attr type \"boolean\"");
}

TEST_CASE("reject: unknown keys, at the top level and inside") {
  check_rejected(reject([](json& j) { j["extra_field"] = 1; }), "/extra_field",
                 "unknown key \"extra_field\"");
  check_rejected(reject([](json& j) { j["inputs"][0]["colour"] = "red"; }), "/inputs/0/colour",
                 "unknown key \"colour\"");
  check_rejected(reject([](json& j) { j["kernel"]["path"] = "x"; }), "/kernel/path", "unknown key");
  check_rejected(reject([](json& j) { j["a/b"] = 1; }), "/a~1b", "unknown key \"a/b\"");
}

TEST_CASE("scalar domains: canonical on read; refused on a tensor or when malformed") {
  json j = json::parse(to_json(make_adam()));
  size_t lr = 0;
  for (size_t i = 0; i < j["inputs"].size(); ++i) {
    if (j["inputs"][i]["name"] == "lr") lr = i;
  }
  j["inputs"][lr]["domain"] = "[0,1)";
  const Descriptor d = descriptor_from_json(j.dump(), kOrigin);
  CHECK(d.find_input("lr")->domain == "[0, 1)");
  CHECK(d.find_input("var")->domain.empty());  // absent: any
  check_rejected(reject([&](json& x) { x["inputs"][lr]["domain"] = "[1, 0)"; }),
                 "/inputs/" + std::to_string(lr) + "/domain", "empty");
  check_rejected(reject([](json& x) { x["inputs"][0]["domain"] = "finite"; }), "/inputs/0/domain",
                 "only a scalar input has a domain");
}

TEST_CASE("tolerance.conditioning: optional, read and written back, refused when negative") {
  json j = json::parse(to_json(make_adam()));
  CHECK_FALSE(j["tolerance"].contains("conditioning"));  // 0: not written
  j["tolerance"]["conditioning"] = 8;
  const Descriptor d = descriptor_from_json(j.dump(), kOrigin);
  CHECK(d.tolerance.conditioning == 8);
  CHECK(json::parse(to_json(d))["tolerance"]["conditioning"] == 8);
  check_rejected(reject([](json& x) { x["tolerance"]["conditioning"] = -1; }),
                 "/tolerance/conditioning", "must be finite and >= 0");
}

TEST_CASE(
    "scalar typical values: read and written back; refused on a tensor or outside the domain") {
  json j = json::parse(to_json(make_adam()));
  size_t lr = 0;
  for (size_t i = 0; i < j["inputs"].size(); ++i) {
    if (j["inputs"][i]["name"] == "lr") lr = i;
  }
  j["inputs"][lr]["domain"] = "[0, 1)";
  j["inputs"][lr]["typical"] = 0.001;
  const Descriptor d = descriptor_from_json(j.dump(), kOrigin);
  REQUIRE(d.find_input("lr")->typical);
  CHECK(*d.find_input("lr")->typical == 0.001);
  CHECK(json::parse(to_json(d))["inputs"][lr]["typical"] == 0.001);
  CHECK_FALSE(d.find_input("var")->typical);
  const std::string at = "/inputs/" + std::to_string(lr) + "/typical";
  check_rejected(reject([&](json& x) {
                   x["inputs"][lr]["domain"] = "[0, 1)";
                   x["inputs"][lr]["typical"] = 1.5;
                 }),
                 at, "inside the domain [0, 1)");
  check_rejected(reject([](json& x) { x["inputs"][0]["typical"] = 1; }), "/inputs/0/typical",
                 "only a scalar input has a typical value");
}

TEST_CASE("scalar defaults: read and written back; refused on a tensor or when not finite") {
  json j = json::parse(to_json(make_adam()));
  size_t lr = 0;
  for (size_t i = 0; i < j["inputs"].size(); ++i) {
    if (j["inputs"][i]["name"] == "lr") lr = i;
  }
  j["inputs"][lr]["default"] = 0.001;
  const Descriptor d = descriptor_from_json(j.dump(), kOrigin);
  REQUIRE(d.find_input("lr")->default_value);
  CHECK(*d.find_input("lr")->default_value == 0.001);
  CHECK_FALSE(d.find_input("beta1")->default_value);  // absent: every call gives it
  CHECK(json::parse(to_json(d))["inputs"][lr]["default"] == 0.001);
  check_rejected(reject([](json& x) { x["inputs"][0]["default"] = 1.0; }), "/inputs/0/default",
                 "only a scalar input has a default");
  check_rejected(reject([&](json& x) { x["inputs"][lr]["default"] = "0.1"; }),
                 "/inputs/" + std::to_string(lr) + "/default", "number");
}
