// Registry index JSON: round trip, exact JSON facts, rejections.
#include <doctest/doctest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "opforge/descriptor.h"

using namespace opforge::registry;
using json = nlohmann::json;

namespace {

Index make_index() {
  Index idx;
  idx.runtime_library = "lib/libopforge_halide_runtime.so";
  idx.halide_version = "14.0.0";
  IndexEntry a;
  a.variant = "apply_adam_f32_avx2_nesterov0";
  a.op = "apply_adam";
  a.descriptor = "ops/apply_adam_f32_avx2_nesterov0.json";
  a.isa = "avx2";
  a.attrs = {{"use_nesterov", "false"}, {"dtype", "float32"}};
  IndexEntry b = a;
  b.variant = "apply_adam_f32_avx512_nesterov1";
  b.descriptor = "ops/apply_adam_f32_avx512_nesterov1.json";
  b.isa = "avx512";
  b.attrs["use_nesterov"] = "true";
  IndexEntry c;
  c.variant = "bandwidth_rmw_r4_w3";
  c.op = "bandwidth_rmw";
  c.descriptor = "ops/bandwidth_rmw_r4_w3.json";
  c.isa = "generic";
  idx.variants = {a, b, c};
  return idx;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "<no FormatError thrown>";
}

std::string reject(const std::function<void(json&)>& edit) {
  json j = json::parse(to_json(make_index()));
  edit(j);
  std::string text = j.dump();
  return error_of([&] { index_from_json(text, "registry/index.json"); });
}

void check_rejected(const std::string& msg, const std::string& pointer, const std::string& detail) {
  CHECK_MESSAGE(msg.find("registry/index.json: " + pointer + ": ") != std::string::npos, msg);
  CHECK_MESSAGE(msg.find(detail) != std::string::npos, msg);
}

}  // namespace

TEST_CASE("index round trip is exact") {
  Index idx = make_index();
  std::string text = to_json(idx);
  Index back = index_from_json(text, "index.json");
  CHECK(back.runtime_library == idx.runtime_library);
  CHECK(back.halide_version == idx.halide_version);
  REQUIRE(back.variants.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(back.variants[i].variant == idx.variants[i].variant);
    CHECK(back.variants[i].op == idx.variants[i].op);
    CHECK(back.variants[i].descriptor == idx.variants[i].descriptor);
    CHECK(back.variants[i].isa == idx.variants[i].isa);
    CHECK(back.variants[i].attrs == idx.variants[i].attrs);
  }
  CHECK(to_json(back) == text);
}

TEST_CASE("index to_json writes the documented shape") {
  std::string text = to_json(make_index());
  json j = json::parse(text);
  CHECK(j["schema"] == "opforge.index/1");
  CHECK(j["runtime_library"] == "lib/libopforge_halide_runtime.so");
  CHECK(j["variants"].size() == 3);
  CHECK(j["variants"][1]["isa"] == "avx512");
  CHECK(j["variants"][1]["attrs"]["use_nesterov"] == "true");  // canonical strings
  CHECK(j["variants"][2]["attrs"].is_object());
  CHECK(j["variants"][2]["attrs"].empty());
  CHECK(j["sha256"] == index_digest(make_index()));
  CHECK(j.size() == 5);
  CHECK(text.rfind("{\n  \"schema\": \"opforge.index/1\",\n  \"runtime_library\": ", 0) == 0);
}

