// The CLI behaves like the tools its users know: build progress and summary, a missing
// registry says what to run, ccache's cache policy (max-size, stats --zero, disable,
// recache), and bash completion generated from the command table.
#include <doctest/doctest.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "cli_util.h"
#include "registry/cache/compile_cache.h"

namespace opforge::testing {
namespace {

// Keeps the shared test cache unpruned: builds here must not evict the registry's entries.
const std::map<std::string, std::string> kNoPrune = {{"OPFORGE_CACHE_MAXSIZE", "0"}};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The starter rule of `opforge new`: a small op (and its bandwidth kernel) to build cold.
std::string starter_rule(const TempDir& dir) {
  const Result made = opforge({"new", "tool_rule", "--dir", dir.path().string()});
  REQUIRE_MESSAGE(made.rc == 0, made.all());
  return dir / "tool_rule.rule";
}

TEST_CASE("build: one line per variant when not a terminal, a counter that adds up, a summary") {
  TempDir dir;
  const Result r = opforge({"build", "--registry", dir / "reg", "--cache-dir", test_cache_dir(),
                            "--only", "apply_gradient_descent", "--jobs", "2"},
                           kNoPrune);
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(r.err.empty());
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() >= 3);
  // "[ k/N] VARIANT  hit |miss  S.s s": each k once, N the same on every line.
  const std::regex line(R"(\[ *(\d+)/(\d+)\] ([a-z0-9_]+)  (hit |miss)  \d+\.\d s)");
  std::set<int> seen;
  int total = -1;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    std::smatch m;
    REQUIRE_MESSAGE(std::regex_match(lines[i], m, line), lines[i]);
    seen.insert(std::stoi(m[1]));
    if (total < 0) total = std::stoi(m[2]);
    CHECK(std::stoi(m[2]) == total);
  }
  CHECK(total == static_cast<int>(lines.size()) - 1);
  CHECK(seen.size() == lines.size() - 1);
  CHECK(*seen.begin() == 1);
  CHECK(*seen.rbegin() == total);
  CHECK(contains(r.out, "] halide_runtime  hit "));
  // The summary: kernels, hits, misses, compile and wall time, the registry.
  const std::regex summary(
      R"(built (\d+) kernels \((\d+) variants \+ runtime\): (\d+) hits, (\d+) misses, compile \d+\.\d s, wall \d+\.\d s, registry (.*))");
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_match(lines.back(), m, summary), lines.back());
  CHECK(std::stoi(m[1]) == total);
  CHECK(std::stoi(m[2]) == total - 1);
  CHECK(std::stoi(m[3]) + std::stoi(m[4]) == total);
  CHECK(m[5] == dir / "reg");

  // --quiet: nothing; --explain: the reason under each line; --json: JSON only.
  const Result quiet = opforge({"build", "--registry", dir / "reg", "--cache-dir", test_cache_dir(),
                                "--only", "apply_gradient_descent", "--quiet"},
                               kNoPrune);
  CHECK(quiet.rc == 0);
  CHECK(quiet.out.empty());
  CHECK(quiet.err.empty());
  const Result explain =
      opforge({"build", "--registry", dir / "reg", "--cache-dir", test_cache_dir(), "--only",
               "apply_gradient_descent", "--explain"},
              kNoPrune);
  CHECK(explain.rc == 0);
  CHECK(contains(explain.out, "hit: same key as an entry in the cache"));
  const Result json = opforge({"build", "--registry", dir / "reg", "--cache-dir", test_cache_dir(),
                               "--only", "apply_gradient_descent", "--json"},
                              kNoPrune);
  CHECK(json.rc == 0);
  const nlohmann::json j = parse_json(json);
  CHECK(j["variants"].size() == static_cast<size_t>(total - 1));
  CHECK(j["hits"] == total);
}

// `opforge args...` with stdout on a pseudo-terminal `columns` wide; what the terminal got.
std::string on_terminal(const std::vector<std::string>& args, unsigned short columns) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  REQUIRE(master >= 0);
  REQUIRE(grantpt(master) == 0);
  REQUIRE(unlockpt(master) == 0);
  const std::string slave_name = ptsname(master);
  winsize ws{};
  ws.ws_col = columns;
  ws.ws_row = 24;
  REQUIRE(ioctl(master, TIOCSWINSZ, &ws) == 0);
  std::vector<std::string> words = {opforge_exe()};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, slave_name.c_str(), O_WRONLY | O_NOCTTY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclose(&fa, master);
  pid_t pid = 0;
  std::string env_max = "OPFORGE_CACHE_MAXSIZE=0";
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  envp.push_back(env_max.data());
  envp.push_back(nullptr);
  REQUIRE(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()) == 0);
  posix_spawn_file_actions_destroy(&fa);
  // Read while it runs (a full terminal buffer would block it); EIO once it is gone.
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(master, buf, sizeof buf);
    if (n > 0) {
      got.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  close(master);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  return got;
}

