// Descriptor JSON: round trip, exact JSON facts, hand-written input, one case per rejection.
#include <doctest/doctest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "opforge/descriptor.h"

using namespace opforge::registry;
using json = nlohmann::json;

namespace {

const char* const kOrigin = "ops/apply_adam.json";
const char* const kKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

Input input(const std::string& name, Input::Role role, int rank) {
  Input in;
  in.name = name;
  in.role = role;
  in.dtype = DType::f32;
  in.rank = rank;
  in.description = "the " + name + " argument";
  return in;
}

Output output(const std::string& name, const std::string& kernel_arg) {
  Output out;
  out.name = name;
  out.kernel_arg = kernel_arg;
  out.aliases = name;
  out.dtype = DType::f32;
  out.rank = -1;
  return out;
}

KernelArg arg(const std::string& name, KernelArg::Kind kind, int dims) {
  KernelArg a;
  a.name = name;
  a.kind = kind;
  a.dtype = DType::f32;
  a.dims = dims;
  return a;
}

// Input indices: 0 var, 1 m, 2 v, 3 beta1_power, 4 beta2_power, 5 lr, 6 beta1, 7 beta2,
// 8 epsilon, 9 grad. Kernel args: the inputs in that order, then updated.0/1/2.
Descriptor make_adam() {
  using R = Input::Role;
  using K = KernelArg::Kind;
  Descriptor d;
  d.op = "apply_adam";
  d.op_version = 1;
  d.variant = "apply_adam_f32_avx2_nesterov1";
  d.summary = "Adam update, in place";
  d.formula = "lr_t = lr*sqrt(1-beta2_power)/(1-beta1_power); m += (grad-m)*(1-beta1); ...";
  d.reference = "TensorFlow ApplyAdam (tensorflow/core/kernels/training_ops.cc)";
  d.kind = "optimizer";
  d.inputs = {input("var", R::state, -1),         input("m", R::state, -1),
              input("v", R::state, -1),           input("beta1_power", R::scalar, 0),
              input("beta2_power", R::scalar, 0), input("lr", R::scalar, 0),
              input("beta1", R::scalar, 0),       input("beta2", R::scalar, 0),
              input("epsilon", R::scalar, 0),     input("grad", R::gradient, -1)};
  d.outputs = {output("var", "updated.0"), output("m", "updated.1"), output("v", "updated.2")};
  Attr nesterov;
  nesterov.name = "use_nesterov";
  nesterov.type = Attr::Type::boolean;
  nesterov.default_value = "false";
  nesterov.value = "true";
  nesterov.description = "Nesterov momentum";
  d.attrs = {nesterov};
  d.shape.elementwise = true;
  d.shape.same_shape = {"var", "m", "v", "grad"};
  d.shape.max_elements = 2147483647;
  d.shape.splittable = true;
  d.kernel.file = "kernels/apply_adam_f32_avx2_nesterov1.so";
  d.kernel.entry = "apply_adam_f32_avx2_nesterov1";
  for (const Input& in : d.inputs) {
    bool scalar = in.role == R::scalar;
    d.kernel.args.push_back(
        arg(in.name, scalar ? K::input_scalar : K::input_buffer, scalar ? 0 : 1));
  }
  for (const char* out : {"updated.0", "updated.1", "updated.2"}) {
    d.kernel.args.push_back(arg(out, K::output_buffer, 1));
  }
  d.target.isa = "avx2";
  d.target.halide_target = "x86-64-linux-avx-avx2-f16c-fma-sse41";
  d.target.cpu_features = {"sse4.1", "avx2", "fma", "f16c"};
  d.target.priority = 20;
  d.schedule.recipe = "elementwise";
  d.schedule.params = {{"vector_width", "8"}, {"parallel_split", "65536"}};
  d.schedule.summary = "vectorize 8, parallel over 65536-element chunks";
  d.tolerance.rtol = 1e-5;  // not exact in binary: the round trip must keep every bit
  d.tolerance.atol = 0.1 + 0.2;
  d.traffic.bytes_read_per_element = 16;
  d.traffic.bytes_written_per_element = 12;
  d.cache_key = kKey;
  d.halide_version = "14.0.0";
  d.bandwidth_op = "bandwidth_rmw";
  return d;
}

void check_same(const Input& a, const Input& b) {
  CHECK(a.name == b.name);
  CHECK(a.role == b.role);
  CHECK(a.dtype == b.dtype);
  CHECK(a.rank == b.rank);
  CHECK(a.description == b.description);
}

void check_same(const Output& a, const Output& b) {
  CHECK(a.name == b.name);
  CHECK(a.kernel_arg == b.kernel_arg);
  CHECK(a.aliases == b.aliases);
  CHECK(a.dtype == b.dtype);
  CHECK(a.rank == b.rank);
}

void check_same(const Attr& a, const Attr& b) {
  CHECK(a.name == b.name);
  CHECK(a.type == b.type);
  CHECK(a.default_value == b.default_value);
  CHECK(a.value == b.value);
  CHECK(a.description == b.description);
  CHECK(a.choices == b.choices);
}

void check_same(const KernelArg& a, const KernelArg& b) {
  CHECK(a.name == b.name);
  CHECK(a.kind == b.kind);
  CHECK(a.dtype == b.dtype);
  CHECK(a.dims == b.dims);
}

template <typename T>
void check_same(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) check_same(a[i], b[i]);
}

