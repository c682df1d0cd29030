#include "registry/cache/atomic_file.h"

#include <llvm/Support/Error.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace opforge::cache {

void write_file_atomic(const std::string& path, const std::string& bytes, unsigned mode) {
  auto fail = [&](const std::string& what) { return std::runtime_error(path + ": " + what); };
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (!dir.empty()) {
    if (auto ec = llvm::sys::fs::create_directories(dir)) throw fail("mkdir: " + ec.message());
  }
  llvm::SmallString<256> model(dir);
  llvm::sys::path::append(model, ".tmp-%%%%%%%%");
  auto tmp = llvm::sys::fs::TempFile::create(model, mode);
  if (!tmp) throw fail("cannot create temp file: " + llvm::toString(tmp.takeError()));
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(tmp->FD, p, left);
    if (n <= 0) {
      llvm::consumeError(tmp->discard());
      throw fail("write failed");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fchmod(tmp->FD, mode);
  if (auto err = tmp->keep(path)) {
    std::string msg = llvm::toString(std::move(err));
    throw fail("cannot install: " + msg);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace opforge::cache
