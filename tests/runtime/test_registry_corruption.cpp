// A damaged registry fails with a message naming the file and what is wrong, never with a
// crash. Every test damages its own copy of the test registry.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* const kAdamAvx2 = "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx2";

TEST_CASE("corrupt registry: a missing directory or index is named, with the command to run") {
  TempDir tmp;
  const std::string missing = (tmp.path() / "nothing-here").string();
  CHECK(error_of([&] { Registry::open(missing); }) ==
        "no op registry at " + missing + " (index.json missing); run 'opforge build --registry " +
            missing + "' to create it");
  const std::string empty = tmp.path().string();
  CHECK(error_of([&] { Registry::open(empty); }) ==
        "no op registry at " + empty + " (index.json missing); run 'opforge build --registry " +
            empty + "' to create it");
  // A file where the directory should be: said so, not "run opforge build" (which refuses).
  const std::string file = (tmp.path() / "a-file").string();
  write_file(file, "x");
  CHECK(error_of([&] { Registry::open(file); }) == "op registry " + file + ": not a directory");
}

TEST_CASE("corrupt registry: a truncated index.json names the file and a line:col") {
  RegistryCopy copy;
  const fs::path index = copy / "index.json";
  const std::string text = read_file(index);
  write_file(index, text.substr(0, text.size() / 2));
  const std::string msg = error_of([&] { Registry::open(copy.dir().string()); });
  CHECK(contains(msg, index.string()));
  CHECK(std::regex_search(msg, std::regex("index\\.json:[0-9]+:[0-9]+:")));
  CHECK(contains(msg, "JSON"));
}

TEST_CASE("corrupt registry: an index naming a missing descriptor fails when the op is used") {
  RegistryCopy copy;
  const fs::path desc = copy.descriptor_file(kAdamAvx2);
  REQUIRE(fs::remove(desc));
  std::unique_ptr<Registry> reg;
  REQUIRE_NOTHROW(reg = Registry::open(copy.dir().string()));  // lazily read
  const std::string msg = error_of([&] { reg->select("apply_adam", {}, "avx2"); });
  CHECK(contains(msg, desc.string()));
  // Other ops are unaffected.
  CHECK_NOTHROW(reg->select("apply_gradient_descent", {}, "avx2"));
}

TEST_CASE("corrupt registry: a descriptor for another variant than the index says is named") {
  RegistryCopy copy;
  const fs::path a = copy.descriptor_file(kAdamAvx2);
  const fs::path b = copy.descriptor_file("apply_adam__use_nesterov_1__epsilon_mode_tf__f32__avx2");
  write_file(a, read_file(b));
  auto reg = Registry::open(copy.dir().string());
  const std::string msg = error_of([&] { reg->select("apply_adam", {}, "avx2"); });
  CHECK(contains(msg, a.string()));
  CHECK(contains(msg, kAdamAvx2));
}

TEST_CASE("corrupt registry: an index path that leaves the registry is rejected at open") {
  RegistryCopy copy;
  const fs::path index = copy / "index.json";
  json j = json::parse(read_file(index));
  j["variants"][0]["descriptor"] = "../outside.json";
  write_file(index, j.dump(2));
  const std::string msg = error_of([&] { Registry::open(copy.dir().string()); });
  CHECK(contains(msg, index.string()));
  CHECK(contains(msg, "/variants/0/descriptor"));
}

// A flipped byte can leave valid JSON that selects another variant or names another
// descriptor digest: the index records the SHA-256 of its own content.
TEST_CASE("corrupt registry: an index edited into other valid JSON is refused by digest") {
  RegistryCopy copy;
  const fs::path index = copy / "index.json";
  std::string text = read_file(index);
  const std::string from = "\"use_nesterov\": \"false\"";
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), "\"use_nesterov\": \"true\"");
  write_file(index, text);
  const std::string msg = error_of([&] { Registry::open(copy.dir().string()); });
  CHECK(contains(msg, index.string() + ": /sha256: "));
  CHECK(contains(msg, "damaged or edited"));
}

TEST_CASE("corrupt registry: an attr combination no variant has is named") {
  RegistryCopy copy;
  const fs::path index = copy / "index.json";
  json j = json::parse(read_file(index));
  json kept = json::array();
  for (const auto& v : j["variants"]) {
    if (!(v["op"] == "apply_adam" && v["attrs"]["use_nesterov"] == "true")) kept.push_back(v);
  }
  // fp32: 2 epsilon modes x 2 ISAs; bf16m and f16m (epsilon_mode tf) x 2 ISAs
  REQUIRE(kept.size() + 8 == j["variants"].size());
  j["variants"] = kept;
  copy.rewrite_index(j.dump(2));
  auto reg = Registry::open(copy.dir().string());
  CHECK_NOTHROW(reg->select("apply_adam", {}, "avx2"));
  const std::string msg = error_of([&] {
    reg->select("apply_adam", {{"use_nesterov", "true"}}, "avx2");
  });
  CHECK(contains(msg, "apply_adam"));
  CHECK(contains(msg, "no registered variant"));
  CHECK(contains(msg, "use_nesterov=true"));
}

