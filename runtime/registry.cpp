// The registry: opening index.json, descriptors, variant selection, loading kernels.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "opforge/runtime.hpp"
#include "opforge/sha256.h"
#include "opforge/suggest.hpp"
#include "opforge/user_dirs.h"
#include "registry/format/bounded_read.h"
#include "registry/format/file_lock.h"
#include "runtime/halide_alloc.h"
#include "runtime/kernel_call.h"
#include "runtime/shape_rules.h"
#include "runtime/thread_pool.h"
#include "runtime/views.h"

namespace opforge {

using registry::Descriptor;
using registry::DType;
using registry::KernelArg;

namespace {

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}

// A registry's JSON: a regular file inside it (no symlink), of bounded size.
std::string read_text(const std::string& path) {
  try {
    return registry::read_regular_file(path, registry::kJsonLimits);
  } catch (const std::runtime_error& e) {
    throw Error(e.what());
  }
}

// A library whose bytes are not the ones the registry recorded is never dlopened: a flipped
// byte in a kernel crashed the process or gave wrong results with rc 0. Checked once per
// variant per process (load() keeps the Kernel); "" (registries from before) is not checked.
void check_digest(const std::string& path, const std::string& want, const std::string& what) {
  if (want.empty()) return;
  std::string got;
  try {
    got = registry::sha256_file_hex(path);
  } catch (const std::runtime_error& e) {
    throw Error(e.what());
  }
  if (got != want) {
    throw Error(path + ": cannot load " + what + ": its SHA-256 " + got.substr(0, 12) +
                "... is not the " + want.substr(0, 12) +
                "... the registry recorded: the file was damaged or replaced; rebuild the "
                "registry (opforge build)");
  }
}

// `rel` (a descriptor's kernel file, the index's runtime library) is a regular file inside the
// registry `dir`: neither it nor a directory on the way is a symbolic link, so dlopen never
// follows a link out of the registry (a library's constructors run before any other check).
void check_inside(const std::string& dir, const std::string& rel, const std::string& what) {
  std::string path = dir;
  size_t at = 0;
  for (;;) {
    const size_t slash = rel.find('/', at);
    const bool last = slash == std::string::npos;
    path += "/" + rel.substr(at, last ? std::string::npos : slash - at);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      throw Error(dir + "/" + rel + ": " + what + ": " + path + ": " + std::strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
      throw Error(dir + "/" + rel + ": " + what + ": " + path +
                  " is a symbolic link; registry files are not followed out of the registry");
    }
    if (last && !S_ISREG(st.st_mode)) {
      throw Error(path + ": " + what + ": it is " + registry::file_kind(st.st_mode) +
                  ", not a regular file");
    }
    if (last) return;
    at = slash + 1;
  }
}

std::string canonical_attr(const registry::Attr& a, const std::string& text,
                           const std::string& op) {
  try {
    return registry::canonical_attr_value(a.type, a.choices, text);
  } catch (const std::invalid_argument& e) {
    throw Error("op '" + op + "': attr '" + a.name + "' " + e.what());
  }
}

// The kernel's own metadata must say what the descriptor says: a stale or hand-edited
// descriptor is caught at load time, not by a crash in the call.
void check_metadata(const Descriptor& d, const halide_filter_metadata_t* md) {
  const std::string where = "registry variant " + d.variant + ": kernel metadata";
  if (md->num_arguments != static_cast<int>(d.kernel.args.size())) {
    throw Error(where + " has " + std::to_string(md->num_arguments) +
                " arguments, descriptor lists " + std::to_string(d.kernel.args.size()));
  }
  for (size_t k = 0; k < d.kernel.args.size(); ++k) {
    const auto& want = d.kernel.args[k];
    const halide_filter_argument_t& got = md->arguments[k];
    const int kind = want.kind == KernelArg::Kind::input_scalar ? halide_argument_kind_input_scalar
                     : want.kind == KernelArg::Kind::input_buffer
                         ? halide_argument_kind_input_buffer
                         : halide_argument_kind_output_buffer;
    const halide_type_t t = halide_type_of(want.dtype);
    if (want.name != got.name || kind != got.kind || want.dims != got.dimensions ||
        t.code != got.type.code || t.bits != got.type.bits) {
      throw Error(where + ": argument " + std::to_string(k) + " is '" + got.name +
                  "', descriptor says '" + want.name + "' (kind, type and dims must match too)");
    }
  }
}

// " (hidden by OPFORGE_CPU_FEATURES=...)" when the CPU has `f` and the mask hides it, so that a
// "needs CPU feature" error under a mask does not read as a hardware limit.
std::string mask_note(const std::string& f) {
  const CpuFeatures& c = cpu_features();
  if (std::find(c.host.begin(), c.host.end(), f) == c.host.end()) return "";
  return " (hidden by OPFORGE_CPU_FEATURES=" + c.mask + ")";
}

}  // namespace