void check_same(const Descriptor& a, const Descriptor& b) {
  CHECK(a.op == b.op);
  CHECK(a.op_version == b.op_version);
  CHECK(a.variant == b.variant);
  CHECK(a.summary == b.summary);
  CHECK(a.formula == b.formula);
  CHECK(a.reference == b.reference);
  CHECK(a.kind == b.kind);
  check_same(a.inputs, b.inputs);
  check_same(a.outputs, b.outputs);
  check_same(a.attrs, b.attrs);
  CHECK(a.shape.elementwise == b.shape.elementwise);
  CHECK(a.shape.same_shape == b.shape.same_shape);
  CHECK(a.shape.max_elements == b.shape.max_elements);
  CHECK(a.shape.splittable == b.shape.splittable);
  CHECK(a.shape.indices == b.shape.indices);
  CHECK(a.shape.row_slices == b.shape.row_slices);
  CHECK(a.kernel.file == b.kernel.file);
  CHECK(a.kernel.entry == b.kernel.entry);
  check_same(a.kernel.args, b.kernel.args);
  CHECK(a.target.isa == b.target.isa);
  CHECK(a.target.halide_target == b.target.halide_target);
  CHECK(a.target.cpu_features == b.target.cpu_features);
  CHECK(a.target.priority == b.target.priority);
  CHECK(a.schedule.recipe == b.schedule.recipe);
  CHECK(a.schedule.params == b.schedule.params);
  CHECK(a.schedule.summary == b.schedule.summary);
  CHECK(a.tolerance.rtol == b.tolerance.rtol);  // exact, bit for bit
  CHECK(a.tolerance.atol == b.tolerance.atol);
  CHECK(a.traffic.bytes_read_per_element == b.traffic.bytes_read_per_element);
  CHECK(a.traffic.bytes_written_per_element == b.traffic.bytes_written_per_element);
  CHECK(a.cache_key == b.cache_key);
  CHECK(a.halide_version == b.halide_version);
  CHECK(a.bandwidth_op == b.bandwidth_op);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "<no FormatError thrown>";
}

// The Adam descriptor's JSON, changed by `edit`, then parsed: the error message.
std::string reject(const std::function<void(json&)>& edit) {
  json j = json::parse(to_json(make_adam()));
  edit(j);
  std::string text = j.dump(2);
  return error_of([&] { descriptor_from_json(text, kOrigin); });
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// "ops/apply_adam.json: /inputs/2/dtype: ..." and the message names `detail`.
void check_rejected(const std::string& msg, const std::string& pointer, const std::string& detail) {
  CHECK_MESSAGE(contains(msg, std::string(kOrigin) + ": " + pointer + ": "), msg);
  CHECK_MESSAGE(contains(msg, detail), msg);
}

// Index of the kernel arg named `name` in the Adam JSON.
size_t arg_index(const json& j, const std::string& name) {
  for (size_t i = 0; i < j["kernel"]["args"].size(); ++i) {
    if (j["kernel"]["args"][i]["name"] == name) return i;
  }
  FAIL("no kernel arg " << name);
  return 0;
}

}  // namespace

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

