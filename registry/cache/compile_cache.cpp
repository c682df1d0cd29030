// Persistent content-addressed compile cache. See compile_cache.h for the layout and contract.
#include "registry/cache/compile_cache.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/CachePruning.h>
#include <llvm/Support/Chrono.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Process.h>
#include <llvm/Support/SHA256.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "opforge/user_dirs.h"
#include "registry/cache/atomic_file.h"
#include "registry/format/file_lock.h"

namespace opforge::cache {

using registry::FileLock;
using registry::remove_unheld_lock;
using registry::run_locked;

namespace {

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

constexpr char kMagic[8] = {'O', 'P', 'F', 'C', 'A', 'C', 'H', 'E'};
constexpr size_t kDigestSize = 32;
constexpr size_t kHeaderSize = sizeof(kMagic) + 4 + 4;
constexpr size_t kKeySize = 64;                 // the entry's key, hex, after the artifacts
constexpr size_t kReadChunk = size_t(1) << 20;  // 1 MiB
constexpr const char* kEntryPrefix = "llvmcache-";
constexpr const char* kEntrySuffix = ".opfc";
constexpr const char* kStatsFile = "stats.json";
constexpr const char* kVariantsDir = "variants";
// How long get_or_build waits for another process building the same key.
constexpr unsigned kBuildLockWaitSeconds = 300;
// How long a counter update waits for the stats lock before it is dropped.
constexpr unsigned kStatsLockWaitSeconds = 30;

// ---- little-endian helpers -------------------------------------------------------------------

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t get_u32(const std::string& in, size_t pos) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<unsigned char>(in[pos + i])) << (8 * i);
  return v;
}

uint64_t get_u64(const std::string& in, size_t pos) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(in[pos + i])) << (8 * i);
  return v;
}

// ---- validation ------------------------------------------------------------------------------

bool valid_artifact_name(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!(llvm::isAlnum(c) || c == '_' || c == '.' || c == '-')) return false;
  }
  return true;
}

bool valid_key(const std::string& key) {
  if (key.size() != 64) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool valid_variant(const std::string& v) {
  if (v.empty() || v.size() > 128) return false;
  if (!(llvm::isAlpha(v[0]) || v[0] == '_')) return false;
  for (char c : v) {
    if (!(llvm::isAlnum(c) || c == '_')) return false;
  }
  return true;
}

void require_key(const std::string& key) {
  if (!valid_key(key)) {
    throw std::invalid_argument("cache key must be 64 lowercase hex characters");
  }
}

void require_variant(const std::string& variant) {
  if (!valid_variant(variant)) {
    throw std::invalid_argument("invalid variant name '" + variant.substr(0, 160) +
                                "' (must be a C identifier of at most 128 characters)");
  }
}

bool is_entry_file_name(llvm::StringRef name) {
  return name.startswith(kEntryPrefix) && name.endswith(kEntrySuffix);
}

std::string hex_of(llvm::StringRef raw) {
  return llvm::toHex(raw, /*LowerCase=*/true);
}

// ---- file helpers ----------------------------------------------------------------------------

std::string join(const std::string& a, const std::string& b) {
  llvm::SmallString<256> p(a);
  path::append(p, b);
  return std::string(p.str());
}

void close_fd(int fd) {
  if (fd >= 0) llvm::sys::Process::SafelyCloseFileDescriptor(fd);
}

// Reads an open descriptor to EOF; returns an error code on failure.
std::error_code read_fd(int fd, std::string& out) {
  out.clear();
  std::vector<char> buf(kReadChunk);
  for (;;) {
    llvm::Expected<size_t> n = fs::readNativeFile(fd, llvm::MutableArrayRef<char>(buf));
    if (!n) return llvm::errorToErrorCode(n.takeError());
    if (*n == 0) return {};
    out.append(buf.data(), *n);
  }
}

// Reads a whole file. Returns no_such_file_or_directory when absent.
std::error_code read_file(const std::string& p, std::string& out) {
  int fd = -1;
  if (std::error_code ec = fs::openFileForRead(p, fd)) return ec;
  std::error_code ec = read_fd(fd, out);
  close_fd(fd);
  return ec;
}

// Creates `dir` and installs `content` at `final_path` atomically (temp file + rename).
void write_atomic(const std::string& dir, const std::string& final_path,
                  const std::string& content) {
  if (std::error_code ec = fs::create_directories(dir)) {
    throw std::runtime_error("cannot create cache directory " + dir + ": " + ec.message());
  }
  write_file_atomic(final_path, content);
}

// ---- stats.json ------------------------------------------------------------------------------

struct Counters {
  uint64_t hits = 0, misses = 0, corrupt = 0;
};

uint64_t json_u64(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number_unsigned()) {
    if (it != j.end() && it->is_number_integer() && it->get<int64_t>() >= 0) {
      return static_cast<uint64_t>(it->get<int64_t>());
    }
    return 0;
  }
  return it->get<uint64_t>();
}

