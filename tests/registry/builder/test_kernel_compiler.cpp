// kernel_compiler: the artifact list keys depend on, and the sweep of scratch directories
// that killed builds leave in the temp directory (they used to stay forever).
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "builder_test_util.h"
#include "registry/builder/kernel_compiler.h"

namespace opforge::builder {
namespace {

namespace fs = std::filesystem;

TEST_CASE("sweep_scratch_dirs: scratch dirs older than the limit go, fresh ones and others stay") {
  testing::TempDir t;
  const char* had = std::getenv("TMPDIR");
  const std::string saved = had ? had : "";
  setenv("TMPDIR", t.path.c_str(), 1);
  const fs::path old_build = t.path / "opforge-build-a1b2c3", old_link = t.path / "opforge-link-d4";
  const fs::path fresh = t.path / "opforge-build-e5f6g7", other = t.path / "someone-elses-dir";
  for (const auto& d : {old_build, old_link, fresh, other}) {
    fs::create_directories(d);
    std::ofstream(d / "kernel.o") << "x";
  }
  const auto two_days_ago = fs::file_time_type::clock::now() - std::chrono::hours(48);
  for (const auto& d : {old_build, old_link, other}) fs::last_write_time(d, two_days_ago);
  const int removed = sweep_scratch_dirs(std::chrono::hours(24));
  if (had) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  CHECK(removed == 2);
  CHECK_FALSE(fs::exists(old_build));
  CHECK_FALSE(fs::exists(old_link));
  CHECK(fs::exists(fresh));  // a build running now
  CHECK(fs::exists(other));  // not ours
}

TEST_CASE("kernel_artifact_list names every artifact an entry holds") {
  const std::string list = kernel_artifact_list();
  for (const char* a : {"kernel.so", "kernel.o", "kernel.h", "kernel.stmt", "kernel.s", "kernel.ll",
                        "loop_nest.txt", "schedule.json@"}) {
    CHECK_MESSAGE(list.find(a) != std::string::npos, a);
  }
}

}  // namespace
}  // namespace opforge::builder