// The ops an index lists, and whether every entry's descriptor and kernel are on disk.
std::set<std::string> indexed_ops(const fs::path& reg, bool* complete) {
  const nlohmann::json index = nlohmann::json::parse(slurp(reg / "index.json"));
  std::set<std::string> ops;
  *complete = true;
  for (const auto& e : index["variants"]) {
    ops.insert(e["op"].get<std::string>());
    const fs::path desc = reg / e["descriptor"].get<std::string>();
    *complete =
        *complete && fs::exists(desc) &&
        fs::exists(reg / nlohmann::json::parse(slurp(desc))["kernel"]["file"].get<std::string>());
  }
  return ops;
}

const std::vector<std::string> kFourOps = {"apply_gradient_descent", "apply_momentum",
                                           "apply_adagrad", "apply_rms_prop"};

// Before the registry lock, 4 concurrent partial builds lost an op in 6 of 15 trials, 4 of
// them silently (every build returned 0).
TEST_CASE("4 concurrent builds of different ops into one registry and one cache lose nothing") {
  for (int trial = 0; trial < 3; ++trial) {
    CAPTURE(trial);
    TempDir dir;
    std::vector<Result> results(kFourOps.size());
    std::vector<std::thread> builds;
    for (size_t k = 0; k < kFourOps.size(); ++k) {
      builds.emplace_back([&, k] {
        results[k] = opforge({"build", "--registry", dir / "reg", "--cache-dir", test_cache_dir(),
                              "--only", kFourOps[k], "--quiet"},
                             kNoPrune);
      });
    }
    for (auto& b : builds) b.join();
    for (const auto& r : results) CHECK_MESSAGE(r.rc == 0, r.all());
    bool complete = false;
    const std::set<std::string> ops = indexed_ops(dir.path() / "reg", &complete);
    for (const auto& op : kFourOps) CHECK_MESSAGE(ops.count(op), op << " lost");
    CHECK(complete);
  }
}

// Cold: the builds race for the same keys. Each key is compiled once (the others wait on its
// lock and hit), no entry is corrupt, and the registry holds the op.
TEST_CASE("3 concurrent cold builds of one op into one new cache compile each kernel once") {
  TempDir dir;
  std::vector<Result> results(3);
  std::vector<std::thread> builds;
  for (size_t k = 0; k < results.size(); ++k) {
    builds.emplace_back([&, k] {
      results[k] = opforge({"build", "--registry", dir / "reg", "--cache-dir", dir / "cache",
                            "--only", "apply_gradient_descent", "--json", "--jobs", "1"},
                           kNoPrune);
    });
  }
  for (auto& b : builds) b.join();
  int64_t hits = 0, misses = 0;
  size_t kernels = 0;
  for (const auto& r : results) {
    REQUIRE_MESSAGE(r.rc == 0, r.all());
    const nlohmann::json j = nlohmann::json::parse(r.out);
    hits += j["hits"].get<int64_t>();
    misses += j["misses"].get<int64_t>();
    kernels = j["variants"].size() + 1;  // and the runtime
  }
  CHECK(misses == static_cast<int64_t>(kernels));
  CHECK(hits == static_cast<int64_t>(2 * kernels));
  const Result verify = opforge({"cache", "verify", "--cache-dir", dir / "cache"});
  CHECK_MESSAGE(contains(verify.out, std::to_string(kernels) + " entries intact, 0 corrupt"),
                verify.all());
  bool complete = false;
  CHECK(indexed_ops(dir.path() / "reg", &complete).count("apply_gradient_descent"));
  CHECK(complete);
}

