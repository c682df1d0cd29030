// NN descriptors (kind "nn", shape.named_dims): named dims, fresh outputs with dim
// expressions, checks, algorithm and cost survive the round trip; each inconsistency is
// rejected naming its JSON location.
#include <doctest/doctest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "opforge/descriptor.h"

using namespace opforge::registry;
using json = nlohmann::json;

namespace {

const char* const kKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

// conv2d NCHW with an int scalar stride and a bool attr, as the builder writes it.
Descriptor make_conv() {
  Descriptor d;
  d.op = "conv2d";
  d.variant = "conv2d__winograd__f32__avx2";
  d.kind = "nn";
  d.inputs = {{"x", Input::Role::tensor, DType::f32, 4, "input", {"N", "C", "H", "W"}},
              {"weight", Input::Role::tensor, DType::f32, 4, "filters", {"O", "C", "KH", "KW"}},
              {"stride", Input::Role::scalar, DType::i32, 0, "stride", {}}};
  d.outputs = {
      {"y", "y", "", DType::f32, 4, {"N", "O", "(H - KH) / stride + 1", "(W - KW) / stride + 1"}}};
  Attr relu;
  relu.name = "relu";
  relu.type = Attr::Type::boolean;
  relu.default_value = "false";
  relu.value = "true";
  d.attrs = {relu};
  d.shape.elementwise = false;
  d.shape.named_dims = true;
  d.shape.max_elements = 2147483647;
  d.shape.checks = {{"stride >= 1", "stride must be at least 1"}};
  d.kernel = {"kernels/conv2d__winograd__f32__avx2.so",
              "conv2d__winograd__f32__avx2",
              {{"x", KernelArg::Kind::input_buffer, DType::f32, 4},
               {"weight", KernelArg::Kind::input_buffer, DType::f32, 4},
               {"stride", KernelArg::Kind::input_scalar, DType::i32, 0},
               {"y", KernelArg::Kind::output_buffer, DType::f32, 4}}};
  d.target = {"avx2", "x86-64-linux-avx-avx2-f16c-fma-sse41", {"avx2"}, 1};
  d.tolerance = {1e-4, 1e-5};
  d.cache_key = kKey;
  d.algorithm = {"winograd", "KH == 3 && KW == 3 && stride == 1", 10, "F(2x2, 3x3)"};
  d.cost = {"2 * N * O * C * KH * KW * ((H - KH) / stride + 1) * ((W - KW) / stride + 1)",
            "4 * (N * C * H * W + O * C * KH * KW)", "x=1,8,16,16 weight=8,8,3,3 stride=1"};
  return d;
}

void expect_rejected(const std::function<void(json&)>& edit, const std::string& where,
                     const std::string& what) {
  json j = json::parse(to_json(make_conv()));
  edit(j);
  try {
    descriptor_from_json(j.dump(), "ops/conv.json");
    FAIL("accepted: " << where);
  } catch (const FormatError& e) {
    const std::string m = e.what();
    CHECK_MESSAGE(m.find(where) != std::string::npos, m);
    CHECK_MESSAGE(m.find(what) != std::string::npos, m);
  }
}

}  // namespace

TEST_CASE("an NN descriptor round-trips field by field") {
  const Descriptor d = make_conv();
  const Descriptor r = descriptor_from_json(to_json(d), "ops/conv.json");
  CHECK(r.kind == "nn");
  CHECK(r.shape.named_dims);
  CHECK(r.inputs[0].dims == d.inputs[0].dims);
  CHECK(r.inputs[1].dims == d.inputs[1].dims);
  CHECK(r.outputs[0].dims == d.outputs[0].dims);
  CHECK(r.outputs[0].aliases.empty());
  REQUIRE(r.shape.checks.size() == 1);
  CHECK(r.shape.checks[0].condition == "stride >= 1");
  CHECK(r.shape.checks[0].message == "stride must be at least 1");
  CHECK(r.algorithm.name == "winograd");
  CHECK(r.algorithm.applies_when == d.algorithm.applies_when);
  CHECK(r.algorithm.priority == 10);
  CHECK(r.algorithm.description == "F(2x2, 3x3)");
  CHECK(r.cost.flops == d.cost.flops);
  CHECK(r.cost.bytes == d.cost.bytes);
  CHECK(r.cost.example == d.cost.example);
  CHECK(to_json(r) == to_json(d));
}

TEST_CASE("optimizer descriptors do not grow NN keys") {
  Descriptor d = make_conv();
  const json j = json::parse(to_json(d));
  CHECK(j.contains("algorithm"));
  d.kind = "optimizer";
  d.shape.named_dims = false;
  d.shape.elementwise = true;
  for (auto& in : d.inputs) in.dims.clear();
  for (auto& o : d.outputs) o.dims.clear();
  const json o = json::parse(to_json(d));
  CHECK_FALSE(o.contains("algorithm"));
  CHECK_FALSE(o.contains("cost"));
  CHECK_FALSE(o["inputs"][0].contains("dims"));
  CHECK_FALSE(o["shape"].contains("named_dims"));
}

TEST_CASE("inconsistent NN descriptors are rejected where they are wrong") {
  expect_rejected(
      [](json& j) {
        j["inputs"][0]["dims"] = {"N", "C", "H"};
      },
      "/inputs/0/dims", "3 dims for rank 4");
  expect_rejected([](json& j) { j["inputs"][1]["dims"][2] = "K H"; }, "/inputs/1/dims/2",
                  "not a dim name");
  expect_rejected([](json& j) { j["inputs"][1]["dims"][2] = "KH?"; }, "/inputs/1/dims/2",
                  "not a dim name");
  expect_rejected([](json& j) { j["outputs"][0]["dims"][2] = "(H - KH) / pad + 1"; },
                  "/outputs/0/dims/2", "\"pad\"");
  expect_rejected([](json& j) { j["outputs"][0]["dims"][3] = "(W - KW) / + 1"; },
                  "/outputs/0/dims/3", "col");
  expect_rejected([](json& j) { j["shape"]["checks"][0]["condition"] = "stride >= one"; },
                  "/shape/checks/0/condition", "\"one\"");
  expect_rejected([](json& j) { j["shape"]["checks"][0]["why"] = "x"; }, "/shape/checks/0",
                  "unknown key");
  expect_rejected([](json& j) { j["algorithm"]["applies_when"] = "KH == 3 &&"; },
                  "/algorithm/applies_when", "ends too early");
  expect_rejected([](json& j) { j["algorithm"]["name"] = "Wino grad"; }, "/algorithm/name",
                  "not a valid algorithm name");
  expect_rejected(
      [](json& j) {
        j["shape"]["named_dims"] = false;
        j["shape"]["elementwise"] = true;
      },
      "/shape/named_dims", "must be true");
  expect_rejected([](json& j) { j["shape"]["elementwise"] = true; }, "/shape/elementwise",
                  "must be false");
  expect_rejected([](json& j) { j["kernel"]["args"][3]["dims"] = 3; }, "/kernel/args/3/dims",
                  "rank 4");
  expect_rejected([](json& j) { j["cost"]["flops"] = "2 * Q"; }, "/cost/flops", "\"Q\"");
  expect_rejected([](json& j) { j["inputs"][0]["role"] = "state"; }, "/inputs/0/role",
                  "role tensor");
}