std::map<std::string, std::string> parse_attr_list(const std::string& text) {
  std::map<std::string, std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error("attr '" + item + "': expected NAME=VALUE");
    }
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

std::unique_ptr<Registry> Registry::open(const std::string& dir_in,
                                         const std::optional<std::string>& user_dir) {
  std::unique_ptr<Registry> r(new Registry());
  r->dir_ = dir_in.empty() ? default_dir() : dir_in;
  r->user_dir_ = user_dir ? *user_dir : default_user_dir();
  if (r->dir_.empty()) throw Error("no registry directory given and OPFORGE_REGISTRY is unset");
  const std::string path = r->dir_ + "/index.json";
  struct stat st {};
  if (::stat(r->dir_.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    throw Error("op registry " + r->dir_ + ": not a directory");
  }
  // The common first-run mistake gets the command that fixes it, not "cannot open".
  if (::stat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
    const std::string build =
        r->dir_ == default_dir() ? "opforge build" : "opforge build --registry " + r->dir_;
    throw Error("no op registry at " + r->dir_ + " (index.json missing); run '" + build +
                "' to create it");
  }
  const std::string text = read_text(path);
  try {
    r->generations_.push_back(
        std::make_unique<const registry::Index>(registry::index_from_json(text, path)));
  } catch (const registry::FormatError& e) {
    throw Error(e.what());
  }
  r->index_text_digest_ = registry::sha256_hex(text);
  r->index_.store(r->generations_.back().get());
  if (!r->user_dir_.empty() && real_path(r->user_dir_) == real_path(r->dir_)) r->user_dir_.clear();
  return r;
}

std::string Registry::default_user_dir() {
  return registry::user_registry_dir();
}

bool Registry::has(const std::string& name, bool variant) const {
  for (const auto& e : index().variants) {
    if ((variant ? e.variant : e.op) == name) return true;
  }
  return false;
}

Registry* Registry::user_registry(bool reread) const {
  std::lock_guard<std::recursive_mutex> lock(*mu_);
  if (user_dir_.empty()) return nullptr;
  if (user_) {
    if (reread) {
      try {
        user_->refresh_index();
      } catch (const Error& e) {
        user_error_ = e.what();
        return nullptr;
      }
    }
    return user_.get();
  }
  struct stat st {};
  if (::stat((user_dir_ + "/index.json").c_str(), &st) != 0) return nullptr;  // none built yet
  try {
    std::unique_ptr<Registry> u = open(user_dir_, std::string());
    // Its kernels bind to the Halide runtime loaded first (by soname): another build's
    // runtime could differ in layout, so its kernels are not loaded beside this one.
    if (u->index().runtime_sha256 != index().runtime_sha256) {
      user_error_ = "user registry " + user_dir_ +
                    " was built by another opforge (its Halide runtime differs from the op "
                    "library's); rebuild its rules with this opforge";
      return nullptr;
    }
    user_ = std::move(u);
    user_error_.clear();
  } catch (const Error& e) {
    user_error_ = e.what();
  }
  return user_.get();
}

Registry* Registry::owner(const std::string& name, bool variant) const {
  auto self = const_cast<Registry*>(this);
  if (has(name, variant)) return self;
  for (bool reread : {false, true}) {
    Registry* u = user_registry(reread);
    if (u && u->has(name, variant)) return u;
  }
  return self;
}

std::string Registry::unknown_op_note() const {
  std::string note = " (registry " + dir_;
  if (!user_dir_.empty()) note += ", user registry " + user_dir_;
  note += ")";
  if (!user_error_.empty()) note += "; the user registry is not read: " + user_error_;
  return note;
}

std::vector<std::string> Registry::user_ops() const {
  std::vector<std::string> out;
  if (Registry* u = user_registry(true)) {  // a rule built meanwhile shows
    for (const auto& op : u->ops()) {
      if (!has(op, false)) out.push_back(op);
    }
  }
  return out;
}

// How long a reader that found the registry changing waits for the build installing it.
constexpr std::chrono::seconds kInstallWait(60);

bool Registry::refresh_index() const {
  std::lock_guard<std::recursive_mutex> lock(*mu_);
  const std::string path = dir_ + "/index.json";
  // A build installs descriptors and kernels first and index.json last, under this lock.
  registry::wait_until_unlocked(path, kInstallWait);
  std::string digest;
  registry::Index fresh;
  try {
    const std::string text = read_text(path);
    digest = registry::sha256_hex(text);
    if (digest == index_text_digest_) return false;
    fresh = registry::index_from_json(text, path);
  } catch (const std::exception&) {
    return false;  // unreadable now: the error that brought us here is the one to report
  }
  if (runtime_ && fresh.runtime_sha256 != index().runtime_sha256) {
    throw Error("registry " + dir_ +
                " was rebuilt with another Halide runtime after this process loaded its "
                "runtime; restart the process to use the new registry");
  }
  generations_.push_back(std::make_unique<const registry::Index>(std::move(fresh)));
  index_text_digest_ = digest;
  index_.store(generations_.back().get());
  descriptors_.clear();
  selected_.clear();
  return true;
}

template <class F>
decltype(auto) Registry::retrying(F&& f) const {
  try {
    return f();
  } catch (const Error&) {
    if (!refresh_index()) throw;
  }
  return f();
}

Registry::~Registry() {
  loaded_.clear();
  // Kernels and the runtime stay mapped: unloading a Halide runtime with live worker
  // threads is not safe, and the process is usually about to end.
}

std::vector<std::string> Registry::ops() const {
  std::set<std::string> s;
  for (const auto& e : index().variants) s.insert(e.op);
  for (const auto& op : user_ops()) s.insert(op);
  return {s.begin(), s.end()};
}

Descriptor Registry::descriptor(const std::string& variant) const {
  const Registry* r = owner(variant, true);
  return r->retrying([&] { return r->read_descriptor(variant); });
}

Descriptor Registry::read_descriptor(const std::string& variant) const {
  std::lock_guard<std::recursive_mutex> lock(*mu_);
  auto kept = descriptors_.find(variant);
  if (kept != descriptors_.end()) return kept->second;
  for (const auto& e : index().variants) {
    if (e.variant != variant) continue;
    const std::string path = dir_ + "/" + e.descriptor;
    try {
      const std::string text = read_text(path);
      if (!e.sha256.empty() && registry::sha256_hex(text) != e.sha256) {
        throw Error(path +
                    ": its SHA-256 is not the one the index recorded: the descriptor "
                    "was damaged or edited; rebuild the registry (opforge build)");
      }
      Descriptor d = registry::descriptor_from_json(text, path);
      if (d.variant != variant || d.op != e.op) {
        throw Error(path + ": describes " + d.variant + ", the index says " + variant);
      }
      return descriptors_[variant] = std::move(d);
    } catch (const registry::FormatError& err) {
      throw Error(err.what());
    }
  }
  throw Error("registry " + dir_ + " has no variant " + variant);
}

std::vector<Descriptor> Registry::variants(const std::string& op) const {
  const Registry* r = owner(op, false);
  return r->retrying([&] { return r->variants_of(op); });
}

std::vector<Descriptor> Registry::variants_of(const std::string& op) const {
  if (!registry::is_valid_op_name(op)) {
    throw Error("'" + op + "' is not a valid op name (^[a-z][a-z0-9_]{0,63}$)");
  }
  std::vector<Descriptor> out;
  for (const auto& e : index().variants) {
    if (e.op == op) out.push_back(read_descriptor(e.variant));
  }
  if (out.empty()) {
    throw Error("unknown op '" + op + "'" + did_you_mean(op, ops()) + unknown_op_note());
  }
  // fp32 storage first: callers describing an op by its first variant see the fp32 form.
  std::stable_sort(out.begin(), out.end(), [](const Descriptor& a, const Descriptor& b) {
    return (storage_tag(a) == "f32") > (storage_tag(b) == "f32");
  });
  return out;
}

void* Registry::runtime_handle() {
  std::lock_guard<std::recursive_mutex> lock(*mu_);
  if (runtime_) return runtime_;
  // Kernels name the runtime by soname, so every registry's kernels in a process bind to the
  // first one loaded: reuse it, so thread count and error handler act on the pool in use.
  const registry::Index& idx = index();
  const std::string path = dir_ + "/" + idx.runtime_library;
  const std::string soname = path.substr(path.find_last_of('/') + 1);
  if (access(path.c_str(), R_OK) != 0) throw Error(path + ": Halide runtime library missing");
  check_inside(dir_, idx.runtime_library, "cannot load the Halide runtime");
  void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) {
    check_digest(path, idx.runtime_sha256, "the Halide runtime");
    h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) throw Error(path + ": cannot load the Halide runtime: " + dlerror());
  // Errors become codes with a message, not an abort() of the caller's process.
  using SetHandler = void (*)(void (*)(void*, const char*));
  auto set_handler = reinterpret_cast<SetHandler>(dlsym(h, "halide_set_error_handler"));
  if (!set_handler) throw Error(path + ": not a Halide runtime (no halide_set_error_handler)");
  set_handler(capture_halide_error);
  // Heap buffers of kernels from a per-thread cache of freed blocks (halide_alloc.h), unless
  // OPFORGE_HALIDE_MALLOC=system. Free first: it hands what it did not allocate to the default.
  const char* alloc = std::getenv("OPFORGE_HALIDE_MALLOC");
  if (!alloc || std::string(alloc) != "system") {
    using SetFree = halide_free_t (*)(halide_free_t);
    using SetMalloc = halide_malloc_t (*)(halide_malloc_t);
    auto set_free = reinterpret_cast<SetFree>(dlsym(h, "halide_set_custom_free"));
    auto set_malloc = reinterpret_cast<SetMalloc>(dlsym(h, "halide_set_custom_malloc"));
    if (set_free && set_malloc) {
      halide_alloc::set_previous_free(set_free(halide_alloc::release));
      set_malloc(halide_alloc::allocate);
    }
  }
  // Parallel loops on the caller's OpenMP team unless OPFORGE_THREAD_POOL=halide; serial in a
  // forked child with either pool (thread_pool.h): Halide's too, whose mutex a worker may hold
  // at the fork, locked for good in the child (its fork test hung once under a loaded ctest).
  using thread_pool::ParFor;
  auto set_par_for = reinterpret_cast<ParFor (*)(ParFor)>(dlsym(h, "halide_set_custom_do_par_for"));
  if (!set_par_for) throw Error(path + ": Halide runtime lacks halide_set_custom_do_par_for");
  if (thread_pool::from_environment() == thread_pool::Kind::openmp)
    set_par_for(thread_pool::openmp_do_par_for);
  thread_pool::run_serially_after_fork(set_par_for);
  runtime_ = h;
  return h;
}