TEST_CASE("corrupt registry: a self-consistent descriptor that disagrees with the kernel") {
  RegistryCopy copy;
  const fs::path desc = copy.descriptor_file(kAdamAvx2);
  json j = json::parse(read_file(desc));
  // Rename grad -> gradient everywhere the descriptor names it.
  int renamed = 0;
  for (auto& in : j["inputs"]) {
    if (in["name"] == "grad") in["name"] = "gradient", ++renamed;
  }
  for (auto& a : j["kernel"]["args"]) {
    if (a["name"] == "grad") a["name"] = "gradient", ++renamed;
  }
  for (auto& s : j["shape"]["same_shape"]) {
    if (s == "grad") s = "gradient", ++renamed;
  }
  REQUIRE(renamed == 3);
  copy.rewrite_descriptors({{kAdamAvx2, j.dump(2)}});
  auto reg = Registry::open(copy.dir().string());
  // The descriptor alone is valid ...
  registry::Descriptor d;
  REQUIRE_NOTHROW(d = reg->descriptor(kAdamAvx2));
  CHECK(d.find_input("gradient") != nullptr);
  // ... but the compiled kernel's metadata says otherwise.
  const std::string msg = error_of([&] { reg->select("apply_adam", {}, "avx2"); });
  CHECK(contains(msg, "metadata"));
  CHECK(contains(msg, kAdamAvx2));
  CHECK(contains(msg, "'grad'"));
  CHECK(contains(msg, "'gradient'"));
  // The untouched nesterov variant still loads.
  CHECK_NOTHROW(reg->select("apply_adam", {{"use_nesterov", "true"}}, "avx2"));
}

TEST_CASE("corrupt registry: a descriptor whose kernel argument order is swapped") {
  RegistryCopy copy;
  const fs::path desc = copy.descriptor_file(kAdamAvx2);
  json j = json::parse(read_file(desc));
  auto& args = j["kernel"]["args"];
  REQUIRE(args[3]["name"] == "beta1_power");
  REQUIRE(args[4]["name"] == "beta2_power");
  std::swap(args[3], args[4]);  // would silently swap two scalars
  copy.rewrite_descriptors({{kAdamAvx2, j.dump(2)}});
  auto reg = Registry::open(copy.dir().string());
  const std::string msg = error_of([&] { reg->select("apply_adam", {}, "avx2"); });
  CHECK(contains(msg, "metadata"));
  CHECK(contains(msg, "argument 3"));
}

TEST_CASE("corrupt registry: a kernel .so replaced by garbage cannot load") {
  RegistryCopy copy;
  const fs::path so = copy.kernel_file("apply_gradient_descent__f32__avx2");
  fs::remove(so);  // a new inode: never the file the shared registry may have mapped
  write_file(so, std::string(4096, '\x5a') + "this is not an ELF shared object");
  auto reg = Registry::open(copy.dir().string());
  const std::string msg = error_of([&] { reg->select("apply_gradient_descent", {}, "avx2"); });
  CHECK(contains(msg, "cannot load kernel"));
  CHECK(contains(msg, so.string()));
  // A missing kernel file is reported the same way.
  const fs::path so2 = copy.kernel_file("apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx2");
  fs::remove(so2);
  const std::string msg2 = error_of([&] { reg->select("apply_adam", {}, "avx2"); });
  CHECK(contains(msg2, "cannot load kernel"));
  CHECK(contains(msg2, so2.string()));
}

