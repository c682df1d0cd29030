#include <doctest/doctest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Process.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cache_test_util.h"
#include "processes.h"
#include "registry/cache/compile_cache.h"
#include "registry/format/file_lock.h"

using namespace opforge::cache;
using namespace opforge::cache::testing;
using opforge::registry::FileLock;
using opforge::testing::in_processes;
namespace fs = llvm::sys::fs;

namespace {

bool exists(const std::string& p) {
  return fs::exists(p);
}

// File names directly inside `dir`.
std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    names.push_back(llvm::sys::path::filename(it->path()).str());
  }
  return names;
}

size_t count_prefix(const std::string& dir, const std::string& prefix) {
  size_t n = 0;
  for (const auto& name : list_dir(dir)) n += name.rfind(prefix, 0) == 0;
  return n;
}

size_t count_containing(const std::string& dir, const std::string& needle) {
  size_t n = 0;
  for (const auto& name : list_dir(dir)) n += name.find(needle) != std::string::npos;
  return n;
}

Entry sample_entry(const std::string& tag, size_t payload = 100) {
  Entry e;
  e.artifacts["kernel.o"] = std::string(payload, 'o') + tag;
  e.artifacts["kernel.so"] = std::string("\0\x01\x02\xff", 4) + tag;
  e.artifacts["kernel.stmt"] = "stmt for " + tag;
  e.artifacts["manifest.json"] = "{\"tag\": \"" + tag + "\"}";
  return e;
}

std::string vdir(const CompileCache& c) {
  return c.root() + "/v" + std::to_string(kFormatVersion);
}

}  // namespace

TEST_CASE("sha256 test vectors") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("sha256_file_hex streams files, including ones larger than a chunk") {
  TempDir t;
  const std::string small = t.path + "/small";
  write_all(small, "abc");
  CHECK(sha256_file_hex(small) == sha256_hex("abc"));

  std::string big;
  big.reserve(2621441);
  for (size_t i = 0; i < 2621441; ++i) big.push_back(static_cast<char>((i * 131) ^ (i >> 9)));
  const std::string bigp = t.path + "/big";
  write_all(bigp, big);
  CHECK(sha256_file_hex(bigp) == sha256_hex(big));

  const std::string empty = t.path + "/empty";
  write_all(empty, "");
  CHECK(sha256_file_hex(empty) == sha256_hex(""));

  CHECK_FALSE(sha256_file_hex(t.path + "/missing").has_value());
}