// A flipped byte can leave valid JSON that says something else (an attr, an ISA, a descriptor
// digest): the index records the SHA-256 of its content.
TEST_CASE("the index's digest covers its content, not its layout") {
  const json good = json::parse(to_json(make_index()));
  REQUIRE(good["sha256"].get<std::string>().size() == 64);
  // Other whitespace and key order (nlohmann::json sorts keys): the same content.
  CHECK_NOTHROW(index_from_json(good.dump(), "i.json"));
  CHECK_NOTHROW(index_from_json(good.dump(7), "i.json"));
  // Without the field (registries from before it): not checked.
  json old = good;
  old.erase("sha256");
  old["variants"][0]["isa"] = "avx512";
  CHECK_NOTHROW(index_from_json(old.dump(), "i.json"));

  check_rejected(reject([](json& j) { j["variants"][1]["attrs"]["use_nesterov"] = "false"; }),
                 "/sha256", "the index's content does not match its SHA-256: damaged or edited");
  check_rejected(reject([](json& j) { j["variants"][0]["isa"] = "avx512"; }), "/sha256",
                 "damaged or edited");
  check_rejected(reject([](json& j) { j["halide_version"] = "14.0.1"; }), "/sha256",
                 "damaged or edited");
  check_rejected(reject([](json& j) {
                   std::string d = j["sha256"];
                   d[0] = d[0] == 'a' ? 'b' : 'a';
                   j["sha256"] = d;
                 }),
                 "/sha256", "damaged or edited");
  check_rejected(reject([](json& j) { j["sha256"] = "xyz"; }), "/sha256", "64 lowercase hex");
}

TEST_CASE("an empty index parses") {
  Index idx = index_from_json(
      R"({"schema": "opforge.index/1", "runtime_library": "runtime.so", "halide_version": "14",
          "variants": []})",
      "i.json");
  CHECK(idx.runtime_library == "runtime.so");
  CHECK(idx.halide_version == "14");
  CHECK(idx.variants.empty());
}

TEST_CASE("index rejections") {
  check_rejected(reject([](json& j) { j["schema"] = "opforge.op/1"; }), "/schema",
                 "unsupported schema");
  check_rejected(reject([](json& j) { j.erase("runtime_library"); }), "/runtime_library",
                 "missing required field");
  check_rejected(reject([](json& j) { j["runtime_library"] = "../libHalide.so"; }),
                 "/runtime_library", "relative path");
  check_rejected(reject([](json& j) { j["variants"][1]["descriptor"] = "/etc/passwd"; }),
                 "/variants/1/descriptor", "relative path");
  check_rejected(reject([](json& j) { j["variants"][1]["descriptor"] = "ops/./x.json"; }),
                 "/variants/1/descriptor", "relative path");
  check_rejected(reject([](json& j) { j["variants"][0]["variant"] = "a.b"; }),
                 "/variants/0/variant", "identifier");
  check_rejected(reject([](json& j) { j["variants"][2]["op"] = "Bandwidth"; }), "/variants/2/op",
                 "op name");
  check_rejected(reject([](json& j) { j["variants"][0]["isa"] = "avx-2"; }), "/variants/0/isa",
                 "identifier");
  check_rejected(reject([](json& j) { j["variants"][2]["variant"] = j["variants"][0]["variant"]; }),
                 "/variants/2/variant", "duplicate variant");
  check_rejected(
      reject([](json& j) { j["variants"][2]["descriptor"] = j["variants"][0]["descriptor"]; }),
      "/variants/2/descriptor", "twice");
  check_rejected(reject([](json& j) { j["variants"][0]["attrs"]["use_nesterov"] = false; }),
                 "/variants/0/attrs/use_nesterov", "expected string");
  check_rejected(reject([](json& j) { j["variants"][0]["attrs"]["bad name"] = "x"; }),
                 "/variants/0/attrs/bad name", "not a valid name");
  check_rejected(reject([](json& j) { j["variants"][0].erase("attrs"); }), "/variants/0/attrs",
                 "missing required field");
  check_rejected(reject([](json& j) { j["variants"] = json::object(); }), "/variants",
                 "expected array");
  check_rejected(reject([](json& j) { j["extra"] = true; }), "/extra", "unknown key \"extra\"");
  check_rejected(reject([](json& j) { j["variants"][1]["priority"] = 3; }), "/variants/1/priority",
                 "unknown key \"priority\"");
}

TEST_CASE("index syntax errors carry line and column") {
  std::string msg = error_of([] { index_from_json("{\n\n    nope\n}", "idx.json"); });
  // Line 3, `    nope`: the lexer stops at the 'n' of the bad literal "nope" after reading "no".
  CHECK_MESSAGE(msg.rfind("idx.json:3:", 0) == 0, msg);
  CHECK_MESSAGE(msg.find("JSON syntax error") != std::string::npos, msg);
}