TEST_CASE("reject: invalid op name") {
  check_rejected(reject([](json& j) { j["op"] = "ApplyAdam"; }), "/op", "\"ApplyAdam\"");
  check_rejected(reject([](json& j) { j["op"] = "../adam"; }), "/op", "op name");
}

TEST_CASE("reject: variant and entry must be identifiers") {
  check_rejected(reject([](json& j) { j["variant"] = "adam-avx2"; }), "/variant", "identifier");
  check_rejected(reject([](json& j) { j["variant"] = "ops/x"; }), "/variant", "identifier");
  check_rejected(reject([](json& j) { j["kernel"]["entry"] = "9adam"; }), "/kernel/entry",
                 "identifier");
  check_rejected(reject([](json& j) { j["inputs"][1]["name"] = "m 2"; }), "/inputs/1/name",
                 "identifier");
}

TEST_CASE("reject: kernel file outside the registry") {
  check_rejected(reject([](json& j) { j["kernel"]["file"] = "../evil.so"; }), "/kernel/file",
                 "relative path");
  check_rejected(reject([](json& j) { j["kernel"]["file"] = "/usr/lib/evil.so"; }), "/kernel/file",
                 "relative path");
  check_rejected(reject([](json& j) { j["kernel"]["file"] = "kernels/../../evil.so"; }),
                 "/kernel/file", "relative path");
}

TEST_CASE("reject: duplicate input names") {
  check_rejected(reject([](json& j) { j["inputs"][2]["name"] = "m"; }), "/inputs/2/name",
                 "duplicate input name \"m\"");
}

TEST_CASE("reject: output aliases an unknown or non-state input") {
  check_rejected(reject([](json& j) { j["outputs"][0]["aliases"] = "weights"; }),
                 "/outputs/0/aliases", "\"weights\" names no input");
  check_rejected(reject([](json& j) { j["outputs"][2]["aliases"] = "grad"; }), "/outputs/2/aliases",
                 "gradient");
  check_rejected(reject([](json& j) { j["outputs"][1]["aliases"] = "lr"; }), "/outputs/1/aliases",
                 "scalar");
  check_rejected(reject([](json& j) { j["outputs"][1]["aliases"] = "var"; }), "/outputs/1/aliases",
                 "aliased by two outputs");
}

TEST_CASE("reject: output kernel_arg must be an output_buffer kernel arg") {
  check_rejected(reject([](json& j) { j["outputs"][0]["kernel_arg"] = "updated.9"; }),
                 "/outputs/0/kernel_arg", "\"updated.9\"");
  check_rejected(reject([](json& j) { j["outputs"][0]["kernel_arg"] = "grad"; }),
                 "/outputs/0/kernel_arg", "output_buffer");
  check_rejected(reject([](json& j) {
                   size_t k = arg_index(j, "updated.2");
                   j["kernel"]["args"].erase(k);
                 }),
                 "/outputs/2/kernel_arg", "\"updated.2\"");
  // An output_buffer no output claims.
  check_rejected(
      reject([](json& j) {
        j["kernel"]["args"].push_back(
            {{"name", "extra"}, {"kind", "output_buffer"}, {"dtype", "float32"}, {"dims", 1}});
      }),
      "/kernel/args/13/name", "\"extra\"");
}