void Registry::set_num_threads(int n) {
  if (n < 0)
    throw Error("set_num_threads: " + std::to_string(n) + " threads (0 = Halide's default)");
  void* h = runtime_handle();
  auto shutdown = reinterpret_cast<void (*)()>(dlsym(h, "halide_shutdown_thread_pool"));
  auto set = reinterpret_cast<int (*)(int)>(dlsym(h, "halide_set_num_threads"));
  if (!shutdown || !set) throw Error("Halide runtime lacks thread-pool controls");
  // halide_set_num_threads alone is lazy: existing workers keep taking jobs. Calls running
  // now finish first, and calls made meanwhile wait (thread_pool_mutex).
  std::unique_lock<std::shared_mutex> pool(thread_pool_mutex());
  shutdown();
  set(n);
  thread_pool::set_openmp_threads(n);
}

std::string storage_tag(const Descriptor& d) {
  auto narrow = [](DType t) { return t == DType::f16 || t == DType::bf16; };
  DType grad = DType::f32;
  std::optional<DType> model, state;
  std::string quant_map;    // of the 8-bit states, if any
  bool first_state = true;  // the parameter (or fp32 master): never narrowed
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::gradient && grad == DType::f32) grad = in.dtype;
    if (in.role != registry::Input::Role::state) continue;
    if (in.dtype == DType::u8 && quant_map.empty()) quant_map = in.quant_map;
    if (in.name == "model" && narrow(in.dtype)) {
      model = in.dtype;
    } else if (!first_state && narrow(in.dtype)) {
      state = in.dtype;
    }
    first_state = false;
  }
  if (!quant_map.empty()) {
    return registry::quantized_storage_tag(grad, model, quant_map.rfind("linear", 0) == 0,
                                           d.shape.block);
  }
  return registry::storage_tag(grad, model, state);
}

