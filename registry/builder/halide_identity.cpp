#include "registry/builder/halide_identity.h"

#include <Halide.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "registry/cache/atomic_file.h"
#include "registry/cache/compile_cache.h"

namespace opforge::builder {

namespace {

std::string loaded_library_path() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&Halide::get_host_target), &info) || !info.dli_fname) {
    throw std::runtime_error("cannot locate the loaded libHalide (dladdr failed)");
  }
  char resolved[PATH_MAX];
  if (!realpath(info.dli_fname, resolved)) return info.dli_fname;
  return resolved;
}

}  // namespace

HalideIdentity halide_identity(const std::string& cache_root) {
  HalideIdentity id;
  id.library_path = loaded_library_path();
  id.version = OPFORGE_HALIDE_VERSION;  // Halide 14's headers define no version macros
  struct stat st {};
  if (stat(id.library_path.c_str(), &st) != 0) {
    throw std::runtime_error(id.library_path + ": cannot stat libHalide");
  }
  const std::string stamp = id.library_path + "|" + std::to_string(st.st_size) + "|" +
                            std::to_string(st.st_mtim.tv_sec) + "." +
                            std::to_string(st.st_mtim.tv_nsec);
  const std::string memo = cache_root + "/halide-id.json";
  if (!cache_root.empty()) {
    std::ifstream in(memo);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("stamp", "") == stamp && j.value("sha256", "").size() == 64) {
      id.sha256 = j["sha256"];
      return id;
    }
  }
  auto h = cache::sha256_file_hex(id.library_path);
  if (!h) throw std::runtime_error(id.library_path + ": cannot read libHalide to hash it");
  id.sha256 = *h;
  // Best effort: a missing memo only costs a re-hash next time.
  if (cache_root.empty()) return id;
  try {
    cache::write_file_atomic(memo, nlohmann::json{{"stamp", stamp}, {"sha256", id.sha256}}.dump());
  } catch (const std::exception&) {
  }
  return id;
}

}  // namespace opforge::builder