TEST_CASE("reject: kernel input args and inputs must match one to one") {
  // An input_* arg naming no input.
  check_rejected(
      reject([](json& j) { j["kernel"]["args"][arg_index(j, "lr")]["name"] = "learning_rate"; }),
      "/kernel/args/5/name", "\"learning_rate\" names no input");
  // input_buffer for a scalar input.
  check_rejected(reject([](json& j) {
                   json& a = j["kernel"]["args"][arg_index(j, "lr")];
                   a["kind"] = "input_buffer";
                   a["dims"] = 1;
                 }),
                 "/kernel/args/5/kind", "\"lr\"");
  // input_scalar for a tensor input.
  check_rejected(reject([](json& j) {
                   json& a = j["kernel"]["args"][arg_index(j, "grad")];
                   a["kind"] = "input_scalar";
                   a["dims"] = 0;
                 }),
                 "/kernel/args/9/kind", "\"grad\"");
  // An input with no kernel arg.
  check_rejected(reject([](json& j) { j["kernel"]["args"].erase(arg_index(j, "epsilon")); }),
                 "/inputs/8/name", "\"epsilon\"");
  // An input whose only namesake is an output_buffer.
  check_rejected(reject([](json& j) {
                   j["kernel"]["args"].erase(arg_index(j, "var"));
                   j["kernel"]["args"][arg_index(j, "updated.0")]["name"] = "var";
                   j["outputs"][0]["kernel_arg"] = "var";
                 }),
                 "/inputs/0/name", "\"var\" is not among the kernel's input arguments");
  // An input twice.
  check_rejected(reject([](json& j) {
                   j["kernel"]["args"].push_back(j["kernel"]["args"][arg_index(j, "m")]);
                 }),
                 "/kernel/args/13/name", "duplicate kernel argument \"m\"");
  // dtype and dims must fit.
  check_rejected(
      reject([](json& j) { j["kernel"]["args"][arg_index(j, "v")]["dtype"] = "float16"; }),
      "/kernel/args/2/dtype", "float16");
  check_rejected(reject([](json& j) { j["kernel"]["args"][arg_index(j, "lr")]["dims"] = 1; }),
                 "/kernel/args/5/dims", "0 dims");
}

TEST_CASE("reject: attr default/value must fit the attr type") {
  check_rejected(reject([](json& j) { j["attrs"][0]["default"] = "false"; }), "/attrs/0/default",
                 "expected boolean");
  check_rejected(reject([](json& j) { j["attrs"][0]["value"] = 1; }), "/attrs/0/value",
                 "expected boolean");
  check_rejected(reject([](json& j) {
                   j["attrs"][0]["type"] = "int";
                   j["attrs"][0]["default"] = 0;
                   j["attrs"][0]["value"] = 2.5;
                 }),
                 "/attrs/0/value", "expected integer");
  check_rejected(reject([](json& j) {
                   j["attrs"][0]["type"] = "float";
                   j["attrs"][0]["default"] = 0.5;
                   j["attrs"][0]["value"] = "0.5";
                 }),
                 "/attrs/0/value", "expected number");
  check_rejected(reject([](json& j) {
                   j["attrs"][0]["type"] = "string";
                   j["attrs"][0]["default"] = "a";
                   j["attrs"][0]["value"] = json();
                 }),
                 "/attrs/0/value", "expected string, got null");
}

TEST_CASE("reject: attr value or default outside its choices") {
  json mode = {{"name", "mode"},  {"type", "string"},  {"default", "fast"},
               {"value", "slow"}, {"description", ""}, {"choices", {"fast", "exact"}}};
  check_rejected(reject([&](json& j) { j["attrs"].push_back(mode); }), "/attrs/1/value",
                 "\"slow\"");
  mode["value"] = "exact";
  mode["default"] = "quick";
  check_rejected(reject([&](json& j) { j["attrs"].push_back(mode); }), "/attrs/1/default",
                 "\"quick\"");
  mode["default"] = "fast";
  mode["choices"] = {"fast", "exact", "fast"};
  check_rejected(reject([&](json& j) { j["attrs"].push_back(mode); }), "/attrs/1/choices/2",
                 "duplicate choice");
  // Accepted when within the choices.
  mode["choices"] = {"fast", "exact"};
  CHECK(reject([&](json& j) { j["attrs"].push_back(mode); }) == "<no FormatError thrown>");
}

TEST_CASE("reject: duplicate attr names") {
  check_rejected(reject([](json& j) { j["attrs"].push_back(j["attrs"][0]); }), "/attrs/1/name",
                 "duplicate attr name \"use_nesterov\"");
}

TEST_CASE("reject: cache_key must be 64 lowercase hex digits") {
  std::string upper(kKey);
  upper[10] = 'A';
  check_rejected(reject([&](json& j) { j["cache_key"] = upper; }), "/cache_key", "64");
  check_rejected(reject([](json& j) { j["cache_key"] = std::string(kKey).substr(1); }),
                 "/cache_key", "hex");
  check_rejected(reject([](json& j) { j["cache_key"] = std::string(kKey) + "0"; }), "/cache_key",
                 "hex");
  check_rejected(reject([](json& j) { j["cache_key"] = ""; }), "/cache_key", "hex");
  check_rejected(reject([](json& j) {
                   j["kind"] = "bandwidth";
                   j["cache_key"] = "";
                 }),
                 "/cache_key", "hex");
  std::string g(kKey);
  g[0] = 'g';
  check_rejected(reject([&](json& j) { j["cache_key"] = g; }), "/cache_key", "hex");
}