namespace {

// What a selection asks for: the declaration's attr defaults, overridden by the caller's
// (canonicalized), and a tensor storage.
struct Wanted {
  std::map<std::string, std::string> attrs;
  std::string storage;
};

// "storage" (f32, bf16m, f16m, ...) is not a declared attr: it picks among the variants'
// tensor storage (storage_tag). Without it, fp32 storage where the op has it. "algorithm"
// picks an NN op's algorithm by name.
Wanted wanted_attrs(const std::vector<Descriptor>& all, const std::string& op,
                    const std::map<std::string, std::string>& attrs, std::string* algorithm) {
  Wanted w;
  for (const auto& a : all.front().attrs) w.attrs[a.name] = a.default_value;
  for (const auto& [name, text] : attrs) {
    if (name == "storage" && !all.front().find_attr(name)) {
      w.storage = text;
      continue;
    }
    if (name == "algorithm" && !all.front().find_attr(name) && all.front().shape.named_dims) {
      *algorithm = text;
      continue;
    }
    const registry::Attr* a = all.front().find_attr(name);
    if (!a) {
      std::vector<std::string> names;
      for (const auto& x : all.front().attrs) names.push_back(x.name);
      throw Error("op '" + op + "' has no attr '" + name + "'" + did_you_mean(name, names));
    }
    w.attrs[name] = canonical_attr(*a, text, op);
  }
  if (!algorithm->empty()) {
    std::set<std::string> names;
    for (const auto& d : all) names.insert(d.algorithm.name);
    if (!names.count(*algorithm)) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw Error("op '" + op + "' has no algorithm '" + *algorithm + "'" +
                  did_you_mean(*algorithm, {names.begin(), names.end()}) +
                  (list.empty() ? " (it has one, unnamed)" : " (it has " + list + ")"));
    }
  }
  if (w.storage.empty()) {
    for (const auto& d : all) {
      if (storage_tag(d) == "f32") w.storage = "f32";
    }
  }
  return w;
}