TEST_CASE("KeyBuilder is stable and sensitive to every part") {
  auto base = [] {
    return KeyBuilder().add("op", "matmul").add("target", "x86-64-linux-avx2").add("ir", "...");
  };
  const std::string k = base().hex_digest();
  CHECK(k.size() == 64);
  CHECK(k.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(base().hex_digest() == k);
  CHECK(base().parts().size() == 3);
  CHECK(base().parts()[1].first == "target");

  SUBCASE("value change") {
    CHECK(KeyBuilder()
              .add("op", "matmul")
              .add("target", "x86-64-linux-avx512")
              .add("ir", "...")
              .hex_digest() != k);
  }
  SUBCASE("name change") {
    CHECK(KeyBuilder()
              .add("op", "matmul")
              .add("triple", "x86-64-linux-avx2")
              .add("ir", "...")
              .hex_digest() != k);
  }
  SUBCASE("order change") {
    CHECK(KeyBuilder()
              .add("target", "x86-64-linux-avx2")
              .add("op", "matmul")
              .add("ir", "...")
              .hex_digest() != k);
  }
  SUBCASE("extra or missing part") {
    CHECK(base().add("x", "").hex_digest() != k);
    CHECK(KeyBuilder().add("op", "matmul").add("target", "x86-64-linux-avx2").hex_digest() != k);
  }
  SUBCASE("boundaries are length-prefixed") {
    CHECK(KeyBuilder().add("ab", "c").hex_digest() != KeyBuilder().add("a", "bc").hex_digest());
    CHECK(KeyBuilder().add("n", "ab").add("n", "c").hex_digest() !=
          KeyBuilder().add("n", "a").add("n", "bc").hex_digest());
    CHECK(KeyBuilder().add("", "").hex_digest() != KeyBuilder().hex_digest());
  }
  SUBCASE("canonical serialization") {
    // u64 LE len("a") "a" u64 LE len("bc") "bc"
    std::string ser =
        std::string("\x01\0\0\0\0\0\0\0", 8) + "a" + std::string("\x02\0\0\0\0\0\0\0", 8) + "bc";
    CHECK(KeyBuilder().add("a", "bc").hex_digest() == sha256_hex(ser));
    CHECK(KeyBuilder().hex_digest() == sha256_hex(""));
  }
}

TEST_CASE("entry encoding round trip and rejection") {
  Entry e = sample_entry("x");
  e.artifacts["empty.bin"] = "";
  const std::string k = key_of("x");
  const std::string bytes = encode_entry(e, k);
  CHECK(bytes.compare(0, 8, "OPFCACHE") == 0);
  std::string why, recorded;
  auto d = decode_entry(bytes, &why, &recorded);
  REQUIRE(d.has_value());
  CHECK(d->artifacts == e.artifacts);
  CHECK(recorded == k);  // the key, just before the checksum
  CHECK(bytes.compare(bytes.size() - 32 - 64, 64, k) == 0);

  // Re-seals a modified body with a fresh checksum.
  auto reseal = [](const std::string& body) {
    const std::string hex = sha256_hex(body);
    std::string raw;
    for (size_t i = 0; i < hex.size(); i += 2) {
      raw.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return body + raw;
  };
  const std::string body = bytes.substr(0, bytes.size() - 32);
  CHECK(reseal(body) == bytes);

  SUBCASE("empty entry") {
    auto de = decode_entry(encode_entry(Entry{}, k), &why);
    REQUIRE(de.has_value());
    CHECK(de->artifacts.empty());
  }
  SUBCASE("bad magic") {
    std::string b = bytes;
    b[0] = 'X';
    CHECK_FALSE(decode_entry(b, &why));
    CHECK(why == "bad magic");
    CHECK_FALSE(decode_entry("ELF", &why));
    CHECK(why == "bad magic");
    CHECK_FALSE(decode_entry("OPFC", &why));
    CHECK(why == "truncated");
    CHECK_FALSE(decode_entry("", &why));
    CHECK(why == "truncated");
  }
  SUBCASE("wrong version") {
    std::string b = body;
    b[8] = 1;
    CHECK_FALSE(decode_entry(reseal(b), &why));
    CHECK(why == "version 1 != 2");
  }
  SUBCASE("truncated anywhere") {
    for (size_t n = 0; n < bytes.size(); ++n) {
      why.clear();
      CHECK_FALSE(decode_entry(bytes.substr(0, n), &why));
      CHECK_FALSE(why.empty());
    }
  }
  SUBCASE("trailing bytes") {
    CHECK_FALSE(decode_entry(bytes + "garbage", &why));
    CHECK(why == "trailing bytes");
  }
  SUBCASE("any flipped byte is detected") {
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::string b = bytes;
      b[i] = static_cast<char>(b[i] ^ 0x20);
      why.clear();
      CHECK_FALSE(decode_entry(b, &why));
      CHECK_FALSE(why.empty());
    }
    std::string b = bytes;
    b[bytes.size() - 32 - 64 - 3] ^= 1;  // inside the last artifact's data
    CHECK_FALSE(decode_entry(b, &why));
    CHECK(why == "checksum mismatch");
    b = bytes;
    b[bytes.size() - 40] ^= 1;  // inside the recorded key
    CHECK_FALSE(decode_entry(b, &why));
    CHECK(why == "checksum mismatch");
  }
  SUBCASE("huge lengths and counts are bounds-checked") {
    std::string b = body;
    for (int i = 16; i < 24; ++i) b[i] = '\xff';  // first name length = 2^64-1
    CHECK_FALSE(decode_entry(reseal(b), &why));
    CHECK(why == "truncated");
    b = body;
    for (int i = 12; i < 16; ++i) b[i] = '\xff';  // artifact count = 2^32-1
    CHECK_FALSE(decode_entry(reseal(b), &why));
    CHECK(why == "truncated");
  }
  SUBCASE("invalid artifact name") {
    Entry one;
    one.artifacts["a.o"] = "data";
    std::string b = encode_entry(one, k);
    b = b.substr(0, b.size() - 32);
    b[24] = '/';  // "a.o" -> "/.o"
    CHECK_FALSE(decode_entry(reseal(b), &why));
    CHECK(why == "artifact name invalid");
  }
  SUBCASE("duplicate artifact name") {
    Entry one;
    one.artifacts["a.o"] = "data";
    std::string b = encode_entry(one, k);
    b = b.substr(0, b.size() - 32 - 64);  // header and the one artifact
    std::string artifact = b.substr(16);
    b[12] = 2;
    CHECK_FALSE(decode_entry(reseal(b + artifact + k), &why));
    CHECK(why == "duplicate artifact name");
  }
  SUBCASE("encode rejects invalid artifact names") {
    for (std::string bad : {std::string(""), std::string("a/b"), std::string("../x"),
                            std::string("sp ace"), std::string(129, 'a')}) {
      Entry x;
      x.artifacts[bad] = "d";
      CHECK_THROWS_AS(encode_entry(x, k), std::invalid_argument);
    }
    Entry ok;
    ok.artifacts[std::string(128, 'a')] = "d";
    ok.artifacts["Az09_.-"] = "d";
    CHECK(decode_entry(encode_entry(ok, k), &why).has_value());
    CHECK_THROWS_AS(encode_entry(ok, "not a key"), std::invalid_argument);
  }
}

// An intact entry copied over another key's file was a hit for that key; entries now record
// their key, and a mismatch is a corrupt entry: dropped, counted, rebuilt.
TEST_CASE("an entry copied over another key's file is a miss, counted corrupt") {
  TempDir t;
  CompileCache c(t.path + "/cache");
  const std::string a = key_of("a"), b = key_of("b");
  c.store(a, sample_entry("a"));
  c.store(b, sample_entry("b"));
  write_all(c.entry_path(b), read_all(c.entry_path(a)));
  std::string why;
  CHECK_FALSE(c.lookup(b, &why).has_value());
  CHECK(why == "corrupt: holds the entry of key " + a.substr(0, 12) + "...");
  CHECK_FALSE(exists(c.entry_path(b)));  // dropped
  CHECK(c.stats().corrupt == 1);
  CHECK(c.lookup(a).has_value());  // the original is untouched
  // verify finds the same.
  c.store(b, sample_entry("b"));
  write_all(c.entry_path(b), read_all(c.entry_path(a)));
  const VerifyResult v = c.verify();
  CHECK(v.ok == 1);
  REQUIRE(v.bad.size() == 1);
  CHECK(v.bad[0] == "llvmcache-" + b + ".opfc");
}

TEST_CASE("store and lookup") {
  TempDir t;
  CompileCache c(t.path + "/cache");
  const std::string k = key_of("a");
  CHECK(c.root() == t.path + "/cache");
  CHECK(c.entry_path(k) == vdir(c) + "/llvmcache-" + k + ".opfc");

  std::string why;
  CHECK_FALSE(c.lookup(k, &why).has_value());
  CHECK(why == "absent");
  CHECK_FALSE(exists(c.root()));  // nothing created by a lookup

  const Entry e = sample_entry("a", 5000);
  c.store(k, e);
  CHECK(exists(c.entry_path(k)));
  CHECK(count_prefix(vdir(c), "tmp-") == 0);
  auto got = c.lookup(k, &why);
  REQUIRE(got.has_value());
  CHECK(got->artifacts == e.artifacts);
  CHECK(read_all(c.entry_path(k)) == encode_entry(e, k));

  // Overwrite with new content.
  const Entry e2 = sample_entry("b");
  c.store(k, e2);
  got = c.lookup(k);
  REQUIRE(got.has_value());
  CHECK(got->artifacts == e2.artifacts);
  CHECK(count_prefix(vdir(c), "tmp-") == 0);

  // Other keys stay absent.
  CHECK_FALSE(c.lookup(key_of("other")).has_value());
}

TEST_CASE("lookup refreshes the entry's access time") {
  TempDir t;
  CompileCache c(t.path);
  const std::string k = key_of("a");
  c.store(k, sample_entry("a"));
  const auto old = std::chrono::system_clock::now() - std::chrono::hours(48);
  set_times(c.entry_path(k), old);
  REQUIRE(c.lookup(k).has_value());
  fs::file_status st;
  REQUIRE(!fs::status(c.entry_path(k), st));
  CHECK(st.getLastAccessedTime() > old + std::chrono::hours(24));
  CHECK(st.getLastModificationTime() > old + std::chrono::hours(24));
}

TEST_CASE("corrupt entries are a miss, removed, counted, and can be stored again") {
  TempDir t;
  CompileCache c(t.path);
  const std::string k = key_of("corrupt");
  const Entry e = sample_entry("c");

  struct Case {
    const char* name;
    std::string (*mutate)(std::string);
    const char* reason;
  };
  const Case cases[] = {
      {"flip", [](std::string b) { return b[b.size() / 2] ^= 0x55, b; }, nullptr},
      {"flip data", [](std::string b) { return b[b.size() - 33] ^= 0x01, b; },
       "corrupt: checksum mismatch"},
      {"truncate", [](std::string b) { return b.substr(0, b.size() - 10); }, nullptr},
      {"truncate to nothing", [](std::string) { return std::string(); }, "corrupt: truncated"},
      {"append garbage", [](std::string b) { return b + "garbage!"; }, "corrupt: trailing bytes"},
      {"wrong magic", [](std::string b) { return b.replace(0, 8, "NOTCACHE"), b; },
       "corrupt: bad magic"},
  };
  uint64_t expected_corrupt = 0;
  for (const Case& cs : cases) {
    CAPTURE(cs.name);
    c.store(k, e);
    const std::string p = c.entry_path(k);
    write_all(p, cs.mutate(read_all(p)));
    std::string why;
    CHECK_FALSE(c.lookup(k, &why).has_value());
    CHECK(why.rfind("corrupt: ", 0) == 0);
    CHECK(why.size() > 9);
    if (cs.reason) CHECK(why == cs.reason);
    CHECK_FALSE(exists(p));
    CHECK(c.stats().corrupt == ++expected_corrupt);
    // Now it is just absent; storing again works.
    CHECK_FALSE(c.lookup(k, &why).has_value());
    CHECK(why == "absent");
    c.store(k, e);
    auto got = c.lookup(k);
    REQUIRE(got.has_value());
    CHECK(got->artifacts == e.artifacts);
  }
}

TEST_CASE("a failed install leaves nothing behind") {
  TempDir t;
  CompileCache c(t.path);
  const std::string k = key_of("blocked");
  // A non-empty directory where the entry should go makes the rename fail.
  REQUIRE(!fs::create_directories(c.entry_path(k) + "/x"));
  CHECK_THROWS_AS(c.store(k, sample_entry("a")), std::runtime_error);
  CHECK(count_prefix(vdir(c), "tmp-") == 0);

  // A root that is a regular file cannot hold a cache.
  write_all(t.path + "/file", "x");
  CompileCache bad(t.path + "/file");
  CHECK_THROWS_AS(bad.store(k, sample_entry("a")), std::runtime_error);
}

// As ccache: a cache that cannot be written (a full disk) must not fail the compile.
TEST_CASE("get_or_build returns what it built when the store fails, saying why when asked") {
  TempDir t;
  CompileCache c(t.path);
  const std::string k = key_of("unstorable");
  REQUIRE(!fs::create_directories(c.entry_path(k) + "/x"));  // the rename cannot replace it
  int builds = 0;
  auto build = [&] {
    ++builds;
    return sample_entry("built");
  };
  std::string not_stored;
  auto [e, hit] = c.get_or_build(k, build, nullptr, &not_stored);
  CHECK_FALSE(hit);
  CHECK(e.artifacts == sample_entry("built").artifacts);
  CHECK(contains(not_stored, c.entry_path(k)));
  CHECK(count_prefix(vdir(c), "tmp-") == 0);
  std::string again;
  c.rebuild(k, build, &again);
  CHECK(contains(again, c.entry_path(k)));
  CHECK_THROWS_AS(c.get_or_build(k, build), std::runtime_error);  // not asked: thrown
  CHECK(builds == 3);
}

TEST_CASE("entry_path validates keys") {
  CompileCache c("/nonexistent/opforge-cache");
  const std::string good = key_of("x");
  CHECK_NOTHROW(c.entry_path(good));
  std::string upper = good;
  for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  REQUIRE(upper != good);
  for (const std::string& bad :
       {std::string("../../etc"), upper, good.substr(0, 63), good + "0", std::string(),
        std::string(64, 'g'), std::string("../") + good.substr(3), good.substr(0, 63) + "/",
        std::string(64, '\0')}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(c.entry_path(bad), std::invalid_argument);
    CHECK_THROWS_AS(c.lookup(bad), std::invalid_argument);
    CHECK_THROWS_AS(c.store(bad, Entry{}), std::invalid_argument);
  }
}

TEST_CASE("get_or_build builds once, then hits") {
  TempDir t;
  CompileCache c(t.path);
  const std::string k = key_of("gob");
  int builds = 0;
  auto build = [&] {
    ++builds;
    return sample_entry("built");
  };

  std::string why;
  auto [e1, hit1] = c.get_or_build(k, build, &why);
  CHECK_FALSE(hit1);
  CHECK(why == "absent");
  CHECK(builds == 1);
  CHECK(e1.artifacts == sample_entry("built").artifacts);

  auto [e2, hit2] = c.get_or_build(k, build);
  CHECK(hit2);
  CHECK(builds == 1);
  CHECK(e2.artifacts == e1.artifacts);
  CHECK(count_containing(vdir(c), ".lock") == 0);
  CHECK(count_prefix(vdir(c), "tmp-") == 0);

  SUBCASE("a corrupt entry is rebuilt") {
    write_all(c.entry_path(k), "junk");
    auto [e3, hit3] = c.get_or_build(k, build, &why);
    CHECK_FALSE(hit3);
    CHECK(why == "corrupt: bad magic");
    CHECK(builds == 2);
    CHECK(c.lookup(k).has_value());
  }
  SUBCASE("a failing build releases the lock and stores nothing") {
    const std::string k2 = key_of("fails");
    CHECK_THROWS_AS(c.get_or_build(k2, []() -> Entry { throw std::runtime_error("boom"); }),
                    std::runtime_error);
    CHECK(count_containing(vdir(c), ".lock") == 0);
    CHECK_FALSE(exists(c.entry_path(k2)));
    auto [e4, hit4] = c.get_or_build(k2, build);
    CHECK_FALSE(hit4);
    CHECK(builds == 2);
  }
}

TEST_CASE("get_or_build waits for a builder that holds the lock") {
  TempDir t;
  CompileCache c(t.path);
  const std::string k = key_of("locked");
  REQUIRE(!fs::create_directories(vdir(c)));
  std::atomic<int> builds{0};
  std::atomic<bool> done{false};
  auto build = [&] {
    ++builds;
    return sample_entry("waiter");
  };

  SUBCASE("the owner stores the entry: the waiter hits") {
    auto other = std::make_unique<FileLock>(c.entry_path(k), std::chrono::seconds(1));
    REQUIRE(other->owned());
    std::pair<Entry, bool> result;
    std::thread waiter([&] {
      CompileCache mine(t.path);
      result = mine.get_or_build(k, build);
      done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK_FALSE(done.load());
    c.store(k, sample_entry("owner"));
    other.reset();  // releases the lock
    waiter.join();
    CHECK(builds.load() == 0);
    CHECK(result.second);
    CHECK(result.first.artifacts == sample_entry("owner").artifacts);
  }
  SUBCASE("the owner gives up: the waiter builds") {
    auto other = std::make_unique<FileLock>(c.entry_path(k), std::chrono::seconds(1));
    REQUIRE(other->owned());
    std::pair<Entry, bool> result;
    std::thread waiter([&] {
      CompileCache mine(t.path);
      result = mine.get_or_build(k, build);
      done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK_FALSE(done.load());
    other.reset();
    waiter.join();
    CHECK(builds.load() == 1);
    CHECK_FALSE(result.second);
    CHECK(c.lookup(k).has_value());
  }
  SUBCASE("a lock file left by a dead process (an older opforge's) is taken over") {
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) _exit(0);
    REQUIRE(waitpid(child, nullptr, 0) == child);
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    write_all(c.entry_path(k) + ".lock", std::string(host) + " " + std::to_string(child));
    auto [e, hit] = c.get_or_build(k, build);
    CHECK_FALSE(hit);
    CHECK(builds.load() == 1);
    CHECK(count_containing(vdir(c), ".lock") == 0);
  }
}

TEST_CASE("concurrent get_or_build of one key builds it once") {
  TempDir t;
  const std::string k = key_of("concurrent");
  std::atomic<int> builds{0};
  std::atomic<int> hits{0};
  std::vector<std::thread> threads;
  std::vector<Entry> results(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      CompileCache c(t.path);
      auto [e, hit] = c.get_or_build(k, [&] {
        ++builds;
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        return sample_entry("concurrent");
      });
      results[i] = e;
      hits += hit;
    });
  }
  for (auto& th : threads) th.join();
  CHECK(builds.load() == 1);
  CHECK(hits.load() == 7);
  for (const auto& e : results) CHECK(e.artifacts == sample_entry("concurrent").artifacts);
  CompileCache c(t.path);
  CHECK(c.lookup(k).has_value());
  CHECK(count_containing(vdir(c), ".lock") == 0);
}

// Defect: concurrent builds lost hit/miss updates (the counters were written without the
// lock after a wait).
TEST_CASE("cache statistics lose no update under contention") {
  TempDir t;
  constexpr int kProcs = 4, kRounds = 40;
  const bool ok = in_processes(kProcs, [&] {
    CompileCache c(t.path);
    for (int r = 0; r < kRounds; ++r) c.count(r % 4 != 0);
  });
  CHECK(ok);
  const Stats s = CompileCache(t.path).stats();
  CHECK(s.hits == kProcs * kRounds * 3 / 4);
  CHECK(s.misses == kProcs * kRounds / 4);
}

TEST_CASE("record_variant and last_variant") {
  TempDir t;
  CompileCache c(t.path);
  const std::string k = key_of("v");
  CHECK_FALSE(c.last_variant("matmul_f32").has_value());

  std::string long_ir;
  for (int i = 0; i < 5000; ++i) {
    long_ir += "for (x, 0, 128) { f[x] = g[x] * \"q\" \\ " + std::to_string(i) + " }\n\t";
  }
  long_ir += "\xce\xbb ok";  // valid UTF-8 is kept byte for byte
  std::vector<std::pair<std::string, std::string>> parts = {
      {"op", "matmul"}, {"ir", long_ir}, {"empty", ""}, {"op", "dup name kept"}};
  c.record_variant("matmul_f32", k, parts);
  const std::string file = vdir(c) + "/variants/matmul_f32.last";
  CHECK(exists(file));
  CHECK(count_prefix(vdir(c) + "/variants", "tmp-") == 0);

  auto got = c.last_variant("matmul_f32");
  REQUIRE(got.has_value());
  CHECK(got->first == k);
  CHECK(got->second == parts);

  // Overwrite.
  const std::string k2 = key_of("v2");
  c.record_variant("matmul_f32", k2, {{"op", "matmul2"}});
  got = c.last_variant("matmul_f32");
  REQUIRE(got.has_value());
  CHECK(got->first == k2);
  REQUIRE(got->second.size() == 1);
  CHECK(got->second[0].second == "matmul2");

  const std::string longest(128, 'v');
  CHECK_NOTHROW(c.record_variant(longest, k, {}));
  CHECK(c.last_variant(longest).has_value());
  CHECK_NOTHROW(c.record_variant("_x9", k, {}));

  for (const std::string& bad :
       {std::string(), std::string("9abc"), std::string("a-b"), std::string("../evil"),
        std::string("a b"), std::string("a.last"), std::string(129, 'v'), std::string("a/b")}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(c.record_variant(bad, k, {}), std::invalid_argument);
    CHECK_THROWS_AS(c.last_variant(bad), std::invalid_argument);
  }
  CHECK_THROWS_AS(c.record_variant("ok", "../../etc", {}), std::invalid_argument);

  // A damaged record reads as absent.
  write_all(file, "{not json");
  CHECK_FALSE(c.last_variant("matmul_f32").has_value());
}

TEST_CASE("stats counts entries, bytes and counters") {
  TempDir t;
  CompileCache c(t.path + "/c");
  Stats s = c.stats();
  CHECK(s.entries == 0);
  CHECK(s.bytes == 0);
  CHECK(s.hits == 0);
  CHECK(s.misses == 0);
  CHECK(s.corrupt == 0);

  uint64_t bytes = 0;
  for (const char* tag : {"a", "b", "c"}) {
    c.store(key_of(tag), sample_entry(tag, 1000));
    bytes += encode_entry(sample_entry(tag, 1000), key_of(tag)).size();
  }
  for (int i = 0; i < 3; ++i) c.count(true);
  for (int i = 0; i < 2; ++i) c.count(false);
  // Non-entry files are not counted.
  c.record_variant("v", key_of("a"), {{"x", "y"}});
  write_all(vdir(c) + "/unrelated.txt", "zzz");

  s = c.stats();
  CHECK(s.entries == 3);
  CHECK(s.bytes == bytes);
  CHECK(s.hits == 3);
  CHECK(s.misses == 2);
  CHECK(s.corrupt == 0);
  CHECK(count_containing(vdir(c), ".lock") == 0);
  CHECK(count_prefix(vdir(c), "tmp-") == 0);

  // A damaged stats file resets the counters instead of failing.
  write_all(vdir(c) + "/stats.json", "garbage");
  CHECK(c.stats().hits == 0);
  c.count(true);
  CHECK(c.stats().hits == 1);
}

TEST_CASE("verify reports and removes bad entries") {
  TempDir t;
  CompileCache c(t.path);
  for (const char* tag : {"a", "b", "c"}) c.store(key_of(tag), sample_entry(tag));
  const std::string bad = c.entry_path(key_of("b"));
  std::string bytes = read_all(bad);
  bytes[bytes.size() / 2] ^= 0x7f;
  write_all(bad, bytes);

  VerifyResult r = c.verify();
  CHECK(r.ok == 2);
  REQUIRE(r.bad.size() == 1);
  CHECK(r.bad[0] == "llvmcache-" + key_of("b") + ".opfc");
  CHECK_FALSE(exists(bad));
  CHECK(c.stats().entries == 2);
  CHECK(c.stats().corrupt == 1);

  r = c.verify();
  CHECK(r.ok == 2);
  CHECK(r.bad.empty());

  CompileCache empty(t.path + "/none");
  r = empty.verify();
  CHECK(r.ok == 0);
  CHECK(r.bad.empty());
}

TEST_CASE("prune") {
  TempDir t;
  CompileCache c(t.path);
  const std::string ka = key_of("a"), kb = key_of("b"), kc = key_of("c");
  for (const auto& k : {ka, kb, kc}) c.store(k, sample_entry(k, 4000));
  uint64_t size_b = 0, size_c = 0;
  REQUIRE(!fs::file_size(c.entry_path(kb), size_b));
  REQUIRE(!fs::file_size(c.entry_path(kc), size_c));
  const auto now = std::chrono::system_clock::now();
  set_times(c.entry_path(ka), now - std::chrono::hours(3));  // oldest
  set_times(c.entry_path(kb), now - std::chrono::hours(2));
  set_times(c.entry_path(kc), now - std::chrono::hours(1));  // newest

  SUBCASE("no limits removes nothing") {
    CHECK(c.prune(0, 0) == 0);
    CHECK(c.stats().entries == 3);
  }
  SUBCASE("by size, oldest first") {
    CHECK(c.prune(size_b + size_c, 0) == 1);
    CHECK_FALSE(exists(c.entry_path(ka)));
    CHECK(exists(c.entry_path(kb)));
    CHECK(exists(c.entry_path(kc)));
    // Already within the limit.
    CHECK(c.prune(size_b + size_c, 0) == 0);
    // A tiny limit removes everything.
    CHECK(c.prune(1, 0) == 2);
    CHECK(c.stats().entries == 0);
  }
  SUBCASE("a lookup makes an entry recently used") {
    REQUIRE(c.lookup(ka).has_value());
    CHECK(c.prune(size_b + size_c, 0) == 1);
    CHECK(exists(c.entry_path(ka)));
    CHECK_FALSE(exists(c.entry_path(kb)));
    CHECK(exists(c.entry_path(kc)));
  }
  SUBCASE("by age") {
    CHECK(c.prune(0, 2 * 3600 + 1800) == 1);  // older than 2.5 h
    CHECK_FALSE(exists(c.entry_path(ka)));
    CHECK(c.stats().entries == 2);
    CHECK(c.prune(0, UINT64_MAX) == 0);  // huge ages do not overflow
    CHECK(c.stats().entries == 2);
  }
  SUBCASE("unrelated files are never pruned") {
    write_all(vdir(c) + "/keep.txt", std::string(10000, 'k'));
    CHECK(c.prune(1, 1) == 3);
    CHECK(exists(vdir(c) + "/keep.txt"));
  }
  CompileCache none(t.path + "/none");
  CHECK(none.prune(1, 1) == 0);
}

TEST_CASE("clear empties the cache but keeps the root") {
  TempDir t;
  CompileCache c(t.path + "/root");
  for (const char* tag : {"a", "b"}) c.store(key_of(tag), sample_entry(tag));
  c.record_variant("v", key_of("a"), {{"x", "y"}});
  c.count(true);
  c.prune(1ull << 40, 0);  // leaves llvmcache.timestamp behind

  c.clear();
  CHECK(exists(c.root()));
  Stats s = c.stats();
  CHECK(s.entries == 0);
  CHECK(s.bytes == 0);
  CHECK(s.hits == 0);
  CHECK_FALSE(c.last_variant("v").has_value());
  CHECK_FALSE(c.lookup(key_of("a")).has_value());
  CHECK_FALSE(exists(vdir(c)));

  c.clear();  // idempotent
  c.store(key_of("a"), sample_entry("a"));
  CHECK(c.lookup(key_of("a")).has_value());
}

TEST_CASE("default_root honours the environment") {
  EnvGuard g1("OPFORGE_CACHE_DIR"), g2("XDG_CACHE_HOME"), g3("HOME");
  setenv("HOME", "/home/someone", 1);
  setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
  setenv("OPFORGE_CACHE_DIR", "/explicit/dir", 1);
  CHECK(CompileCache::default_root() == "/explicit/dir");

  setenv("OPFORGE_CACHE_DIR", "", 1);
  CHECK(CompileCache::default_root() == "/xdg/cache/opforge");
  unsetenv("OPFORGE_CACHE_DIR");
  CHECK(CompileCache::default_root() == "/xdg/cache/opforge");

  setenv("XDG_CACHE_HOME", "relative/cache", 1);
  CHECK(CompileCache::default_root() == "/home/someone/.cache/opforge");
  unsetenv("XDG_CACHE_HOME");
  CHECK(CompileCache::default_root() == "/home/someone/.cache/opforge");

  unsetenv("HOME");
  CHECK_THROWS(CompileCache::default_root());
}