// As ccache: a cache that cannot be written (full, or broken) costs the caching, not the
// build. A file where the cache's format directory belongs makes every cache write fail.
TEST_CASE("a build whose cache cannot be written succeeds, warning once per reason") {
  TempDir dir;
  fs::create_directories(dir.path() / "cache");
  std::ofstream(dir.path() / "cache" / "v2") << "not a directory";
  const Result r = opforge({"build", "--registry", dir / "reg", "--cache-dir", dir / "cache",
                            "--only", "apply_gradient_descent"},
                           kNoPrune);
  CAPTURE(r.all());
  CHECK(r.rc == 0);
  CHECK(contains(r.err, "opforge build: warning: cache: halide_runtime: compiled, not cached: "));
  CHECK(contains(r.err, "Not a directory (and "));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // one line: one reason
  bool complete = false;
  CHECK(indexed_ops(dir.path() / "reg", &complete).count("apply_gradient_descent"));
  CHECK(complete);
  CHECK(opforge({"list", "--registry", dir / "reg"}).rc == 0);
}

// A build killed (or out of disk) before it wrote index.json used to leave a directory every
// later build refused; a corrupt index.json made every partial build fail.
TEST_CASE("a registry without its index, or with a corrupt one, is resumed by the next build") {
  TempDir dir;
  const fs::path reg = dir.path() / "reg";
  auto build = [&](const std::string& op) {
    const Result r = opforge({"build", "--registry", reg.string(), "--cache-dir", test_cache_dir(),
                              "--only", op, "--quiet"},
                             kNoPrune);
    CHECK_MESSAGE(r.rc == 0, r.all());
  };
  build(kFourOps[0]);
  CHECK(fs::exists(reg / ".opforge-registry"));
  fs::remove(reg / "index.json");  // as a build killed just before writing it leaves it
  build(kFourOps[1]);
  bool complete = false;
  std::set<std::string> ops = indexed_ops(reg, &complete);
  CHECK(ops.count(kFourOps[0]));  // recovered from its descriptors
  CHECK(ops.count(kFourOps[1]));
  CHECK(complete);
  std::ofstream(reg / "index.json") << "{ not json";
  build(kFourOps[2]);
  ops = indexed_ops(reg, &complete);
  for (size_t k = 0; k < 3; ++k) CHECK(ops.count(kFourOps[k]));
  CHECK(complete);
  // A directory that is neither empty nor a registry is still refused, and left as it was.
  const fs::path foreign = dir.path() / "foreign";
  fs::create_directories(foreign / "kernels");
  const Result r = opforge({"build", "--registry", foreign.string(), "--cache-dir",
                            test_cache_dir(), "--only", kFourOps[0]},
                           kNoPrune);
  CHECK(r.rc != 0);
  CHECK(contains(r.err, "refusing to write a registry over it"));
  CHECK_FALSE(fs::exists(foreign / "index.json"));
}

// A FIFO given as a rule file hung the build.
TEST_CASE("build --rules: a FIFO or a directory entry that is not a file is refused, unread") {
  TempDir dir;
  const std::string fifo = dir / "x.rule";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const Result r = opforge({"build", "--registry", dir / "reg", "--cache-dir", dir / "cache",
                            "--rules", fifo, "--only", "apply_gradient_descent"},
                           kNoPrune);
  CHECK(r.rc != 0);
  CHECK(contains(r.err, fifo + ": is a FIFO, not a regular file"));
  CHECK_FALSE(fs::exists(dir / "reg"));
}

TEST_CASE("build on a terminal: one line rewritten in place, cut to the width, then the summary") {
  TempDir dir;
  const std::string out =
      on_terminal({"build", "--registry", dir / "reg", "--cache-dir", test_cache_dir(), "--only",
                   "apply_gradient_descent", "--jobs", "2"},
                  40);
  INFO(out);
  // Each update is "\r<line>\033[K"; only the summary ends a line (the terminal's \r\n).
  std::vector<std::string> updates;
  for (size_t at = out.find('\r'); at != std::string::npos; at = out.find('\r', at + 1)) {
    const size_t end = out.find("\033[K", at);
    if (end == std::string::npos) break;
    updates.push_back(out.substr(at + 1, end - at - 1));
  }
  REQUIRE(updates.size() >= 3);
  const std::string& first = updates.front();
  REQUIRE(first.rfind("[ 1/", 0) == 0);
  const int total = std::stoi(first.substr(4));
  CHECK(updates.size() == static_cast<size_t>(total) + 1);  // + the clear before the summary
  for (size_t k = 0; k + 1 < updates.size(); ++k) {
    CHECK(updates[k].size() < 40);
    CHECK(updates[k].find('\n') == std::string::npos);
  }
  CHECK(updates.back().empty());
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  CHECK(contains(out, "\033[Kbuilt " + std::to_string(total) + " kernels ("));
}