TEST_CASE("reject: tolerance must be finite and non-negative") {
  check_rejected(reject([](json& j) { j["tolerance"]["rtol"] = -1e-9; }), "/tolerance/rtol",
                 ">= 0");
  check_rejected(reject([](json& j) { j["tolerance"]["atol"] = "1e-6"; }), "/tolerance/atol",
                 "expected number");
  // JSON has no infinity; a literal too big for a double is refused while parsing.
  std::string text = to_json(make_adam());
  size_t at = text.find("\"rtol\": ") + 8;
  text.replace(at, text.find(',', at) - at, "1e999");
  std::string msg = error_of([&] { descriptor_from_json(text, kOrigin); });
  CHECK_MESSAGE(msg.rfind(std::string(kOrigin) + ": ", 0) == 0, msg);
}

TEST_CASE("reject: same_shape must name tensor inputs") {
  check_rejected(reject([](json& j) { j["shape"]["same_shape"][1] = "mom"; }),
                 "/shape/same_shape/1", "\"mom\" names no input");
  check_rejected(reject([](json& j) { j["shape"]["same_shape"].push_back("epsilon"); }),
                 "/shape/same_shape/4", "scalar");
  check_rejected(reject([](json& j) { j["shape"]["same_shape"].push_back("var"); }),
                 "/shape/same_shape/4", "twice");
}

TEST_CASE("reject: max_elements must be positive") {
  check_rejected(reject([](json& j) { j["shape"]["max_elements"] = 0; }), "/shape/max_elements",
                 "out of range");
  check_rejected(reject([](json& j) { j["shape"]["max_elements"] = -5; }), "/shape/max_elements",
                 "out of range");
}

TEST_CASE("shape.splittable: optional boolean, false when absent, never for sparse rows") {
  Descriptor d = make_adam();
  for (const bool splittable : {true, false}) {
    d.shape.splittable = splittable;
    const std::string text = to_json(d);
    CHECK(json::parse(text)["shape"]["splittable"] == splittable);
    const Descriptor back = descriptor_from_json(text, kOrigin);
    CHECK(back.shape.splittable == splittable);
    CHECK(to_json(back) == text);
  }
  CHECK(reject([](json& j) { j["shape"].erase("splittable"); }) == "<no FormatError thrown>");
  json old = json::parse(to_json(make_adam()));
  old["shape"].erase("splittable");
  CHECK_FALSE(descriptor_from_json(old.dump(), kOrigin).shape.splittable);
  check_rejected(reject([](json& j) { j["shape"]["splittable"] = 1; }), "/shape/splittable",
                 "expected boolean");
  check_rejected(reject([](json& j) { j["shape"]["splittable"] = "true"; }), "/shape/splittable",
                 "expected boolean");
}

TEST_CASE("reject: unknown keys, at the top level and inside") {
  check_rejected(reject([](json& j) { j["extra_field"] = 1; }), "/extra_field",
                 "unknown key \"extra_field\"");
  check_rejected(reject([](json& j) { j["inputs"][0]["colour"] = "red"; }), "/inputs/0/colour",
                 "unknown key \"colour\"");
  check_rejected(reject([](json& j) { j["kernel"]["path"] = "x"; }), "/kernel/path", "unknown key");
  check_rejected(reject([](json& j) { j["a/b"] = 1; }), "/a~1b", "unknown key \"a/b\"");
}

TEST_CASE("reject: scalar inputs have rank 0; ranks are >= -1") {
  check_rejected(reject([](json& j) { j["inputs"][6]["rank"] = 1; }), "/inputs/6/rank", "rank 0");
  check_rejected(reject([](json& j) { j["inputs"][0]["rank"] = -2; }), "/inputs/0/rank",
                 "out of range");
}

