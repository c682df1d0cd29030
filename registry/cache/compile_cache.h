// The persistent, content-addressed compile cache (ccache-style).
//
// An entry is one file holding every artifact of one compiled kernel variant (object,
// shared object, stmt, stmt_html, assembly, loop nest, manifest) plus a SHA-256 of its
// whole content. Entries are written to a temp file in the cache directory and renamed into
// place (registry/cache/atomic_file.h), so a reader sees a whole entry or none. A corrupt,
// truncated or foreign entry is a miss: it is removed and rebuilt.
//
// Layout: <root>/v<format>/llvmcache-<key>.opfc   (the "llvmcache-" prefix lets
// llvm::pruneCache manage the directory), <root>/v<format>/variants/<variant>.last holding
// the key and key parts last built for a variant (for `build --explain`).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace opforge::cache {

constexpr int kFormatVersion = 2;  // 2: entries record their key

// Length-prefixed canonical serialization of key parts, hashed with SHA-256.
// Each part is a (name, value) pair; the serialization is
//   for each part: u64 len(name) name u64 len(value) value   (little-endian lengths)
class KeyBuilder {
 public:
  KeyBuilder& add(const std::string& name, const std::string& value);
  std::string hex_digest() const;  // 64 lowercase hex chars
  const std::vector<std::pair<std::string, std::string>>& parts() const { return parts_; }

 private:
  std::vector<std::pair<std::string, std::string>> parts_;
};

std::string sha256_hex(const std::string& bytes);
// SHA-256 of a file's content; nullopt when it cannot be read.
std::optional<std::string> sha256_file_hex(const std::string& path);

struct Entry {
  std::map<std::string, std::string> artifacts;  // name -> bytes, e.g. "kernel.so"
};

struct Stats {
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t hits = 0;  // counters kept in <root>/v<format>/stats.json
  uint64_t misses = 0;
  uint64_t corrupt = 0;  // entries found corrupt and dropped
};

struct VerifyResult {
  uint64_t ok = 0;
  std::vector<std::string> bad;  // file names of entries that failed verification
};

class CompileCache {
 public:
  explicit CompileCache(std::string root);  // creates the directory on first store

  // Default root: $OPFORGE_CACHE_DIR, else $XDG_CACHE_HOME/opforge, else $HOME/.cache/opforge.
  static std::string default_root();

  const std::string& root() const { return root_; }
  std::string entry_path(const std::string& key) const;  // key must be 64 hex chars

  // Reads and verifies the entry. A corrupt entry is deleted and reported as a miss
  // (`why_miss`, when given, receives the reason: "absent", "corrupt: ...").
  std::optional<Entry> lookup(const std::string& key, std::string* why_miss = nullptr);

  // Atomic install; throws std::runtime_error on I/O failure (nothing is left behind).
  void store(const std::string& key, const Entry& entry);

  // Serializes builds of the same key across processes (FileLock). `build` is
  // called only when, after taking the lock, the entry is still absent.
  // Returns the entry and whether it was a hit. A built entry that cannot be stored (a full
  // disk) is still returned when `not_stored` is given, which then says why (as ccache, a
  // cache that cannot be written never fails the compile); without it, store() throws.
  std::pair<Entry, bool> get_or_build(const std::string& key, const std::function<Entry()>& build,
                                      std::string* why_miss = nullptr,
                                      std::string* not_stored = nullptr);
  // `build` and store, replacing any entry of that key (`build --recache`); under the same lock.
  Entry rebuild(const std::string& key, const std::function<Entry()>& build,
                std::string* not_stored = nullptr);

  // Key parts last built for a variant, for explaining a miss.
  void record_variant(const std::string& variant, const std::string& key,
                      const std::vector<std::pair<std::string, std::string>>& parts);
  std::optional<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>
  last_variant(const std::string& variant) const;

  // Hit/miss counters, under a lock; an update that waits 30 s for it is dropped.
  void count(bool hit);
  Stats stats() const;
  void zero_stats();      // resets the hit/miss/corrupt counters (under the same lock)
  VerifyResult verify();  // checks every entry; removes the bad ones
  // Removes entries by age/size with llvm::pruneCache; returns the number removed.
  uint64_t prune(uint64_t max_bytes, uint64_t max_age_seconds);
  // The automatic prune after a build: least recently used entries go first until the cache
  // is within `max_bytes` (0: no limit), but the entries of `keep` (the keys the build just
  // used) stay. They are touched first, so they are the newest by access time, and the
  // limit handed to llvm::pruneCache is raised to their total size when they alone exceed
  // it: pruneCache stops before reaching them (unless another process touches other entries
  // meanwhile). `kept_over`, when given, is set when the kept entries alone exceed max_bytes.
  uint64_t prune_keeping(uint64_t max_bytes, const std::vector<std::string>& keep,
                         bool* kept_over = nullptr);
  void clear();
  // Removes what killed builds leave: lock files no one holds ("*.lock", "*.lock-*") and
  // temp files (".tmp-*") older than `older_than`, and the directories of other format
  // versions (never read again). prune, prune_keeping and clear call it with a day. Returns what it
  // removed.
  uint64_t sweep_leftovers(std::chrono::seconds older_than);

 private:
  std::string dir() const;  // <root>/v<format>
  void store_or_say(const std::string& key, const Entry& e, std::string* not_stored);
  std::string root_;
};

// Serialization of an entry file (exposed for tests): "OPFCACHE", format version, artifact
// count, the artifacts (u64 LE name length, name, u64 LE data length, data), the entry's key
// (64 hex characters: an entry copied over another key's file is told apart), and the SHA-256
// of everything before it.
std::string encode_entry(const Entry& e, const std::string& key);
// Returns nullopt and sets `why` when the bytes are not a whole, intact entry; `key`, when
// given, receives the key the entry records.
std::optional<Entry> decode_entry(const std::string& bytes, std::string* why,
                                  std::string* key = nullptr);

}  // namespace opforge::cache