TEST_CASE("hostile registry: a kernel or runtime that is a symlink, or not a file, is not loaded") {
  RegistryCopy copy;
  TempDir elsewhere;
  // A kernel .so replaced by a link to a library outside the registry: dlopen would run its
  // constructors before any check; now it is refused without being opened.
  const fs::path so = copy.kernel_file("apply_gradient_descent__f32__avx2");
  const fs::path outside = elsewhere.path() / "evil.so";
  fs::copy_file(so, outside);
  fs::remove(so);
  fs::create_symlink(outside, so);
  auto reg = Registry::open(copy.dir().string());
  std::string msg = error_of([&] { reg->select("apply_gradient_descent", {}, "avx2"); });
  CHECK(contains(msg, "is a symbolic link"));
  CHECK(contains(msg, so.string()));
  // A kernels/ directory that is itself a link out.
  RegistryCopy copy2;
  fs::rename(copy2 / "kernels", elsewhere.path() / "kernels");
  fs::create_symlink(elsewhere.path() / "kernels", copy2 / "kernels");
  auto reg2 = Registry::open(copy2.dir().string());
  msg = error_of([&] { reg2->select("apply_gradient_descent", {}, "avx2"); });
  CHECK(contains(msg, "is a symbolic link"));
  // A kernel that is a directory.
  RegistryCopy copy3;
  const fs::path so3 = copy3.kernel_file("apply_gradient_descent__f32__avx2");
  fs::remove(so3);
  fs::create_directory(so3);
  auto reg3 = Registry::open(copy3.dir().string());
  msg = error_of([&] { reg3->select("apply_gradient_descent", {}, "avx2"); });
  CHECK(contains(msg, "a directory, not a regular file"));
  // index.json as a symlink: the registry is refused at open.
  RegistryCopy copy4;
  fs::rename(copy4 / "index.json", elsewhere.path() / "index.json");
  fs::create_symlink(elsewhere.path() / "index.json", copy4 / "index.json");
  msg = error_of([&] { Registry::open(copy4.dir().string()); });
  CHECK(contains(msg, "symbolic link"));
}

TEST_CASE("hostile registry: an index nested 100,000 deep is refused by its depth") {
  RegistryCopy copy;
  write_file(copy / "index.json", std::string(100000, '[') + std::string(100000, ']'));
  // Refused at the 65th level, before anything deeper is built (before: 10 GB and 44 s).
  const std::string msg = error_of([&] { Registry::open(copy.dir().string()); });
  CHECK(contains(msg, "nested deeper than 64 levels"));
  CHECK(contains(msg, "/0/0/0"));  // the pointer where it stopped
}

// Single-byte flips in a kernel .so gave 19 crashes and 3 silently wrong results in 58 trials:
// every installed library's SHA-256 is recorded and checked before dlopen.
TEST_CASE("corrupt registry: one flipped byte in a kernel or the runtime is refused unloaded") {
  const std::string variant = "apply_gradient_descent__f32__avx2";
  for (const double where : {0.1, 0.5, 0.9}) {
    CAPTURE(where);
    RegistryCopy copy;
    const fs::path so = copy.kernel_file(variant);
    std::string bytes = read_file(so);
    bytes[static_cast<size_t>(where * bytes.size())] ^= 0x01;
    fs::remove(so);  // a new inode: never the file the shared registry may have mapped
    write_file(so, bytes);
    auto reg = Registry::open(copy.dir().string());
    const std::string msg = error_of([&] { reg->load(variant); });
    CHECK(contains(msg, so.string()));
    CHECK(contains(msg, "damaged or replaced"));
  }
  RegistryCopy copy;
  const nlohmann::json index = nlohmann::json::parse(read_file(copy / "index.json"));
  CHECK(index["runtime_sha256"].get<std::string>().size() == 64);
  const nlohmann::json desc = nlohmann::json::parse(read_file(copy.descriptor_file(variant)));
  CHECK(desc["kernel"]["sha256"].get<std::string>().size() == 64);
}

// A flipped byte in a descriptor can leave valid JSON that says something else (a tolerance,
// a dim, a scalar's domain): the index records each descriptor's SHA-256.
TEST_CASE("corrupt registry: a descriptor edited into other valid JSON is refused by digest") {
  RegistryCopy copy;
  const fs::path desc = copy.descriptor_file(kAdamAvx2);
  std::string text = read_file(desc);
  const size_t at = text.find("\"rtol\": ");
  REQUIRE(at != std::string::npos);
  const size_t digit = text.find_first_of("123456789", at + 8);
  text[digit] = text[digit] == '9' ? '8' : static_cast<char>(text[digit] + 1);
  write_file(desc, text);
  REQUIRE_NOTHROW(registry::descriptor_from_json(text, desc.string()));  // still valid
  auto reg = Registry::open(copy.dir().string());
  const std::string msg = error_of([&] { reg->select("apply_adam", {}, "avx2"); });
  CHECK(contains(msg, desc.string()));
  CHECK(contains(msg, "SHA-256 is not the one the index recorded"));
}

TEST_CASE("corrupt registry: a missing Halide runtime library is named") {
  RegistryCopy copy;
  const fs::path rt = copy / "lib/libopforge_halide_runtime.so";
  fs::remove(rt);
  auto reg = Registry::open(copy.dir().string());
  const std::string msg = error_of([&] { reg->select("apply_gradient_descent", {}, "avx2"); });
  CHECK(contains(msg, rt.string()));
}

}  // namespace
}  // namespace opforge::testing