TEST_CASE("a missing or empty registry says what to run") {
  TempDir dir;
  for (const std::string& reg : {dir / "nothing", dir.path().string()}) {
    const Result r = opforge({"list", "--registry", reg});
    CHECK(r.rc == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "opforge list: error: no op registry at " + reg +
                       " (index.json missing); run 'opforge build --registry " + reg +
                       "' to create it\n");
  }
  const Result def = opforge({"list"}, {{"OPFORGE_REGISTRY", dir / "nothing"}});
  CHECK(def.err == "opforge list: error: no op registry at " + (dir / "nothing") +
                       " (index.json missing); run 'opforge build' to create it\n");
}

TEST_CASE("cache config max-size: persistent, validated, overridden by the environment") {
  TempDir dir;
  const std::string cache = dir / "cache";
  const Result set = opforge({"cache", "config", "max-size", "5G", "--cache-dir", cache});
  REQUIRE_MESSAGE(set.rc == 0, set.all());
  CHECK(contains(slurp(cache + "/opforge.conf"), "max-size = 5G\n"));
  const Result show =
      opforge({"cache", "config", "--cache-dir", cache}, {{"OPFORGE_CACHE_MAXSIZE", ""}});
  CHECK(show.out == "max-size = 5368709120 (5.0 GiB; from " + cache + "/opforge.conf)\n");
  const Result env =
      opforge({"cache", "config", "--cache-dir", cache}, {{"OPFORGE_CACHE_MAXSIZE", "300M"}});
  CHECK(env.out == "max-size = 314572800 (300.0 MiB; from environment (OPFORGE_CACHE_MAXSIZE))\n");
  const Result bad = opforge({"cache", "config", "max-size", "5X", "--cache-dir", cache});
  CHECK(bad.rc == 2);
  CHECK(contains(bad.err, "max-size '5X': expected a size"));
  CHECK(contains(slurp(cache + "/opforge.conf"), "max-size = 5G\n"));  // unchanged
  const Result unknown = opforge({"cache", "config", "colour", "blue", "--cache-dir", cache});
  CHECK(unknown.rc == 2);
  CHECK(contains(unknown.err, "unknown cache setting 'colour'"));
  const Result stats =
      opforge({"cache", "stats", "--cache-dir", cache}, {{"OPFORGE_CACHE_MAXSIZE", ""}});
  CHECK(contains(stats.out, "of max-size 5.0 GiB"));
  const Result bad_env =
      opforge({"cache", "stats", "--cache-dir", cache}, {{"OPFORGE_CACHE_MAXSIZE", "big"}});
  CHECK(bad_env.rc == 1);
  CHECK(contains(bad_env.err, "OPFORGE_CACHE_MAXSIZE 'big'"));
}

// A cache holding the entries of `build --only apply_gradient_descent` (copied from the test
// cache) plus `junk` old entries of `junk_bytes` each.
// The cache's directory for this format version, as the CLI writes it.
const std::string kVersionDir = "/v" + std::to_string(cache::kFormatVersion);

struct SmallCache {
  TempDir dir;
  std::string root = dir / "cache";
  std::vector<std::string> used;  // entry files the build uses
  std::vector<std::string> junk;  // old entries no build uses
  uint64_t used_bytes = 0;
  SmallCache(int junk_files, size_t junk_bytes) {
    const Result r = opforge({"build", "--registry", dir / "reg0", "--cache-dir", test_cache_dir(),
                              "--only", "apply_gradient_descent", "--json"},
                             kNoPrune);
    REQUIRE_MESSAGE(r.rc == 0, r.all());
    const nlohmann::json j = parse_json(r);
    std::vector<std::string> keys = {j["runtime_key"].get<std::string>()};
    for (const auto& v : j["variants"]) keys.push_back(v["key"]);
    fs::create_directories(root + kVersionDir);
    for (const auto& k : keys) {
      const std::string name = "llvmcache-" + k + ".opfc";
      fs::copy_file(test_cache_dir() + kVersionDir + "/" + name, root + kVersionDir + "/" + name);
      used.push_back(root + kVersionDir + "/" + name);
      used_bytes += fs::file_size(used.back());
    }
    const auto old = fs::file_time_type::clock::now() - std::chrono::hours(24);
    for (int i = 0; i < junk_files; ++i) {
      const std::string p = root + kVersionDir + "/llvmcache-" + std::string(63, 'a') +
                            static_cast<char>('0' + i) + ".opfc";
      junk.push_back(p);
      std::ofstream(p) << std::string(junk_bytes, 'j');
      fs::last_write_time(p, old);
      // atime too: pruneCache orders by last access.
      struct timespec times[2] = {{time(nullptr) - 86400, 0}, {time(nullptr) - 86400, 0}};
      utimensat(AT_FDCWD, p.c_str(), times, 0);
    }
  }
  size_t junk_left() const {
    size_t n = 0;
    for (const auto& p : junk) n += fs::exists(p);
    return n;
  }
};