Counters read_counters(const std::string& stats_path) {
  Counters c;
  std::string text;
  if (read_file(stats_path, text)) return c;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return c;
  c.hits = json_u64(j, "hits");
  c.misses = json_u64(j, "misses");
  c.corrupt = json_u64(j, "corrupt");
  return c;
}

// Adds to the counters in <dir>/stats.json under a lock; never throws.
void bump_counters(const std::string& dir, uint64_t hits, uint64_t misses, uint64_t corrupt) {
  try {
    if (fs::create_directories(dir)) return;
    const std::string stats_path = join(dir, kStatsFile);
    // Without the lock (held for 30 s: a stopped process) the update is dropped: written
    // unlocked, it could overwrite the holder's, and more than this one would be lost.
    run_locked(stats_path, std::chrono::seconds(kStatsLockWaitSeconds), [&] {
      Counters c = read_counters(stats_path);
      nlohmann::json j = {
          {"hits", c.hits + hits}, {"misses", c.misses + misses}, {"corrupt", c.corrupt + corrupt}};
      write_atomic(dir, stats_path, j.dump(2) + "\n");
    });
  } catch (const std::exception&) {
    // Counters are best effort.
  }
}

// Names of the entry files (not paths) directly in `dir`.
std::vector<std::string> list_entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef name = path::filename(it->path());
    if (is_entry_file_name(name)) names.push_back(name.str());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

// ---- hashing ---------------------------------------------------------------------------------

KeyBuilder& KeyBuilder::add(const std::string& name, const std::string& value) {
  parts_.emplace_back(name, value);
  return *this;
}

std::string KeyBuilder::hex_digest() const {
  llvm::SHA256 h;
  std::string len;
  for (const auto& [name, value] : parts_) {
    len.clear();
    put_u64(len, name.size());
    h.update(len);
    h.update(name);
    len.clear();
    put_u64(len, value.size());
    h.update(len);
    h.update(value);
  }
  return hex_of(h.final());
}

std::string sha256_hex(const std::string& bytes) {
  llvm::SHA256 h;
  h.update(llvm::StringRef(bytes));
  return hex_of(h.final());
}

std::optional<std::string> sha256_file_hex(const std::string& p) {
  int fd = -1;
  if (fs::openFileForRead(p, fd)) return std::nullopt;
  llvm::SHA256 h;
  std::vector<char> buf(kReadChunk);
  std::optional<std::string> result;
  for (;;) {
    llvm::Expected<size_t> n = fs::readNativeFile(fd, llvm::MutableArrayRef<char>(buf));
    if (!n) {
      llvm::consumeError(n.takeError());
      break;
    }
    if (*n == 0) {
      result = hex_of(h.final());
      break;
    }
    h.update(llvm::StringRef(buf.data(), *n));
  }
  close_fd(fd);
  return result;
}

// ---- entry encoding --------------------------------------------------------------------------

std::string encode_entry(const Entry& e, const std::string& key) {
  require_key(key);
  if (e.artifacts.size() > UINT32_MAX) throw std::invalid_argument("too many artifacts");
  std::string out(kMagic, sizeof(kMagic));
  put_u32(out, static_cast<uint32_t>(kFormatVersion));
  put_u32(out, static_cast<uint32_t>(e.artifacts.size()));
  for (const auto& [name, data] : e.artifacts) {
    if (!valid_artifact_name(name)) {
      throw std::invalid_argument("invalid artifact name '" + name.substr(0, 160) + "'");
    }
    put_u64(out, name.size());
    out += name;
    put_u64(out, data.size());
    out += data;
  }
  out += key;
  llvm::SHA256 h;
  h.update(llvm::StringRef(out));
  out += h.final().str();
  return out;
}