TEST_CASE("reject: output dtype must match its aliased input and kernel arg") {
  check_rejected(reject([](json& j) { j["outputs"][1]["dtype"] = "float64"; }), "/outputs/1/dtype",
                 "float64");
  check_rejected(
      reject([](json& j) { j["kernel"]["args"][arg_index(j, "updated.0")]["dtype"] = "bfloat16"; }),
      "/outputs/0/kernel_arg", "bfloat16");
}

TEST_CASE("reject: bandwidth_op must be empty or an op name") {
  check_rejected(reject([](json& j) { j["bandwidth_op"] = "Bandwidth RMW"; }), "/bandwidth_op",
                 "op name");
  CHECK(reject([](json& j) { j["bandwidth_op"] = ""; }) == "<no FormatError thrown>");
  CHECK(reject([](json& j) { j.erase("bandwidth_op"); }) == "<no FormatError thrown>");
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

TEST_CASE("reject: CPU feature names") {
  check_rejected(reject([](json& j) { j["target"]["cpu_features"][2] = "avx 2"; }),
                 "/target/cpu_features/2", "CPU feature");
  check_rejected(reject([](json& j) { j["target"]["cpu_features"][0] = ""; }),
                 "/target/cpu_features/0", "CPU feature");
  CHECK(reject([](json& j) { j["target"]["cpu_features"][0] = "x86-64-v3"; }) ==
        "<no FormatError thrown>");
}

// A sparse-rows descriptor: SparseApplyAdagrad-like, indices after grad.
Descriptor make_sparse() {
  Descriptor d = make_adam();
  d.shape.elementwise = false;
  d.shape.splittable = false;
  d.shape.same_shape = {"var", "m", "v"};
  d.shape.row_slices = {"grad"};
  d.inputs.push_back(input("indices", Input::Role::tensor, -1));
  d.inputs.back().dtype = DType::i64;
  d.shape.indices = "indices";
  d.kernel.args.insert(d.kernel.args.begin() + 10,
                       arg("indices", KernelArg::Kind::input_buffer, 1));
  d.kernel.args[10].dtype = DType::i64;
  return d;
}

TEST_CASE("sparse-rows shape constraints round trip and are validated") {
  const Descriptor d = make_sparse();
  const std::string text = to_json(d);
  check_same(d, descriptor_from_json(text, kOrigin));
  json j = json::parse(text);
  CHECK(j["shape"]["indices"] == "indices");
  CHECK(j["shape"]["row_slices"] == json::array({"grad"}));
  auto edited = [&](const std::function<void(json&)>& edit) {
    json k = json::parse(text);
    edit(k);
    return error_of([&] { descriptor_from_json(k.dump(), kOrigin); });
  };
  check_rejected(edited([](json& k) { k["shape"].erase("indices"); }), "/shape/indices",
                 "missing required field");
  check_rejected(edited([](json& k) { k["shape"]["indices"] = "grad"; }), "/shape/indices",
                 "int32 or int64");
  check_rejected(edited([](json& k) { k["shape"]["row_slices"] = json::array({"var"}); }),
                 "/shape/row_slices/0", "\"var\"");
  check_rejected(edited([](json& k) { k["shape"]["splittable"] = true; }), "/shape/splittable",
                 "cannot be splittable");
}

TEST_CASE("result inputs: aliased in place by an output, never in same_shape") {
  auto grad_as_result = [](json& j) {
    for (auto& in : j["inputs"]) {
      if (in["name"] == "grad") in["role"] = "result";
    }
  };
  check_rejected(reject(grad_as_result), "/shape/same_shape/3", "\"grad\" is a result input");
  // Out of same_shape, with an output overwriting it (a flag like found_inf), it is valid.
  json j = json::parse(to_json(make_adam()));
  grad_as_result(j);
  j["shape"]["same_shape"].erase(3);
  j["kernel"]["args"].push_back(
      {{"name", "grad_out"}, {"kind", "output_buffer"}, {"dtype", "float32"}, {"dims", 1}});
  j["outputs"].push_back({{"name", "grad"},
                          {"kernel_arg", "grad_out"},
                          {"aliases", "grad"},
                          {"dtype", "float32"},
                          {"rank", -1}});
  const Descriptor d = descriptor_from_json(j.dump(2), "result.json");
  CHECK(d.find_input("grad")->role == Input::Role::result);
  CHECK(std::string(role_name(Input::Role::result)) == "result");
}