TEST_CASE("build prunes the cache to max-size after every build, keeping the registry's entries") {
  SmallCache c(3, 100000);
  // Room for the used entries and one junk entry: the two least recently used junk go.
  const uint64_t limit = c.used_bytes + 150000;
  const std::map<std::string, std::string> env = {{"OPFORGE_CACHE_MAXSIZE", std::to_string(limit)}};
  const Result r = opforge({"build", "--registry", c.dir / "reg", "--cache-dir", c.root, "--only",
                            "apply_gradient_descent"},
                           env);
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, ": " + std::to_string(c.used.size()) + " hits, 0 misses"));
  CHECK(contains(r.out, "cache: removed 2 least recently used entries"));
  CHECK(c.junk_left() == 1);
  for (const auto& u : c.used) CHECK(fs::exists(u));

  // A limit below the registry's own entries: all junk goes, the used entries stay.
  const Result tiny = opforge({"build", "--registry", c.dir / "reg", "--cache-dir", c.root,
                               "--only", "apply_gradient_descent"},
                              {{"OPFORGE_CACHE_MAXSIZE", "1K"}});
  REQUIRE_MESSAGE(tiny.rc == 0, tiny.all());
  CHECK(contains(tiny.out, "cache: warning: this registry's entries alone exceed max-size"));
  CHECK(c.junk_left() == 0);
  for (const auto& u : c.used) CHECK(fs::exists(u));
  const Result again = opforge({"build", "--registry", c.dir / "reg", "--cache-dir", c.root,
                                "--only", "apply_gradient_descent", "--json"},
                               {{"OPFORGE_CACHE_MAXSIZE", "1K"}});
  CHECK(parse_json(again)["misses"] == 0);
}

TEST_CASE("cache stats --zero resets the hit/miss statistics") {
  SmallCache c(0, 0);
  const Result built = opforge({"build", "--registry", c.dir / "reg", "--cache-dir", c.root,
                                "--only", "apply_gradient_descent", "--quiet"},
                               kNoPrune);
  REQUIRE(built.rc == 0);
  const nlohmann::json before =
      parse_json(opforge({"cache", "stats", "--json", "--cache-dir", c.root}));
  CHECK(before["hits"] == c.used.size());
  const Result zero = opforge({"cache", "stats", "--zero", "--cache-dir", c.root});
  CHECK(zero.rc == 0);
  const nlohmann::json after =
      parse_json(opforge({"cache", "stats", "--json", "--cache-dir", c.root}));
  CHECK(after["hits"] == 0);
  CHECK(after["misses"] == 0);
  CHECK(after["entries"] == before["entries"]);  // only the statistics
  CHECK(opforge({"cache", "verify", "--zero", "--cache-dir", c.root}).rc == 2);
}