std::optional<Entry> decode_entry(const std::string& bytes, std::string* why, std::string* key) {
  auto fail = [&](std::string reason) -> std::optional<Entry> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  const size_t size = bytes.size();
  const size_t magic_len = std::min(size, sizeof(kMagic));
  if (bytes.compare(0, magic_len, kMagic, magic_len) != 0) return fail("bad magic");
  if (size < sizeof(kMagic)) return fail("truncated");
  if (size < kHeaderSize) return fail("truncated");
  const uint32_t version = get_u32(bytes, 8);
  if (version != static_cast<uint32_t>(kFormatVersion)) {
    return fail("version " + std::to_string(version) + " != " + std::to_string(kFormatVersion));
  }
  if (size < kHeaderSize + kKeySize + kDigestSize) return fail("truncated");
  const uint32_t count = get_u32(bytes, 12);
  const size_t body_end = size - kDigestSize - kKeySize;  // artifacts must end exactly here
  size_t pos = kHeaderSize;
  // Each artifact takes at least 16 bytes of lengths; reject absurd counts up front.
  if (uint64_t(count) * 16 > body_end - pos) return fail("truncated");
  Entry e;
  for (uint32_t i = 0; i < count; ++i) {
    if (body_end - pos < 8) return fail("truncated");
    const uint64_t name_len = get_u64(bytes, pos);
    pos += 8;
    if (name_len > body_end - pos) return fail("truncated");
    std::string name = bytes.substr(pos, static_cast<size_t>(name_len));
    pos += static_cast<size_t>(name_len);
    if (!valid_artifact_name(name)) return fail("artifact name invalid");
    if (body_end - pos < 8) return fail("truncated");
    const uint64_t data_len = get_u64(bytes, pos);
    pos += 8;
    if (data_len > body_end - pos) return fail("truncated");
    std::string data = bytes.substr(pos, static_cast<size_t>(data_len));
    pos += static_cast<size_t>(data_len);
    if (!e.artifacts.emplace(std::move(name), std::move(data)).second) {
      return fail("duplicate artifact name");
    }
  }
  if (pos != body_end) return fail("trailing bytes");
  llvm::SHA256 h;
  h.update(llvm::StringRef(bytes.data(), body_end + kKeySize));
  if (h.final() != llvm::StringRef(bytes.data() + body_end + kKeySize, kDigestSize)) {
    return fail("checksum mismatch");
  }
  if (key) *key = bytes.substr(body_end, kKeySize);
  return e;
}

// ---- CompileCache ----------------------------------------------------------------------------

CompileCache::CompileCache(std::string root) : root_(std::move(root)) {}

std::string CompileCache::default_root() {
  return registry::cache_root();  // one definition: the runtime finds the user registry there
}

std::string CompileCache::dir() const {
  return join(root_, "v" + std::to_string(kFormatVersion));
}

std::string CompileCache::entry_path(const std::string& key) const {
  require_key(key);
  return join(dir(), kEntryPrefix + key + kEntrySuffix);
}

std::optional<Entry> CompileCache::lookup(const std::string& key, std::string* why_miss) {
  const std::string p = entry_path(key);
  auto miss = [&](std::string reason) -> std::optional<Entry> {
    if (why_miss) *why_miss = std::move(reason);
    return std::nullopt;
  };
  auto drop = [&](const std::string& reason) -> std::optional<Entry> {
    fs::remove(p);
    bump_counters(dir(), 0, 0, 1);
    return miss("corrupt: " + reason);
  };

  int fd = -1;
  if (std::error_code ec = fs::openFileForRead(p, fd)) {
    if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) {
      return miss("absent");
    }
    return drop("unreadable (" + ec.message() + ")");
  }
  std::string bytes;
  std::error_code ec = read_fd(fd, bytes);
  if (ec) {
    close_fd(fd);
    return drop("unreadable (" + ec.message() + ")");
  }
  std::string why, recorded;
  std::optional<Entry> e = decode_entry(bytes, &why, &recorded);
  if (!e) {
    close_fd(fd);
    return drop(why);
  }
  if (recorded != key) {  // intact, but another key's entry (a file copied over this one)
    close_fd(fd);
    return drop("holds the entry of key " + recorded.substr(0, 12) + "...");
  }
  // Mark as recently used so that LRU pruning (which orders by access time) keeps it.
  (void)fs::setLastAccessAndModificationTime(fd, std::chrono::system_clock::now());
  close_fd(fd);
  return e;
}

void CompileCache::store(const std::string& key, const Entry& entry) {
  const std::string p = entry_path(key);
  write_atomic(dir(), p, encode_entry(entry, key));
}

// Stores `e`; a failure is thrown, or said in `not_stored` when given.
void CompileCache::store_or_say(const std::string& key, const Entry& e, std::string* not_stored) {
  if (!not_stored) return store(key, e);
  try {
    store(key, e);
  } catch (const std::exception& err) {
    *not_stored = err.what();
  }
}

