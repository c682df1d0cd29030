// Tests for npy::read / npy::write_atomic on real files, and a cross-check against NumPy.
#include <dirent.h>
#include <doctest/doctest.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "opforge/npy.hpp"

using namespace opforge::npy;

namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return ::remove(path);
}

// A fresh directory under /tmp, removed with everything in it on destruction.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/test_npy.XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    REQUIRE(p != nullptr);
    path = p;
  }
  ~TempDir() { ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

// Names in `dir`, sorted, without "." and "..".
std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  REQUIRE(out.good());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}
bool contains(const std::string& s, const std::string& p) {
  return s.find(p) != std::string::npos;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const NpyError& e) {
    return e.what();
  }
  return "<no error>";
}

mode_t current_umask() {
  const mode_t m = ::umask(0);
  ::umask(m);
  return m;
}

// Restores the working directory on scope exit.
struct CwdGuard {
  std::string saved;
  CwdGuard() {
    char buf[PATH_MAX];
    REQUIRE(::getcwd(buf, sizeof buf) != nullptr);
    saved = buf;
  }
  ~CwdGuard() {
    if (::chdir(saved.c_str()) != 0) std::perror("chdir");
  }
};

Array raw(const std::string& descr, std::vector<int64_t> shape, const std::string& bytes) {
  Array a;
  a.descr = descr;
  a.shape = std::move(shape);
  a.data.assign(bytes.begin(), bytes.end());
  return a;
}