TEST_CASE("OPFORGE_CACHE_DISABLE compiles without the cache; --recache overwrites entries") {
  TempDir dir;
  const std::string rule = starter_rule(dir);
  const std::string cache = dir / "cache";
  auto build = [&](std::vector<std::string> extra, std::map<std::string, std::string> env) {
    std::vector<std::string> args = {"build",   "--registry", dir / "reg", "--cache-dir", cache,
                                     "--rules", rule,         "--only",    "tool_rule",   "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return opforge(args, env);
  };
  const Result off = build({}, {{"OPFORGE_CACHE_DISABLE", "1"}});
  REQUIRE_MESSAGE(off.rc == 0, off.all());
  const nlohmann::json j = parse_json(off);
  CHECK(j["hits"] == 0);
  CHECK(j["cache_mode"] == "disabled");
  CHECK_FALSE(fs::exists(cache));  // neither read nor written
  CHECK(contains(opforge({"list", "--registry", dir / "reg"}).out, "tool_rule"));

  const Result re = build({"--recache"}, {});
  REQUIRE_MESSAGE(re.rc == 0, re.all());
  CHECK(parse_json(re)["hits"] == 0);
  const Result hit = build({}, {});
  REQUIRE_MESSAGE(hit.rc == 0, hit.all());
  CHECK(parse_json(hit)["misses"] == 0);  // --recache stored every entry
}

// The command table as --help prints it: every command and its options.
std::map<std::string, std::vector<std::string>> table_from_help() {
  std::map<std::string, std::vector<std::string>> out;
  const std::regex cmd(R"(  ([a-z]+) +\S.*)"), opt(R"(  (--[a-z0-9-]+).*)");
  for (const auto& l : lines_of(opforge({"--help"}).out)) {
    std::smatch m;
    if (std::regex_match(l, m, cmd)) out[m[1]];
  }
  for (auto& [name, opts] : out) {
    for (const auto& l : lines_of(opforge({name, "--help"}).out)) {
      std::smatch m;
      if (std::regex_match(l, m, opt)) opts.push_back(m[1]);
    }
  }
  return out;
}

// Runs the completion function on `words` (the last one being completed); the candidates.
std::vector<std::string> complete(const std::string& script,
                                  const std::vector<std::string>& words) {
  TempDir dir;
  std::ofstream(dir / "c.bash") << script;
  std::string words_text;
  for (const auto& w : words) words_text += "'" + w + "' ";
  std::ofstream(dir / "drive.bash")
      << "source " << (dir / "c.bash") << "\nCOMP_WORDS=(" << words_text
      << ")\nCOMP_CWORD=" << words.size() - 1 << "\n_opforge\nprintf '%s\\n' \"${COMPREPLY[@]}\" > "
      << (dir / "out") << "\n";
  CHECK(std::system(("bash " + (dir / "drive.bash")).c_str()) == 0);
  std::vector<std::string> got;
  for (const auto& l : lines_of(slurp(dir / "out"))) {
    if (!l.empty()) got.push_back(l);
  }
  return got;
}

// The options the script offers for `command`: its opts="..." line.
std::set<std::string> script_options(const std::string& script, const std::string& command) {
  const size_t at = script.find("\n    " + command + ")\n");
  if (at == std::string::npos) return {};
  const size_t b = script.find("opts=\"", at), e = script.find('"', b + 6);
  std::istringstream words(script.substr(b + 6, e - b - 6));
  std::set<std::string> out;
  for (std::string w; words >> w;) out.insert(w);
  return out;
}

TEST_CASE("completion bash: valid bash, every command and option of the table, and it completes") {
  const Result r = opforge({"completion", "bash"});
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  TempDir dir;
  std::ofstream(dir / "c.bash") << r.out;
  CHECK(std::system(("bash -n " + (dir / "c.bash")).c_str()) == 0);
  const auto table = table_from_help();
  CHECK(table.size() >= 14);
  CHECK(table.count("completion"));
  for (const auto& [name, opts] : table) {
    CAPTURE(name);
    CHECK(contains(r.out, "\n    " + name + ")\n"));  // its case arm
    CHECK(script_options(r.out, name) == std::set<std::string>(opts.begin(), opts.end()));
  }
  // The first word: every command of the table (and --help).
  const auto first = complete(r.out, {opforge_exe(), ""});
  std::set<std::string> want = {"--help"};
  for (const auto& [name, opts] : table) want.insert(name);
  CHECK(std::set<std::string>(first.begin(), first.end()) == want);
  CHECK(complete(r.out, {opforge_exe(), "bu"}) == std::vector<std::string>{"build"});
  CHECK(complete(r.out, {opforge_exe(), "build", "--jo"}) == std::vector<std::string>{"--jobs"});
  CHECK(complete(r.out, {opforge_exe(), "cache", "con"}) == std::vector<std::string>{"config"});
  // Op names come from the registry the line names.
  const auto ops = complete(
      r.out, {opforge_exe(), "describe", "--registry", test_registry_dir(), "apply_adam_w"});
  CHECK(ops == std::vector<std::string>{"apply_adam_with_amsgrad"});
  // Values: the ISAs, and an option's listed alternatives.
  CHECK(complete(r.out, {opforge_exe(), "bench", "--isa", "avx5"}) ==
        std::vector<std::string>{"avx512", "avx512_bf16"});
  CHECK(complete(r.out, {opforge_exe(), "bench", "--regime", "i"}) ==
        std::vector<std::string>{"idle"});
  CHECK(opforge({"completion", "zsh"}).rc == 2);
}

}  // namespace
}  // namespace opforge::testing