// The variants (moved out of `all`) with the wanted attrs, storage and algorithm.
std::vector<Descriptor> matching_variants(std::vector<Descriptor>& all, const Wanted& wanted,
                                          const std::string& algorithm, const std::string& op) {
  const std::string& storage = wanted.storage;
  std::vector<Descriptor> matching;
  for (auto& d : all) {
    if (d.attr_values() == wanted.attrs && (storage.empty() || storage_tag(d) == storage) &&
        (algorithm.empty() || d.algorithm.name == algorithm))
      matching.push_back(std::move(d));
  }
  if (matching.empty()) {
    std::string w;
    for (const auto& [k, v] : wanted.attrs) w += (w.empty() ? "" : ",") + k + "=" + v;
    if (!storage.empty()) w += (w.empty() ? "" : ",") + std::string("storage=") + storage;
    if (!algorithm.empty()) w += (w.empty() ? "" : ",") + std::string("algorithm=") + algorithm;
    throw Error("op '" + op + "' has no registered variant with attrs " + w);
  }
  return matching;
}

// Of the matching variants, those this CPU runs (or those of the forced ISA), best first.
std::vector<Descriptor> runnable_variants(std::vector<Descriptor>& matching, const std::string& op,
                                          const std::string& isa_in, bool need_cpu) {
  const char* env = std::getenv("OPFORGE_ISA");
  const std::string isa = !isa_in.empty() ? isa_in : (env && *env ? env : "");
  std::vector<Descriptor> out;
  for (auto& d : matching) {
    bool ok = true;
    std::string missing;
    for (const auto& f : d.target.cpu_features) {
      if (!cpu_supports(f)) ok = false, missing = f;
    }
    // A forced ISA can have several variants (a hand schedule and its autoscheduled twin):
    // the highest priority among them wins, as without a forced ISA.
    if (!isa.empty() && d.target.isa == isa) {
      if (!ok && need_cpu) {
        throw Error("op '" + op + "': ISA " + isa + " needs CPU feature " + missing +
                    mask_note(missing));
      }
      out.push_back(std::move(d));
    } else if (isa.empty() && ok) {
      out.push_back(std::move(d));
    }
  }
  if (out.empty() && isa.empty() && !need_cpu) out = std::move(matching);
  if (out.empty()) {
    const std::string& mask = cpu_features().mask;
    if (isa.empty()) {
      throw Error("op '" + op + "': no variant runs on this CPU" +
                  (mask.empty() ? "" : " (OPFORGE_CPU_FEATURES=" + mask + ")"));
    }
    // A forced ISA: name the ones these variants have (avx512_bf16 holds a few ops only).
    std::set<std::string> isas;
    for (const auto& d : matching) isas.insert(d.target.isa);
    std::string has;
    for (const auto& i : isas) has += (has.empty() ? "" : ", ") + i;
    throw Error("op '" + op + "': no variant for ISA '" + isa + "'" +
                did_you_mean(isa, {isas.begin(), isas.end()}) + "; its ISAs: " + has);
  }
  // Best first: the algorithm's priority (NN ops), then the ISA's.
  std::stable_sort(out.begin(), out.end(), [](const Descriptor& a, const Descriptor& b) {
    if (a.algorithm.priority != b.algorithm.priority)
      return a.algorithm.priority > b.algorithm.priority;
    return a.target.priority > b.target.priority;
  });
  return out;
}

}  // namespace