std::string le(uint64_t v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

const char* const kPython = "/usr/bin/python3";

bool numpy_available() {
  const std::string cmd = std::string(kPython) + " -c 'import numpy' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// Runs a Python script in `dir`; returns its exit status and puts its output in *log.
int run_python(const TempDir& dir, const std::string& script, std::string* log) {
  const std::string py = dir / "script.py";
  const std::string out = dir / "script.log";
  write_file(py, script);
  const std::string cmd =
      "cd '" + dir.path + "' && " + kPython + " '" + py + "' > '" + out + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  *log = read_file(out);
  ::unlink(py.c_str());
  ::unlink(out.c_str());
  return rc;
}

}  // namespace

TEST_SUITE("npy.io") {
  TEST_CASE("write_atomic then read round trips") {
    TempDir dir;
    const std::string path = dir / "a.npy";
    const Array a = from_f32({1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 100.0f}, {3, 2});
    write_atomic(path, a);
    const Array b = read(path);
    CHECK(b.descr == "<f4");
    CHECK(b.shape == std::vector<int64_t>{3, 2});
    CHECK(to_f32(b, path) == std::vector<float>{1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 100.0f});
    CHECK(read_file(path) == serialize(a));
  }

  TEST_CASE("write_atomic leaves no temp file and replaces an existing file") {
    TempDir dir;
    const std::string path = dir / "out.npy";
    write_file(path, "old contents that are not an npy file at all");
    write_atomic(path, from_f32({1, 2, 3}, {3}));
    CHECK(list_dir(dir.path) == std::vector<std::string>{"out.npy"});
    CHECK(to_f32(read(path), path) == std::vector<float>{1, 2, 3});

    write_atomic(path, from_f32({4}, {}));
    CHECK(list_dir(dir.path) == std::vector<std::string>{"out.npy"});
    const Array b = read(path);
    CHECK(b.shape.empty());
    CHECK(to_f32(b, path) == std::vector<float>{4});
  }

  TEST_CASE("write_atomic file permissions") {
    TempDir dir;
    const std::string fresh = dir / "fresh.npy";
    write_atomic(fresh, from_f32({1}, {1}));
    struct stat st {};
    REQUIRE(::stat(fresh.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == (0666 & ~current_umask()));

    const std::string existing = dir / "existing.npy";
    write_file(existing, "x");
    REQUIRE(::chmod(existing.c_str(), 0640) == 0);
    write_atomic(existing, from_f32({1}, {1}));
    REQUIRE(::stat(existing.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0640);
  }

  TEST_CASE("write_atomic with a relative path in the current directory") {
    TempDir dir;
    CwdGuard guard;
    REQUIRE(::chdir(dir.path.c_str()) == 0);
    write_atomic("rel.npy", from_f32({7}, {1}));
    CHECK(list_dir(".") == std::vector<std::string>{"rel.npy"});
    CHECK(to_f32(read("rel.npy"), "rel.npy") == std::vector<float>{7});
  }

  TEST_CASE("write_atomic failures name the path and clean up") {
    TempDir dir;
    SUBCASE("directory does not exist") {
      const std::string path = dir / "missing/sub/a.npy";
      const std::string msg = error_of([&] { write_atomic(path, from_f32({1}, {1})); });
      INFO(msg);
      CHECK(starts_with(msg, path + ": "));
      CHECK(contains(msg, "cannot create temporary file"));
      CHECK(list_dir(dir.path).empty());
    }
    SUBCASE("rename fails: the target is a non-empty directory") {
      const std::string path = dir / "target.npy";
      REQUIRE(::mkdir(path.c_str(), 0755) == 0);
      write_file(path + "/keep", "x");
      const std::string msg = error_of([&] { write_atomic(path, from_f32({1}, {1})); });
      INFO(msg);
      CHECK(starts_with(msg, path + ": "));
      CHECK(contains(msg, "cannot rename"));
      CHECK(list_dir(dir.path) == std::vector<std::string>{"target.npy"});  // temp removed
    }
    SUBCASE("invalid array: nothing is written") {
      const std::string path = dir / "bad.npy";
      Array a = from_f32({1, 2}, {2});
      a.shape = {3};
      const std::string msg = error_of([&] { write_atomic(path, a); });
      INFO(msg);
      CHECK(starts_with(msg, path + ": "));
      CHECK(list_dir(dir.path).empty());
    }
  }

  TEST_CASE("read errors name the path") {
    TempDir dir;
    const std::string missing = dir / "nope.npy";
    CHECK(error_of([&] { read(missing); }) ==
          missing + ": cannot open: " + std::string(std::strerror(ENOENT)));

    const std::string garbage = dir / "garbage.npy";
    write_file(garbage, "hello");
    const std::string msg = error_of([&] { read(garbage); });
    CHECK(starts_with(msg, garbage + ": "));
    CHECK(contains(msg, "bad magic"));

    const std::string msg2 = error_of([&] { read(dir.path); });  // a directory
    CHECK(starts_with(msg2, dir.path + ": "));
  }
}

TEST_SUITE("npy.numpy") {
  TEST_CASE("NumPy writes, we read") {
    if (!numpy_available()) {
      MESSAGE("skipping: /usr/bin/python3 with numpy is not available");
      return;
    }
    TempDir dir;
    std::string log;
    const int rc = run_python(dir, R"PY(
import numpy as np
from numpy.lib import format as fmt
m = np.array([[1.5, -2.0, 0.25], [3.0, -0.5, 100.0]], dtype='<f4')
np.save('f4_2d.npy', m)
np.save('f4_0d.npy', np.array(3.0, dtype='<f4'))
np.save('f4_empty.npy', np.zeros((0, 3), dtype='<f4'))
np.save('f4_3d.npy', np.arange(24, dtype='<f4').reshape(2, 3, 4))
np.save('f8.npy', np.array([1.5, -0.1], dtype='<f8'))
np.save('f2.npy', np.array([1.5, -2.0], dtype='<f2'))
np.save('i4.npy', np.array([1, -2, 2147483647], dtype='<i4'))
np.save('i8.npy', np.array([1, -1, 2**40], dtype='<i8'))
np.save('u1.npy', np.array([0, 1, 255], dtype='u1'))
np.save('b1.npy', np.array([True, False, True]))
np.save('fortran.npy', np.asfortranarray(m))
np.save('big.npy', m.astype('>f4'))
np.save('c8.npy', np.array([1 + 2j], dtype='<c8'))
np.save('u2.npy', np.array([0x3FC0, 0xBF80], dtype='<u2'))
np.save('v2.npy', np.array([0x3FC0, 0xBF80], dtype='<u2').view('V2'))
for v in [(2, 0), (3, 0)]:
    with open('f4_v%d.npy' % v[0], 'wb') as f:
        fmt.write_array(f, m, version=v)
)PY",
                              &log);
    if (rc != 0) {
      MESSAGE("skipping: numpy script failed: " << log);
      return;
    }
    const std::vector<float> m = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 100.0f};
    for (const char* name : {"f4_2d.npy", "f4_v2.npy", "f4_v3.npy"}) {
      CAPTURE(name);
      const Array a = read(dir / name);
      CHECK(a.descr == "<f4");
      CHECK(a.shape == std::vector<int64_t>{2, 3});
      CHECK(to_f32(a, name) == m);
    }
    {
      const Array a = read(dir / "f4_0d.npy");
      CHECK(a.shape.empty());
      CHECK(to_f32(a, "0d") == std::vector<float>{3.0f});
    }
    {
      const Array a = read(dir / "f4_empty.npy");
      CHECK(a.shape == std::vector<int64_t>{0, 3});
      CHECK(a.data.empty());
    }
    {
      const Array a = read(dir / "f4_3d.npy");
      CHECK(a.shape == std::vector<int64_t>{2, 3, 4});
      const std::vector<float> v = to_f32(a, "3d");
      REQUIRE(v.size() == 24);
      for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == static_cast<float>(i));
    }
    auto bytes_of = [](const Array& a) { return std::string(a.data.begin(), a.data.end()); };
    {
      const Array a = read(dir / "f8.npy");
      CHECK(a.descr == "<f8");
      double d[2];
      REQUIRE(a.data.size() == sizeof d);
      std::memcpy(d, a.data.data(), sizeof d);  // the test host is little-endian
      CHECK(d[0] == 1.5);
      CHECK(d[1] == -0.1);
    }
    CHECK(bytes_of(read(dir / "f2.npy")) == le(0x3E00, 2) + le(0xC000, 2));
    CHECK(bytes_of(read(dir / "i4.npy")) == le(1, 4) + le(0xFFFFFFFEu, 4) + le(0x7FFFFFFF, 4));
    CHECK(bytes_of(read(dir / "i8.npy")) ==
          le(1, 8) + le(0xFFFFFFFFFFFFFFFFull, 8) + le(uint64_t{1} << 40, 8));
    {
      const Array a = read(dir / "u1.npy");
      CHECK(a.descr == "|u1");
      CHECK(a.data == std::vector<uint8_t>{0, 1, 255});
    }
    {
      const Array a = read(dir / "b1.npy");
      CHECK(a.descr == "|b1");
      CHECK(a.data == std::vector<uint8_t>{1, 0, 1});
    }
    const std::string fortran = dir / "fortran.npy";
    CHECK(error_of([&] { read(fortran); }) ==
          fortran + ": Fortran-order arrays are not supported; save with np.ascontiguousarray");
    const std::string big = dir / "big.npy";
    CHECK(starts_with(error_of([&] { read(big); }), big + ": big-endian dtype '>f4'"));
    const std::string c8 = dir / "c8.npy";
    CHECK(starts_with(error_of([&] { read(c8); }), c8 + ": unsupported dtype descr '<c8'"));
    // Raw bf16 bits as uint16, and numpy's 2-byte void (what an ml_dtypes array becomes).
    CHECK(read(dir / "u2.npy").descr == "<u2");
    CHECK(bytes_of(read(dir / "u2.npy")) == le(0x3FC0, 2) + le(0xBF80, 2));
    CHECK(read(dir / "v2.npy").descr == "|V2");
    CHECK(bytes_of(read(dir / "v2.npy")) == le(0x3FC0, 2) + le(0xBF80, 2));
  }

  TEST_CASE("we write, NumPy reads") {
    if (!numpy_available()) {
      MESSAGE("skipping: /usr/bin/python3 with numpy is not available");
      return;
    }
    TempDir dir;
    write_atomic(dir / "f4_2d.npy", from_f32({1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 100.0f}, {2, 3}));
    write_atomic(dir / "f4_0d.npy", from_f32({3.0f}, {}));
    write_atomic(dir / "f4_empty.npy", from_f32({}, {0, 3}));
    write_atomic(
        dir / "i8.npy",
        raw("<i8", {3}, le(1, 8) + le(0xFFFFFFFFFFFFFFFFull, 8) + le(uint64_t{1} << 40, 8)));
    write_atomic(dir / "f2.npy", raw("<f2", {2}, le(0x3E00, 2) + le(0xC000, 2)));
    write_atomic(dir / "b1.npy", raw("|b1", {3}, std::string("\x01\x00\x01", 3)));
    write_atomic(dir / "u1.npy", raw("=u1", {1, 3}, std::string("\x00\x01\xff", 3)));
    std::string log;
    const int rc = run_python(dir, R"PY(
import sys
import numpy as np
from numpy.lib import format as fmt

def check(name, expected):
    with open(name, 'rb') as f:
        assert fmt.read_magic(f) == (1, 0), name
        fmt.read_array_header_1_0(f)
        assert f.tell() % 64 == 0, (name, f.tell())
    a = np.load(name, allow_pickle=False)
    assert a.dtype == expected.dtype, (name, a.dtype, expected.dtype)
    assert a.shape == expected.shape, (name, a.shape, expected.shape)
    assert a.flags.c_contiguous, name
    assert np.array_equal(a, expected), (name, a, expected)

check('f4_2d.npy', np.array([[1.5, -2.0, 0.25], [3.0, -0.5, 100.0]], dtype='<f4'))
check('f4_0d.npy', np.array(3.0, dtype='<f4'))
check('f4_empty.npy', np.zeros((0, 3), dtype='<f4'))
check('i8.npy', np.array([1, -1, 2**40], dtype='<i8'))
check('f2.npy', np.array([1.5, -2.0], dtype='<f2'))
check('b1.npy', np.array([True, False, True]))
check('u1.npy', np.array([[0, 1, 255]], dtype='u1'))
print('ok')
)PY",
                              &log);
    INFO("python output: " << log);
    CHECK(rc == 0);
    CHECK(contains(log, "ok"));
  }
}
