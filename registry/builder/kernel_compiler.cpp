#include "registry/builder/kernel_compiler.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Program.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "dsl/table_lookup.h"
#include "registry/builder/schedule_description.h"
#include "registry/cache/atomic_file.h"

namespace opforge::builder {

namespace {

// The scratch directory this thread's Halide compile is writing into, if any.
thread_local const llvm::SmallString<256>* t_writing_in = nullptr;

void write_stderr(const std::string& text) {
  for (size_t off = 0; off < text.size();) {
    const ssize_t w = ::write(STDERR_FILENO, text.data() + off, text.size() - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
}

// Halide writes its outputs (object, assembly, IR) through LLVM streams, and a failed write
// (disk full, a file size limit) ends in report_fatal_error from the stream's destructor, which
// cannot throw: LLVM printed "IO failure on output stream: File too large" and aborted, naming
// no file. While a compile writes into a scratch directory, this names the directory and the
// reason, removes the directory and exits with status 1 instead. Any other fatal error is
// printed as LLVM does, and LLVM then ends the process as it always did.
void on_llvm_fatal_error(void*, const char* reason, bool) {
  const std::string why = reason ? reason : "";
  static const char kIoFailure[] = "IO failure on output stream: ";
  if (t_writing_in && why.rfind(kIoFailure, 0) == 0) {
    write_stderr("opforge: error: " + std::string(*t_writing_in) +
                 ": cannot write the compiler's output: " + why.substr(sizeof(kIoFailure) - 1) +
                 "\n");
    llvm::sys::fs::remove_directories(*t_writing_in);
    ::_exit(1);
  }
  write_stderr("LLVM ERROR: " + why + "\n");
}

// A scratch directory removed on scope exit; LLVM's write failures in it are reported (above).
class ScratchDir {
 public:
  ScratchDir() {
    static std::once_flag installed;
    std::call_once(installed, [] { llvm::install_fatal_error_handler(on_llvm_fatal_error); });
    if (auto ec = llvm::sys::fs::createUniqueDirectory("opforge-build", path_)) {
      throw std::runtime_error("cannot create a scratch directory: " + ec.message());
    }
    t_writing_in = &path_;
  }
  ~ScratchDir() {
    t_writing_in = nullptr;
    llvm::sys::fs::remove_directories(path_);
  }
  std::string file(const std::string& name) const {
    llvm::SmallString<256> p(path_);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }

 private:
  llvm::SmallString<256> path_;
};

std::string find_tool(const char* name) {
  auto p = llvm::sys::findProgramByName(name);
  if (!p) {
    throw std::runtime_error(std::string("opforge build needs '") + name +
                             "' (binutils/gcc) on PATH to link kernels: not found");
  }
  return *p;
}

void run_tool(const std::string& tool, const std::vector<std::string>& args) {
  std::vector<llvm::StringRef> argv{tool};
  for (const auto& a : args) argv.push_back(a);
  std::string err;
  int rc = llvm::sys::ExecuteAndWait(tool, argv, llvm::None, {}, 0, 0, &err);
  if (rc != 0) {
    std::string cmd = tool;
    for (const auto& a : args) cmd += " " + a;
    throw std::runtime_error("link step failed (rc " + std::to_string(rc) + "): " + cmd +
                             (err.empty() ? "" : ": " + err));
  }
}

// Halide prints the loop nest to std::cerr; capture it.
std::string loop_nest_of(Halide::Pipeline p) {
  return with_cerr_captured([&] { p.print_loop_nest(); });
}

}  // namespace

int sweep_scratch_dirs(std::chrono::seconds older_than) {
  llvm::SmallString<256> tmp;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, tmp);
  const auto cutoff = std::chrono::system_clock::now() - older_than;
  int removed = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(tmp, ec), end; it != end && !ec; it.increment(ec)) {
    const std::string name = llvm::sys::path::filename(it->path()).str();
    if (name.rfind("opforge-build-", 0) != 0 && name.rfind("opforge-link-", 0) != 0) continue;
    llvm::sys::fs::file_status st;
    if (llvm::sys::fs::status(it->path(), st) || st.getLastModificationTime() > cutoff) continue;
    if (!llvm::sys::fs::remove_directories(it->path())) ++removed;
  }
  return removed;
}

std::string kernel_artifact_list() {
  return "kernel.so,kernel.o,kernel.h,kernel.stmt,kernel.stmt.html,kernel.s,kernel.ll,"
         "loop_nest.txt,schedule.json@" +
         std::to_string(kScheduleDescriptionVersion);
}

cache::Entry compile_kernel(const Halide::Pipeline& pipeline,
                            const std::vector<Halide::Argument>& args, const std::string& entry,
                            const Halide::Target& target, const std::string& runtime_so) {
  ScratchDir dir;
  Halide::Pipeline p = pipeline;
  Halide::Module m = p.compile_to_module(args, entry, target);
  dsl::link_table_lookups(m);  // the permutes' bitcode, where the kernel looks up tables
  const std::map<Halide::OutputFileType, std::string> outputs = {
      {Halide::OutputFileType::object, dir.file("kernel.o")},
      {Halide::OutputFileType::c_header, dir.file("kernel.h")},
      {Halide::OutputFileType::stmt, dir.file("kernel.stmt")},
      {Halide::OutputFileType::stmt_html, dir.file("kernel.stmt.html")},
      {Halide::OutputFileType::assembly, dir.file("kernel.s")},
      {Halide::OutputFileType::llvm_assembly, dir.file("kernel.ll")},
  };
  m.compile(outputs);

  // ld, not g++: 5 ms instead of 70. The kernel needs nothing but the Halide runtime.
  llvm::SmallString<256> rt_dir(runtime_so);
  llvm::sys::path::remove_filename(rt_dir);
  run_tool(find_tool("ld"), {"-shared", "-o", dir.file("kernel.so"), dir.file("kernel.o"),
                             "-L" + std::string(rt_dir), std::string("-l:") + kRuntimeLibrary,
                             "-rpath", "$ORIGIN/../lib", "-z", "noexecstack"});

  cache::Entry e;
  for (const char* name : {"kernel.so", "kernel.o", "kernel.h", "kernel.stmt", "kernel.stmt.html",
                           "kernel.s", "kernel.ll"}) {
    e.artifacts[name] = cache::read_file(dir.file(name));
  }
  e.artifacts["loop_nest.txt"] = loop_nest_of(p);
  e.artifacts["schedule.json"] = describe_schedule(p).dump(1);
  return e;
}

LinkRuntime::LinkRuntime(const cache::Entry& runtime) {
  llvm::SmallString<128> scratch;
  if (auto ec = llvm::sys::fs::createUniqueDirectory("opforge-link", scratch)) {
    throw std::runtime_error("cannot create a scratch directory: " + ec.message());
  }
  dir_ = std::string(scratch);
  path_ = dir_ + "/" + kRuntimeLibrary;
  try {
    cache::write_file_atomic(path_, runtime.artifacts.at("runtime.so"), 0755);
  } catch (...) {
    llvm::sys::fs::remove_directories(dir_);
    throw;
  }
}

LinkRuntime::~LinkRuntime() {
  llvm::sys::fs::remove_directories(dir_);
}

cache::Entry compile_runtime() {
  ScratchDir dir;
  Halide::compile_standalone_runtime(dir.file("runtime.o"), Halide::Target(kRuntimeTarget));
  run_tool(find_tool("cc"), {"-shared", "-o", dir.file("runtime.so"), dir.file("runtime.o"),
                             std::string("-Wl,-soname,") + kRuntimeLibrary, "-Wl,-z,noexecstack",
                             "-lpthread", "-ldl", "-lm"});
  cache::Entry e;
  e.artifacts["runtime.so"] = cache::read_file(dir.file("runtime.so"));
  return e;
}

std::string with_cerr_captured(const std::function<void()>& fn) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  try {
    fn();
  } catch (...) {
    std::cerr.rdbuf(old);
    throw;
  }
  std::cerr.rdbuf(old);
  return captured.str();
}

}  // namespace opforge::builder