std::vector<Descriptor> Registry::candidates(const std::string& op,
                                             const std::map<std::string, std::string>& attrs,
                                             const std::string& isa_in, std::string* algorithm,
                                             bool need_cpu) const {
  std::vector<Descriptor> all = variants_of(op);
  const Wanted wanted = wanted_attrs(all, op, attrs, algorithm);
  std::vector<Descriptor> matching = matching_variants(all, wanted, *algorithm, op);
  return runnable_variants(matching, op, isa_in, need_cpu);
}

namespace {

// What a selection depends on: the op, attrs, the forced ISA ($OPFORGE_ISA when none), the CPU
// feature mask, and the tensors' names, dtypes and shapes and the scalars (shape rules read
// them). Their data pointers do not count.
std::string selection_key(const std::string& op, const std::map<std::string, std::string>& attrs,
                          const std::string& isa, const TensorView* tensors, size_t n_tensors,
                          const ScalarView* scalars, size_t n_scalars) {
  const char* env = std::getenv("OPFORGE_ISA");
  std::string k = op + '\n' + isa + '\n' + (env ? env : "") + '\n' + cpu_features().mask + '\n';
  for (const auto& [name, value] : attrs) k += name + '=' + value + ',';
  k += '\n';
  for (size_t i = 0; i < n_tensors; ++i) {
    k += std::string(tensors[i].name) + ':' + std::to_string(static_cast<int>(tensors[i].dtype));
    for (int d = 0; d < tensors[i].rank; ++d) k += ',' + std::to_string(tensors[i].shape[d]);
    k += ';';
  }
  k += '\n';
  char value[32];
  for (size_t i = 0; i < n_scalars; ++i) {
    std::snprintf(value, sizeof value, "%.17g", scalars[i].value);
    k += std::string(scalars[i].name) + '=' + value + ';';
  }
  return k;
}

}  // namespace

