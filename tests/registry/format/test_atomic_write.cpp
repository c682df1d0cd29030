// registry::write_file_atomic, the one temp-then-rename write (the runtime's .npy writer and
// the cache's, builder's and CLI's writes go through it): permission bits, replacing, no temp
// file left on success or failure, errors naming the path.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "registry/format/atomic_write.h"

using opforge::registry::write_file_atomic;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/opforge-atomic-write-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    REQUIRE(p != nullptr);
    path = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

std::string read_all(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

unsigned mode_of(const std::string& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::string error_of(const std::string& path, const std::string& bytes) {
  try {
    write_file_atomic(path, bytes);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("atomic write: writes and replaces, leaving only the target") {
  TempDir d;
  const std::string p = d / "f.txt";
  write_file_atomic(p, "first");
  CHECK(read_all(p) == "first");
  write_file_atomic(p, std::string("sec\0ond", 7));
  CHECK(read_all(p) == std::string("sec\0ond", 7));
  write_file_atomic(p, "");
  CHECK(read_all(p).empty());
  CHECK(names_in(d.path) == std::vector<std::string>{"f.txt"});
}

TEST_CASE("atomic write: a given mode exactly, else the replaced file's, else 0666 & ~umask") {
  TempDir d;
  write_file_atomic(d / "x", "x", 0755u);
  CHECK(mode_of(d / "x") == 0755u);
  write_file_atomic(d / "x", "y", 0600u);
  CHECK(mode_of(d / "x") == 0600u);
  write_file_atomic(d / "x", "z");  // no mode: the replaced file's
  CHECK(mode_of(d / "x") == 0600u);

  const mode_t mask = ::umask(022);
  write_file_atomic(d / "fresh", "f");
  ::umask(mask);
  CHECK(mode_of(d / "fresh") == 0644u);
}

TEST_CASE("atomic write: failures name the path and leave no temp file") {
  TempDir d;
  SUBCASE("the directory does not exist (it is not created)") {
    const std::string p = d / "missing/f";
    const std::string msg = error_of(p, "x");
    CHECK(msg.rfind(p + ": cannot create temporary file in '" + d.path + "/missing': ", 0) == 0);
    CHECK(names_in(d.path).empty());
  }
  SUBCASE("the target is a non-empty directory") {
    fs::create_directories(d / "busy/inner");
    const std::string msg = error_of(d / "busy", "x");
    CHECK(msg.rfind(d / "busy" + ": cannot rename temporary file into place: ", 0) == 0);
    CHECK(names_in(d.path) == std::vector<std::string>{"busy"});
  }
  SUBCASE("the path names a directory") {
    const std::string msg = error_of(d.path + "/", "x");
    CHECK(msg == d.path + "/: cannot write: path names a directory");
    CHECK(names_in(d.path).empty());
  }
}