std::pair<Entry, bool> CompileCache::get_or_build(const std::string& key,
                                                  const std::function<Entry()>& build,
                                                  std::string* why_miss, std::string* not_stored) {
  const std::string p = entry_path(key);
  if (std::optional<Entry> e = lookup(key, why_miss)) return {std::move(*e), true};

  auto build_and_store = [&]() -> std::pair<Entry, bool> {
    Entry e = build();
    store_or_say(key, e, not_stored);
    return {std::move(e), false};
  };

  // The lock file lives next to the entry, so its directory must exist.
  if (fs::create_directories(dir())) return build_and_store();

  FileLock lock(p, std::chrono::seconds(kBuildLockWaitSeconds));
  // Someone may have finished building while we waited, or between our lookup and the lock.
  if (std::optional<Entry> e = lookup(key)) return {std::move(*e), true};
  // Owned; or the owner failed, or held it past the wait: build anyway (installs are atomic).
  return build_and_store();
}

Entry CompileCache::rebuild(const std::string& key, const std::function<Entry()>& build,
                            std::string* not_stored) {
  const std::string p = entry_path(key);
  auto build_and_store = [&] {
    Entry e = build();
    store_or_say(key, e, not_stored);
    return e;
  };
  if (fs::create_directories(dir())) return build_and_store();
  // Held while compiling, so a concurrent get_or_build waits for the new entry.
  FileLock lock(p, std::chrono::seconds(kBuildLockWaitSeconds));
  return build_and_store();
}