Kernel* Registry::selected(const std::string& key) const {
  std::lock_guard<std::recursive_mutex> lock(*mu_);
  auto it = selected_.find(key);
  return it == selected_.end() ? nullptr : it->second;
}

Kernel& Registry::remember(const std::string& key, Kernel& k) const {
  std::lock_guard<std::recursive_mutex> lock(*mu_);
  selected_[key] = &k;
  return k;
}

Kernel& Registry::select(const std::string& op, const std::map<std::string, std::string>& attrs,
                         const std::string& isa) {
  if (Registry* r = owner(op, false); r != this) return r->select(op, attrs, isa);
  const std::string key = selection_key(op, attrs, isa, nullptr, 0, nullptr, 0) + "\nno shapes";
  if (Kernel* k = selected(key)) return *k;
  Kernel& k = retrying([&]() -> Kernel& {
    std::string algorithm;
    std::vector<Descriptor> c = candidates(op, attrs, isa, &algorithm);
    // Without shapes, an algorithm that applies to every shape.
    for (const auto& d : c) {
      if (d.algorithm.applies_when.empty()) return load_descriptor(d);
    }
    return load_descriptor(c.front());
  });
  return remember(key, k);
}

Descriptor Registry::choose(const std::string& op, const std::map<std::string, std::string>& attrs,
                            const std::string& isa) const {
  if (Registry* r = owner(op, false); r != this) return r->choose(op, attrs, isa);
  return retrying([&] {
    std::string algorithm;
    std::vector<Descriptor> c = candidates(op, attrs, isa, &algorithm, /*need_cpu=*/false);
    // As select(): without shapes, an algorithm that applies to every shape.
    for (auto& d : c) {
      if (d.algorithm.applies_when.empty()) return std::move(d);
    }
    return std::move(c.front());
  });
}

Kernel& Registry::select(const std::string& op, const std::map<std::string, std::string>& attrs,
                         const std::vector<Tensor>& tensors,
                         const std::map<std::string, double>& scalars, const std::string& isa) {
  const Views v(tensors, scalars);
  return select(op, attrs, v.tensors.data(), v.tensors.size(), v.scalars.data(), v.scalars.size(),
                isa);
}

Kernel& Registry::select(const std::string& op, const std::map<std::string, std::string>& attrs,
                         const TensorView* tensors, size_t n_tensors, const ScalarView* scalars,
                         size_t n_scalars, const std::string& isa) {
  if (Registry* r = owner(op, false); r != this)
    return r->select(op, attrs, tensors, n_tensors, scalars, n_scalars, isa);
  const std::string key = selection_key(op, attrs, isa, tensors, n_tensors, scalars, n_scalars);
  if (Kernel* k = selected(key)) return *k;
  Kernel& k = retrying([&]() -> Kernel& {
    std::string algorithm;
    std::vector<Descriptor> c = candidates(op, attrs, isa, &algorithm);
    if (!c.front().shape.named_dims) return load_descriptor(c.front());
    std::map<std::string, const TensorView*> by_name;
    for (size_t t = 0; t < n_tensors; ++t) by_name[tensors[t].name] = &tensors[t];
    std::map<std::string, double> scalar_map;
    for (size_t t = 0; t < n_scalars; ++t) scalar_map[scalars[t].name] = scalars[t].value;
    const BoundShapes b = bind_shapes(c.front(), by_name, scalar_map);
    std::string why;
    for (const auto& d : c) {
      const std::string no = why_not_applicable(d, b);
      if (no.empty()) return load_descriptor(d);
      if (why.find(no) == std::string::npos) why += (why.empty() ? "" : "; ") + no;
    }
    throw Error("op '" + op + "': " + (algorithm.empty() ? "no algorithm applies: " : "") + why);
  });
  return remember(key, k);
}

