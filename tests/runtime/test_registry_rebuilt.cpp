// A registry rebuilt while a process has it open: the process sees the old registry or the
// new one, never a failure from a mix of both (issue 16: readers during an install). Every
// test rebuilds its own copy of the test registry by hand, as `opforge build` would.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "registry/format/file_lock.h"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The best variant of `op` this CPU runs, chosen by a Registry of its own (so that the one
// under test has read nothing yet).
std::string runnable_variant(const RegistryCopy& copy, const std::string& op) {
  return Registry::open(copy.dir().string())->choose(op).variant;
}

// The descriptor of `variant` with its rtol changed: a rebuild that changed the descriptor.
std::string with_new_rtol(const RegistryCopy& copy, const std::string& variant) {
  json d = json::parse(read_file(copy.descriptor_file(variant)));
  d["tolerance"]["rtol"] = 0.125;
  return d.dump(2);
}

TEST_CASE("rebuilt registry: a descriptor rewritten after open is read from the new index") {
  RegistryCopy copy;
  const std::string v = runnable_variant(copy, "apply_adam");
  auto reg = Registry::open(copy.dir().string());
  copy.rewrite_descriptors({{v, with_new_rtol(copy, v)}});
  // The index reg read records the old descriptor's digest: it re-reads index.json.
  CHECK_NOTHROW(reg->load(v));
  CHECK(reg->descriptor(v).tolerance.rtol == 0.125);
  CHECK(reg->index().variants.size() ==
        Registry::open(copy.dir().string())->index().variants.size());
}

TEST_CASE("rebuilt registry: descriptors are read once per Registry") {
  RegistryCopy copy;
  const std::string v = runnable_variant(copy, "apply_adam");
  auto reg = Registry::open(copy.dir().string());
  const double rtol = reg->descriptor(v).tolerance.rtol;
  copy.rewrite_descriptors({{v, with_new_rtol(copy, v)}});
  CHECK(reg->descriptor(v).tolerance.rtol == rtol);  // kept, as the kernel it may have loaded
  CHECK(Registry::open(copy.dir().string())->descriptor(v).tolerance.rtol == 0.125);
}

TEST_CASE("rebuilt registry: a variant the rebuild removed is unknown, not a missing file") {
  RegistryCopy copy;
  const std::string v = runnable_variant(copy, "apply_adam");
  auto reg = Registry::open(copy.dir().string());
  const fs::path desc = copy.descriptor_file(v);
  json index = json::parse(read_file(copy / "index.json"));
  json kept = json::array();
  for (const auto& e : index["variants"]) {
    if (e["variant"] != v) kept.push_back(e);
  }
  index["variants"] = kept;
  copy.rewrite_index(index.dump(2));
  fs::remove(desc);
  const std::string msg = error_of([&] { reg->load(v); });
  CHECK(contains(msg, "has no variant '" + v + "'"));
}

TEST_CASE("rebuilt registry: a reader waits for an install in progress") {
  RegistryCopy copy;
  const std::string v = runnable_variant(copy, "apply_adam");
  const std::string text = with_new_rtol(copy, v);
  auto reg = Registry::open(copy.dir().string());
  // A build holding the registry lock has installed the descriptor, not yet the index.
  auto install =
      std::make_unique<registry::FileLock>((copy / "index.json").string(), std::chrono::seconds(1));
  REQUIRE(install->owned());
  std::ofstream(copy.descriptor_file(v), std::ios::trunc) << text;
  std::atomic<bool> index_written{false};
  std::thread build([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    copy.rewrite_descriptors({{v, text}});
    index_written = true;
    install.reset();
  });
  CHECK_NOTHROW(reg->load(v));
  CHECK(index_written.load());
  CHECK(reg->descriptor(v).tolerance.rtol == 0.125);
  build.join();
}

TEST_CASE("rebuilt registry: a new Halide runtime after the old one was loaded is refused") {
  RegistryCopy copy;
  const std::string v = runnable_variant(copy, "apply_adam");
  const std::string w = runnable_variant(copy, "apply_momentum");
  auto reg = Registry::open(copy.dir().string());
  reg->load(v);  // loads the runtime
  // The rebuild changed w's descriptor (so reg re-reads the index) and the runtime.
  copy.rewrite_descriptors({{w, with_new_rtol(copy, w)}});
  json index = json::parse(read_file(copy / "index.json"));
  index["runtime_sha256"] = std::string(64, 'a');
  copy.rewrite_index(index.dump(2));
  const std::string msg = error_of([&] { reg->load(w); });
  CHECK(contains(msg, "was rebuilt with another Halide runtime"));
  CHECK(contains(msg, "restart the process"));
}

// Without a rebuild, damage is reported as before (the retry re-reads an unchanged index).
TEST_CASE("rebuilt registry: damage without a rebuild is still damage") {
  RegistryCopy copy;
  const std::string v = runnable_variant(copy, "apply_adam");
  const std::string text = with_new_rtol(copy, v);
  auto reg = Registry::open(copy.dir().string());
  std::ofstream(copy.descriptor_file(v), std::ios::trunc) << text;
  const std::string msg = error_of([&] { reg->load(v); });
  CHECK(contains(msg, "damaged or edited"));
}

}  // namespace
}  // namespace opforge::testing
