// Precision dumps (runtime/call_dump.h): while a dump directory is set, a kernel call leaves
// an entry with its inputs as they were before the call, its outputs after, and a call.json
// naming them with the scalars and the descriptor; entries are numbered in call order and
// continue after what the directory holds; a chunked call is one entry; a call refused for
// its arguments leaves none; "" turns dumping off; a directory that cannot be made is an
// error naming it.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "opforge/npy.hpp"
#include "opforge/opforge.h"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

namespace fs = std::filesystem;
const std::string kAdamAvx2 = "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx2";

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<float> floats(const fs::path& file) {
  return npy::to_f32(npy::read(file), file);
}

// Turns dumping off at scope end, whatever the test did.
struct DumpOff {
  ~DumpOff() { set_dump_dir(""); }
};

TEST_CASE("a dumped call: inputs before, outputs after, scalars and descriptor in call.json") {
  Kernel& k = shared_registry().load(kAdamAvx2);
  if (!runs_here(k.descriptor())) return;
  TempDir tmp;
  DumpOff off;
  const fs::path dir = tmp.path() / "dumps";
  AdamData a(1001);
  const AdamData before = a;
  set_dump_dir(dir.string());
  CHECK(dump_dir() == dir.string());
  k.call(a.tensors({1001}), adam_scalars());
  k.call_chunked(a.tensors({1001}), adam_scalars(), 64);  // many slices, one entry
  set_dump_dir("");
  CHECK(dump_dir().empty());
  k.call(a.tensors({1001}), adam_scalars());  // not dumped

  const auto e = entries(dir);
  REQUIRE(e.size() == 2);
  CHECK(e[0].filename() == "000000-" + kAdamAvx2);
  CHECK(e[1].filename() == "000001-" + kAdamAvx2);
  CHECK(floats(e[0] / "in.var.npy") == before.var);
  CHECK(floats(e[0] / "in.grad.npy") == before.grad);
  CHECK(floats(e[1] / "in.var.npy") == floats(e[0] / "out.var.npy"));  // call 2 saw call 1's
  CHECK(floats(e[0] / "out.var.npy") != before.var);
  const nlohmann::json call = nlohmann::json::parse(read_file(e[0] / "call.json"));
  CHECK(call["format"] == "opforge-dump/1");
  CHECK(call["index"] == 0);
  CHECK(call["op"] == "apply_adam");
  CHECK(call["variant"] == kAdamAvx2);
  CHECK(call["scalars"]["lr"] == 0.01);
  CHECK(call["scalars"]["beta2_power"] == 0.997002999);
  REQUIRE(call["inputs"].size() == 4);
  CHECK(call["inputs"][0] ==
        nlohmann::json{
            {"name", "var"}, {"file", "in.var.npy"}, {"dtype", "float32"}, {"shape", {1001}}});
  REQUIRE(call["outputs"].size() == 3);
  CHECK(call["outputs"][0]["file"] == "out.var.npy");
  const registry::Descriptor d =
      registry::descriptor_from_json(call["descriptor"].dump(), "call.json");
  CHECK(d.variant == kAdamAvx2);
  CHECK(d.tolerance.rtol == k.descriptor().tolerance.rtol);
  // The state after the second call is what the last (undumped) call started from.
  CHECK(floats(e[1] / "out.m.npy") != floats(e[0] / "out.m.npy"));
}

TEST_CASE("dump numbering continues after a directory's entries; refused calls leave none") {
  Kernel& k = shared_registry().load(kAdamAvx2);
  if (!runs_here(k.descriptor())) return;
  TempDir tmp;
  DumpOff off;
  fs::create_directories(tmp.path() / "000041-earlier");
  fs::create_directories(tmp.path() / "notes");
  AdamData a(17);
  set_dump_dir(tmp.path().string());
  auto bad = a.tensors({17});
  bad.pop_back();  // no gradient: refused before anything runs
  CHECK_THROWS_AS(k.call(bad, adam_scalars()), Error);
  k.call(a.tensors({17}), adam_scalars());
  set_dump_dir("");
  CHECK(fs::exists(tmp.path() / ("000042-" + kAdamAvx2) / "call.json"));
  CHECK(entries(tmp.path()).size() == 3);
}

TEST_CASE("a dump directory that cannot be made is an error naming it; C ABI too") {
  TempDir tmp;
  DumpOff off;
  std::ofstream(tmp.path() / "file") << "x";
  const std::string bad = (tmp.path() / "file" / "sub").string();
  CHECK_THROWS_WITH_AS(set_dump_dir(bad), doctest::Contains(bad.c_str()), Error);
  CHECK(dump_dir().empty());
  CHECK(opforge_set_dump_dir(bad.c_str()) == 1);
  CHECK(contains(opforge_last_error(), bad));
  CHECK(opforge_set_dump_dir(tmp.path().c_str()) == 0);
  CHECK(std::string(opforge_dump_dir()) == tmp.path().string());
  CHECK(opforge_set_dump_dir(nullptr) == 0);
  CHECK(std::string(opforge_dump_dir()).empty());
}

}  // namespace
}  // namespace opforge::testing