Kernel& Registry::load(const std::string& variant) {
  if (Registry* r = owner(variant, true); r != this) return r->load(variant);
  return retrying([&]() -> Kernel& { return load_variant(variant); });
}

Kernel& Registry::load_variant(const std::string& variant) {
  std::lock_guard<std::recursive_mutex> lock(*mu_);
  bool known = false;
  std::vector<std::string> ids;
  for (const auto& e : index().variants) {
    known = known || e.variant == variant;
    ids.push_back(e.variant);
  }
  if (!known) {
    throw Error("registry " + dir_ + " has no variant '" + variant + "'" +
                did_you_mean(variant, ids));
  }
  const Descriptor d = read_descriptor(variant);
  for (const auto& f : d.target.cpu_features) {
    if (!cpu_supports(f)) {
      throw Error("variant " + variant + " (ISA " + d.target.isa + ") needs CPU feature " + f +
                  mask_note(f));
    }
  }
  return load_descriptor(d);
}

Kernel& Registry::load_descriptor(const Descriptor& d) {
  std::lock_guard<std::recursive_mutex> lock(*mu_);
  auto it = loaded_.find(d.variant);
  if (it != loaded_.end()) {
    const registry::Kernel& have = it->second->descriptor().kernel;
    if (have.file == d.kernel.file && have.sha256 == d.kernel.sha256) return *it->second;
    // Rebuilt meanwhile (an edited rule): the new kernel from now on; the old one stays
    // loaded for the references handed out.
    retired_.push_back(std::move(it->second));
    loaded_.erase(it);
  }

  const std::string path = dir_ + "/" + d.kernel.file;
  check_inside(dir_, d.kernel.file, "cannot load kernel");
  check_digest(path, d.kernel.sha256, "kernel " + d.variant);
  return *(loaded_[d.variant] = open_kernel(d, path));
}

Kernel& Registry::load_file(const Descriptor& d, const std::string& path) {
  std::lock_guard<std::recursive_mutex> lock(*mu_);
  auto it = files_.find(path);
  if (it != files_.end()) return *it->second;
  for (const auto& f : d.target.cpu_features) {
    if (!cpu_supports(f)) {
      throw Error(path + ": variant " + d.variant + " (ISA " + d.target.isa +
                  ") needs CPU feature " + f + mask_note(f));
    }
  }
  if (!d.kernel.sha256.empty()) check_digest(path, d.kernel.sha256, "kernel " + d.variant);
  return *(files_[path] = open_kernel(d, path));
}

std::unique_ptr<Kernel> Registry::open_kernel(const Descriptor& d, const std::string& path) {
  runtime_handle();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw Error(path + ": cannot load kernel: " + dlerror());
  void* argv_fn = dlsym(h, (d.kernel.entry + "_argv").c_str());
  auto md_fn = reinterpret_cast<const halide_filter_metadata_t* (*)()>(
      dlsym(h, (d.kernel.entry + "_metadata").c_str()));
  if (!argv_fn || !md_fn) throw Error(path + ": missing entry " + d.kernel.entry + "_argv");
  check_metadata(d, md_fn());
  return std::unique_ptr<Kernel>(new Kernel(d, h, argv_fn));
}

}  // namespace opforge
