// Shared helpers of the CLI tests: run the opforge binary with captured output, scratch
// directories, and Adam inputs as .npy files.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "opforge/npy.hpp"
#include "test_registry.h"

extern char** environ;

namespace opforge::testing {

namespace fs = std::filesystem;

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory under the system temp dir, removed with everything in it at scope end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "opforge-cli-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed: " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return (path_ / rel).string(); }

 private:
  fs::path path_;
};

struct Result {
  int rc = -1;      // exit status; 128 + signal when killed
  std::string out;  // stdout
  std::string err;  // stderr
  std::string all() const { return out + err; }
};

// Runs `opforge args...` (no shell), capturing stdout and stderr; `env` sets (or, with an
// empty value, unsets) environment variables for it.
inline Result opforge(const std::vector<std::string>& args,
                      const std::map<std::string, std::string>& env = {}) {
  TempDir tmp;
  const std::string out_file = tmp / "stdout", err_file = tmp / "stderr";
  std::vector<std::string> words = {opforge_exe()};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> env_words;
  for (char** e = environ; *e; ++e) {
    const std::string w = *e;
    if (!env.count(w.substr(0, w.find('=')))) env_words.push_back(w);
  }
  for (const auto& [name, value] : env) {
    if (!value.empty()) env_words.push_back(name + "=" + value);
  }
  std::vector<char*> envp;
  for (auto& w : env_words) envp.push_back(w.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  Result r;
  if (spawn_rc != 0) {
    FAIL_CHECK("cannot spawn " << argv[0] << ": " << std::strerror(spawn_rc));
    return r;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out_file);
  r.err = slurp(err_file);
  return r;
}

// `opforge args... --registry <test registry>`.
inline Result opforge_reg(std::vector<std::string> args,
                          const std::map<std::string, std::string>& env = {}) {
  args.push_back("--registry");
  args.push_back(test_registry_dir());
  return opforge(args, env);
}

// True when `text` is exactly one non-empty line ending in '\n'.
inline bool one_line(const std::string& text) {
  return text.size() > 1 && text.back() == '\n' && text.find('\n') == text.size() - 1;
}

// Nothing at `dir`, or an empty directory.
inline bool empty_or_absent(const fs::path& dir) {
  return !fs::exists(dir) || (fs::is_directory(dir) && fs::is_empty(dir));
}

// Adam inputs: TF-typical magnitudes, float32.
struct AdamInputs {
  std::map<std::string, std::vector<float>> t;  // var, m, v, grad
  std::vector<int64_t> shape;
  AdamInputs(std::vector<int64_t> shape_, unsigned seed) : shape(std::move(shape_)) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f), small(-0.1f, 0.1f), pos(0.f, 0.01f);
    for (int64_t i = 0; i < n; ++i) {
      t["var"].push_back(u(rng));
      t["m"].push_back(small(rng));
      t["v"].push_back(pos(rng));
      t["grad"].push_back(u(rng));
    }
  }
  // Writes DIR/NAME.npy for each tensor; returns the --in arguments.
  std::vector<std::string> write(const TempDir& dir) const {
    std::vector<std::string> args;
    for (const auto& [name, v] : t) {
      const std::string file = dir / (name + "_in.npy");
      npy::write_atomic(file, npy::from_f32(v, shape));
      args.push_back("--in");
      args.push_back(name + "=" + file);
    }
    return args;
  }
};

// Adam scalars, float32 values: the text the CLI parses is exactly the float the kernel gets.
inline std::map<std::string, float> adam_scalars() {
  return {{"beta1_power", 0.729f}, {"beta2_power", 0.997002999f},
          {"lr", 0.01f},           {"beta1", 0.9f},
          {"beta2", 0.999f},       {"epsilon", 1e-7f}};
}

inline std::vector<std::string> scalar_args(const std::map<std::string, float>& s) {
  std::vector<std::string> args;
  for (const auto& [name, v] : s) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
    args.push_back("--scalar");
    args.push_back(name + "=" + buf);
  }
  return args;
}

inline std::vector<std::string> concat(std::vector<std::string> a,
                                       const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A command's stdout as JSON; a test failure (with the output) when it is not.
inline nlohmann::json parse_json(const Result& r) {
  try {
    return nlohmann::json::parse(r.out);
  } catch (const nlohmann::json::exception& e) {
    FAIL_CHECK("not JSON (" << e.what() << "): " << r.all());
    return nlohmann::json::object();
  }
}

}  // namespace opforge::testing