void CompileCache::record_variant(const std::string& variant, const std::string& key,
                                  const std::vector<std::pair<std::string, std::string>>& parts) {
  require_variant(variant);
  require_key(key);
  nlohmann::json jparts = nlohmann::json::array();
  for (const auto& [name, value] : parts) jparts.push_back({name, value});
  nlohmann::json j = {{"key", key}, {"parts", std::move(jparts)}};
  const std::string vdir = join(dir(), kVariantsDir);
  // Invalid UTF-8 (unlikely in printed IR) is replaced rather than failing the build.
  write_atomic(vdir, join(vdir, variant + ".last"),
               j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::optional<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>
CompileCache::last_variant(const std::string& variant) const {
  require_variant(variant);
  std::string text;
  if (read_file(join(join(dir(), kVariantsDir), variant + ".last"), text)) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto key = j.find("key");
  auto parts = j.find("parts");
  if (key == j.end() || !key->is_string() || parts == j.end() || !parts->is_array()) {
    return std::nullopt;
  }
  std::pair<std::string, std::vector<std::pair<std::string, std::string>>> out;
  out.first = key->get<std::string>();
  if (!valid_key(out.first)) return std::nullopt;
  for (const auto& part : *parts) {
    if (!part.is_array() || part.size() != 2 || !part[0].is_string() || !part[1].is_string()) {
      return std::nullopt;
    }
    out.second.emplace_back(part[0].get<std::string>(), part[1].get<std::string>());
  }
  return out;
}

void CompileCache::count(bool hit) {
  bump_counters(dir(), hit ? 1 : 0, hit ? 0 : 1, 0);
}

Stats CompileCache::stats() const {
  Stats s;
  const std::string d = dir();
  for (const std::string& name : list_entries(d)) {
    uint64_t size = 0;
    if (fs::file_size(join(d, name), size)) continue;  // vanished meanwhile
    ++s.entries;
    s.bytes += size;
  }
  Counters c = read_counters(join(d, kStatsFile));
  s.hits = c.hits;
  s.misses = c.misses;
  s.corrupt = c.corrupt;
  return s;
}

void CompileCache::zero_stats() {
  const std::string d = dir();
  if (std::error_code ec = fs::create_directories(d)) {
    throw std::runtime_error("cannot create cache directory " + d + ": " + ec.message());
  }
  const std::string stats_path = join(d, kStatsFile);
  const std::string why = run_locked(stats_path, std::chrono::seconds(kStatsLockWaitSeconds), [&] {
    write_atomic(d, stats_path,
                 nlohmann::json{{"hits", 0}, {"misses", 0}, {"corrupt", 0}}.dump(2) + "\n");
  });
  if (!why.empty()) throw std::runtime_error("cannot reset the cache statistics: " + why);
}

VerifyResult CompileCache::verify() {
  VerifyResult r;
  const std::string d = dir();
  for (const std::string& name : list_entries(d)) {
    const std::string p = join(d, name);
    std::string bytes;
    std::error_code ec = read_file(p, bytes);
    if (ec == std::errc::no_such_file_or_directory) continue;  // removed meanwhile
    std::string why, recorded;
    const std::string named =
        name.substr(std::strlen(kEntryPrefix),
                    name.size() - std::strlen(kEntryPrefix) - std::strlen(kEntrySuffix));
    if (!ec && decode_entry(bytes, &why, &recorded) && recorded == named) {
      ++r.ok;
      continue;
    }
    fs::remove(p);
    r.bad.push_back(name);
  }
  if (!r.bad.empty()) bump_counters(d, 0, 0, r.bad.size());
  return r;
}

uint64_t CompileCache::sweep_leftovers(std::chrono::seconds older_than) {
  uint64_t removed = 0;
  const auto cutoff = std::chrono::system_clock::now() - older_than;
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; it != end && !ec; it.increment(ec)) {
    const std::string name = path::filename(it->path()).str();
    if (name.size() > 1 && name[0] == 'v' &&
        name.find_first_not_of("0123456789", 1) == std::string::npos &&
        name != "v" + std::to_string(kFormatVersion)) {
      if (!fs::remove_directories(it->path())) ++removed;  // an older format's entries
    }
  }
  const std::string d = dir();
  for (fs::directory_iterator it(d, ec), end; it != end && !ec; it.increment(ec)) {
    const std::string name = path::filename(it->path()).str();
    // "<x>.lock" is a FileLock's (removed only when no one holds it); "<x>.lock-*" an older
    // opforge's llvm::LockFileManager's.
    const bool lock = name.size() > 5 && name.compare(name.size() - 5, 5, ".lock") == 0;
    const bool leftover =
        lock || name.find(".lock-") != std::string::npos || name.rfind(".tmp-", 0) == 0;
    fs::file_status st;
    if (!leftover || fs::status(it->path(), st) || st.getLastModificationTime() > cutoff) continue;
    if (lock ? remove_unheld_lock(it->path()) : !fs::remove(it->path())) ++removed;
  }
  return removed;
}

uint64_t CompileCache::prune(uint64_t max_bytes, uint64_t max_age_seconds) {
  sweep_leftovers(std::chrono::hours(24));
  const std::string d = dir();
  if (!fs::is_directory(d)) return 0;
  const uint64_t before = list_entries(d).size();

  llvm::CachePruningPolicy policy;
  policy.Interval = std::chrono::seconds(0);  // always scan
  // In LLVM, an Expiration of 0 disables age-based pruning, which is what 0 means here too.
  // Clamp so that the comparison with system_clock durations (nanoseconds) cannot overflow.
  constexpr uint64_t kMaxAge = uint64_t(100) * 365 * 24 * 3600;  // 100 years
  policy.Expiration =
      std::chrono::seconds(static_cast<int64_t>(std::min(max_age_seconds, kMaxAge)));
  policy.MaxSizeBytes = max_bytes;               // 0 disables the size limit
  policy.MaxSizePercentageOfAvailableSpace = 0;  // never prune based on free disk space
  policy.MaxSizeFiles = 0;
  llvm::pruneCache(d, policy);

  const uint64_t after = list_entries(d).size();
  return before > after ? before - after : 0;
}

uint64_t CompileCache::prune_keeping(uint64_t max_bytes, const std::vector<std::string>& keep,
                                     bool* kept_over) {
  if (kept_over) *kept_over = false;
  if (max_bytes == 0) {
    sweep_leftovers(std::chrono::hours(24));
    return 0;
  }
  uint64_t keep_bytes = 0;
  const auto now = std::chrono::system_clock::now();
  for (const std::string& key : keep) {
    const std::string p = entry_path(key);
    int fd = -1;
    if (fs::openFileForRead(p, fd)) continue;  // not stored (e.g. a failed store)
    fs::file_status st;
    if (!fs::status(fd, st)) keep_bytes += st.getSize();
    (void)fs::setLastAccessAndModificationTime(fd, now);
    close_fd(fd);
  }
  if (keep_bytes > max_bytes && kept_over) *kept_over = true;
  return prune(std::max(max_bytes, keep_bytes), 0);
}

void CompileCache::clear() {
  sweep_leftovers(std::chrono::hours(24));
  const std::string d = dir();
  for (const std::string& name : list_entries(d)) fs::remove(join(d, name));
  fs::remove_directories(join(d, kVariantsDir));
  fs::remove(join(d, kStatsFile));
  fs::remove(join(d, "llvmcache.timestamp"));  // written by llvm::pruneCache
  fs::remove(d);  // only succeeds when nothing else (e.g. a live lock) is left
}

}  // namespace opforge::cache
