// Descriptor consistency checks (descriptor_checks.cpp): one case per rejection of a
// well-formed but inconsistent descriptor.
#include <doctest/doctest.h>

#include "descriptor_samples.h"

using namespace opforge::registry;
using namespace opforge::registry::testing;

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
