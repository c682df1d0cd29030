#include "opforge/runtime.hpp"

#include <HalideRuntime.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "runtime/shape_rules.h"
#include "runtime/suggest.h"
#include "runtime/views.h"

namespace opforge {

using registry::Descriptor;
using registry::DType;
using registry::Input;
using registry::KernelArg;

namespace {

thread_local std::string halide_error;  // last message from the Halide runtime
constexpr size_t kMaxArgs = 32;

extern "C" void capture_halide_error(void*, const char* msg) {
  halide_error = msg ? msg : "";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool cpuid_f16c() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

std::string canonical_attr(const registry::Attr& a, const std::string& text,
                           const std::string& op) {
  try {
    return registry::canonical_attr_value(a.type, a.choices, text);
  } catch (const std::invalid_argument& e) {
    throw Error("op '" + op + "': attr '" + a.name + "' " + e.what());
  }
}

halide_type_t halide_type_of(DType t) {
  switch (t) {
    case DType::f16:
      return {halide_type_float, 16, 1};
    case DType::bf16:
      return {halide_type_bfloat, 16, 1};
    case DType::f32:
      return {halide_type_float, 32, 1};
    case DType::f64:
      return {halide_type_float, 64, 1};
    case DType::i32:
      return {halide_type_int, 32, 1};
    case DType::i64:
      return {halide_type_int, 64, 1};
  }
  return {halide_type_float, 32, 1};
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

// The most elements one kernel call may take: the descriptor's limit, and never more than a
// halide_dimension_t extent holds.
int64_t call_limit(const Descriptor& d) {
  return std::min<int64_t>(d.shape.max_elements, std::numeric_limits<int32_t>::max());
}

// Slice length when a splittable op's tensors exceed `limit`: the fewest slices, of equal
// length rounded up to 64 elements so that every slice starts as aligned as the first.
int64_t balanced_chunk(int64_t n, int64_t limit) {
  const int64_t step = limit >= 64 ? limit / 64 * 64 : limit;
  const int64_t pieces = (n + step - 1) / step;
  const int64_t even = (n + pieces - 1) / pieces;
  return limit >= 64 ? std::min(step, (even + 63) / 64 * 64) : even;
}

const char* const kNotSplittable =
    "its descriptor's shape.splittable is false: the update reads whole-tensor reductions "
    "such as norms, or indexes rows";

}  // namespace

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

namespace {

// The CPU itself, unmasked.
bool host_supports(const std::string& f) {
  __builtin_cpu_init();
  if (f == "sse4.1") return __builtin_cpu_supports("sse4.1");
  if (f == "sse4.2") return __builtin_cpu_supports("sse4.2");
  if (f == "avx") return __builtin_cpu_supports("avx");
  if (f == "avx2") return __builtin_cpu_supports("avx2");
  if (f == "fma") return __builtin_cpu_supports("fma");
  if (f == "f16c") return cpuid_f16c();
  if (f == "avx512f") return __builtin_cpu_supports("avx512f");
  if (f == "avx512cd") return __builtin_cpu_supports("avx512cd");
  if (f == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (f == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (f == "avx512dq") return __builtin_cpu_supports("avx512dq");
  if (f == "avx512bf16") return __builtin_cpu_supports("avx512bf16");
  return false;  // unknown feature: never assume it
}

// Mask levels. avx512 is generators/isa.cpp's avx512 ISA (Skylake-server AVX-512); the test
// suite checks that each registry ISA's features lie within its level.
const std::map<std::string, std::vector<std::string>>& cpu_levels() {
  static const std::map<std::string, std::vector<std::string>> levels = {
      {"none", {}},
      {"avx2", {"sse4.1", "sse4.2", "avx", "avx2", "fma", "f16c"}},
      {"avx512",
       {"sse4.1", "sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512cd", "avx512vl",
        "avx512bw", "avx512dq"}},
  };
  return levels;
}

std::string known_names_text() {
  std::string s = "levels";
  for (const auto& [name, features] : cpu_levels()) s += " " + name;
  s += "; features";
  for (const auto& f : known_cpu_features()) s += " " + f;
  return s;
}

}  // namespace

const std::vector<std::string>& known_cpu_features() {
  static const std::vector<std::string> names = {"sse4.1",   "sse4.2",   "avx",      "avx2",
                                                 "fma",      "f16c",     "avx512f",  "avx512cd",
                                                 "avx512vl", "avx512bw", "avx512dq", "avx512bf16"};
  return names;
}

std::vector<std::string> mask_cpu_features(const std::string& mask,
                                           const std::vector<std::string>& host) {
  const std::vector<std::string>& known = known_cpu_features();
  auto is_known = [&](const std::string& f) {
    return std::find(known.begin(), known.end(), f) != known.end();
  };
  auto fail = [&](const std::string& why) {
    throw Error("OPFORGE_CPU_FEATURES='" + mask + "': " + why + " (known: " + known_names_text() +
                ")");
  };
  std::set<std::string> allowed, removed;
  bool any_allowed = false;
  std::vector<std::string> items;  // every comma-separated item, empty ones included
  size_t at = 0;
  for (size_t comma; (comma = mask.find(',', at)) != std::string::npos; at = comma + 1) {
    items.push_back(mask.substr(at, comma - at));
  }
  items.push_back(mask.substr(at));
  for (std::string item : items) {
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (item.empty()) fail("empty item (two commas in a row, or one at an end)");
    if (item[0] == '-') {
      const std::string f = item.substr(1);
      // A removal names one feature: "-avx2" hides avx2 alone, not the whole level.
      if (!is_known(f)) {
        fail("'" + item + "': '" + f + "' is not a CPU feature" +
             (cpu_levels().count(f) ? " (a level: list the level to keep instead)"
                                    : did_you_mean(f, known)));
      }
      removed.insert(f);
      continue;
    }
    any_allowed = true;
    auto level = cpu_levels().find(item);
    if (level != cpu_levels().end()) {
      allowed.insert(level->second.begin(), level->second.end());
    } else if (is_known(item)) {
      allowed.insert(item);
    } else {
      std::vector<std::string> all;  // levels first: on a tie, "avx3" suggests the level avx2
      for (const auto& [name, features] : cpu_levels()) all.push_back(name);
      all.insert(all.end(), known.begin(), known.end());
      fail("unknown CPU feature or level '" + item + "'" + did_you_mean(item, all));
    }
  }
  std::vector<std::string> out;
  for (const auto& f : host) {
    if ((!any_allowed || allowed.count(f)) && !removed.count(f)) out.push_back(f);
  }
  return out;
}

const CpuFeatures& cpu_features() {
  struct State {
    CpuFeatures features;
    std::string error;
  };
  // Read once (thread-safe static): the mask cannot change under a process's selections.
  static const State state = [] {
    State s;
    for (const auto& f : known_cpu_features()) {
      if (host_supports(f)) s.features.host.push_back(f);
    }
    const char* env = std::getenv("OPFORGE_CPU_FEATURES");
    s.features.mask = env ? env : "";
    try {
      s.features.visible = s.features.mask.empty()
                               ? s.features.host
                               : mask_cpu_features(s.features.mask, s.features.host);
    } catch (const Error& e) {
      s.error = e.what();
    }
    return s;
  }();
  if (!state.error.empty()) throw Error(state.error);
  return state.features;
}

bool cpu_supports(const std::string& f) {
  const std::vector<std::string>& v = cpu_features().visible;
  return std::find(v.begin(), v.end(), f) != v.end();
}

namespace {

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

std::unique_ptr<Registry> Registry::open(const std::string& dir_in) {
  std::unique_ptr<Registry> r(new Registry());
  r->dir_ = dir_in.empty() ? default_dir() : dir_in;
  if (r->dir_.empty()) throw Error("no registry directory given and OPFORGE_REGISTRY is unset");
  const std::string path = r->dir_ + "/index.json";
  // The common first-run mistake gets the command that fixes it, not "cannot open".
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
    const std::string build =
        r->dir_ == default_dir() ? "opforge build" : "opforge build --registry " + r->dir_;
    throw Error("no op registry at " + r->dir_ + " (index.json missing); run '" + build +
                "' to create it");
  }
  try {
    r->index_ = registry::index_from_json(read_text(path), path);
  } catch (const registry::FormatError& e) {
    throw Error(e.what());
  }
  return r;
}

Registry::~Registry() {
  loaded_.clear();
  // Kernels and the runtime stay mapped: unloading a Halide runtime with live worker
  // threads is not safe, and the process is usually about to end.
}

std::vector<std::string> Registry::ops() const {
  std::set<std::string> s;
  for (const auto& e : index_.variants) s.insert(e.op);
  return {s.begin(), s.end()};
}

Descriptor Registry::descriptor(const std::string& variant) const {
  for (const auto& e : index_.variants) {
    if (e.variant != variant) continue;
    const std::string path = dir_ + "/" + e.descriptor;
    try {
      Descriptor d = registry::descriptor_from_json(read_text(path), path);
      if (d.variant != variant || d.op != e.op) {
        throw Error(path + ": describes " + d.variant + ", the index says " + variant);
      }
      return d;
    } catch (const registry::FormatError& err) {
      throw Error(err.what());
    }
  }
  throw Error("registry " + dir_ + " has no variant " + variant);
}

std::vector<Descriptor> Registry::variants(const std::string& op) const {
  if (!registry::is_valid_op_name(op)) {
    throw Error("'" + op + "' is not a valid op name (^[a-z][a-z0-9_]{0,63}$)");
  }
  std::vector<Descriptor> out;
  for (const auto& e : index_.variants) {
    if (e.op == op) out.push_back(descriptor(e.variant));
  }
  if (out.empty()) {
    throw Error("unknown op '" + op + "'" + did_you_mean(op, ops()) + " (registry " + dir_ + ")");
  }
  // fp32 storage first: callers describing an op by its first variant see the fp32 form.
  std::stable_sort(out.begin(), out.end(), [](const Descriptor& a, const Descriptor& b) {
    return (storage_tag(a) == "f32") > (storage_tag(b) == "f32");
  });
  return out;
}

void* Registry::runtime_handle() {
  if (runtime_) return runtime_;
  // Kernels name the runtime by soname, so every registry's kernels in a process bind to the
  // first one loaded: reuse it, so thread count and error handler act on the pool in use.
  const std::string path = dir_ + "/" + index_.runtime_library;
  const std::string soname = path.substr(path.find_last_of('/') + 1);
  if (access(path.c_str(), R_OK) != 0) throw Error(path + ": Halide runtime library missing");
  void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw Error(path + ": cannot load the Halide runtime: " + dlerror());
  // Errors become codes with a message, not an abort() of the caller's process.
  using SetHandler = void (*)(void (*)(void*, const char*));
  auto set_handler = reinterpret_cast<SetHandler>(dlsym(h, "halide_set_error_handler"));
  if (!set_handler) throw Error(path + ": not a Halide runtime (no halide_set_error_handler)");
  set_handler(capture_halide_error);
  runtime_ = h;
  return h;
}

void Registry::set_num_threads(int n) {
  void* h = runtime_handle();
  auto shutdown = reinterpret_cast<void (*)()>(dlsym(h, "halide_shutdown_thread_pool"));
  auto set = reinterpret_cast<int (*)(int)>(dlsym(h, "halide_set_num_threads"));
  if (!shutdown || !set) throw Error("Halide runtime lacks thread-pool controls");
  // halide_set_num_threads alone is lazy: existing workers keep taking jobs.
  shutdown();
  set(n);
}

std::string storage_tag(const Descriptor& d) {
  auto narrow = [](DType t) { return t == DType::f16 || t == DType::bf16; };
  DType grad = DType::f32;
  std::optional<DType> model, state;
  bool first_state = true;  // the parameter (or fp32 master): never narrowed
  for (const auto& in : d.inputs) {
    if (in.role == registry::Input::Role::gradient && grad == DType::f32) grad = in.dtype;
    if (in.role != registry::Input::Role::state) continue;
    if (in.name == "model" && narrow(in.dtype)) {
      model = in.dtype;
    } else if (!first_state && narrow(in.dtype)) {
      state = in.dtype;
    }
    first_state = false;
  }
  return registry::storage_tag(grad, model, state);
}

std::vector<Descriptor> Registry::candidates(const std::string& op,
                                             const std::map<std::string, std::string>& attrs,
                                             const std::string& isa_in, std::string* algorithm,
                                             bool need_cpu) const {
  std::vector<Descriptor> all = variants(op);
  // Wanted attrs: the declaration's defaults, overridden by the caller's (canonicalized).
  std::map<std::string, std::string> wanted;
  for (const auto& a : all.front().attrs) wanted[a.name] = a.default_value;
  // "storage" (f32, bf16m, f16m, ...) is not a declared attr: it picks among the variants'
  // tensor storage (storage_tag). Without it, fp32 storage where the op has it. "algorithm"
  // picks an NN op's algorithm by name.
  std::string storage;
  for (const auto& [name, text] : attrs) {
    if (name == "storage" && !all.front().find_attr(name)) {
      storage = text;
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
    wanted[name] = canonical_attr(*a, text, op);
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
  if (storage.empty()) {
    for (const auto& d : all) {
      if (storage_tag(d) == "f32") storage = "f32";
    }
  }
  std::vector<Descriptor> matching;
  for (auto& d : all) {
    if (d.attr_values() == wanted && (storage.empty() || storage_tag(d) == storage) &&
        (algorithm->empty() || d.algorithm.name == *algorithm))
      matching.push_back(std::move(d));
  }
  if (matching.empty()) {
    std::string w;
    for (const auto& [k, v] : wanted) w += (w.empty() ? "" : ",") + k + "=" + v;
    if (!storage.empty()) w += (w.empty() ? "" : ",") + std::string("storage=") + storage;
    if (!algorithm->empty()) w += (w.empty() ? "" : ",") + std::string("algorithm=") + *algorithm;
    throw Error("op '" + op + "' has no registered variant with attrs " + w);
  }
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
    throw Error("op '" + op + "': no variant " +
                (isa.empty() ? "runs on this CPU" : "for ISA '" + isa + "'") +
                (isa.empty() && !mask.empty() ? " (OPFORGE_CPU_FEATURES=" + mask + ")" : ""));
  }
  // Best first: the algorithm's priority (NN ops), then the ISA's.
  std::stable_sort(out.begin(), out.end(), [](const Descriptor& a, const Descriptor& b) {
    if (a.algorithm.priority != b.algorithm.priority)
      return a.algorithm.priority > b.algorithm.priority;
    return a.target.priority > b.target.priority;
  });
  return out;
}

Kernel& Registry::select(const std::string& op, const std::map<std::string, std::string>& attrs,
                         const std::string& isa) {
  std::string algorithm;
  std::vector<Descriptor> c = candidates(op, attrs, isa, &algorithm);
  // Without shapes, an algorithm that applies to every shape.
  for (const auto& d : c) {
    if (d.algorithm.applies_when.empty()) return load_descriptor(d);
  }
  return load_descriptor(c.front());
}

Descriptor Registry::choose(const std::string& op, const std::map<std::string, std::string>& attrs,
                            const std::string& isa) const {
  std::string algorithm;
  std::vector<Descriptor> c = candidates(op, attrs, isa, &algorithm, /*need_cpu=*/false);
  // As select(): without shapes, an algorithm that applies to every shape.
  for (auto& d : c) {
    if (d.algorithm.applies_when.empty()) return std::move(d);
  }
  return std::move(c.front());
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
  std::string algorithm;
  std::vector<Descriptor> c = candidates(op, attrs, isa, &algorithm);
  if (!c.front().shape.named_dims) return load_descriptor(c.front());
  std::map<std::string, const TensorView*> by_name;
  for (size_t k = 0; k < n_tensors; ++k) by_name[tensors[k].name] = &tensors[k];
  std::map<std::string, double> scalar_map;
  for (size_t k = 0; k < n_scalars; ++k) scalar_map[scalars[k].name] = scalars[k].value;
  const BoundShapes b = bind_shapes(c.front(), by_name, scalar_map);
  std::string why;
  for (const auto& d : c) {
    const std::string no = why_not_applicable(d, b);
    if (no.empty()) return load_descriptor(d);
    if (why.find(no) == std::string::npos) why += (why.empty() ? "" : "; ") + no;
  }
  throw Error("op '" + op + "': " + (algorithm.empty() ? "no algorithm applies: " : "") + why);
}

Kernel& Registry::load(const std::string& variant) {
  auto it = loaded_.find(variant);
  if (it != loaded_.end()) return *it->second;
  bool known = false;
  std::vector<std::string> ids;
  for (const auto& e : index_.variants) {
    known = known || e.variant == variant;
    ids.push_back(e.variant);
  }
  if (!known) {
    throw Error("registry " + dir_ + " has no variant '" + variant + "'" +
                did_you_mean(variant, ids));
  }
  const Descriptor d = descriptor(variant);
  for (const auto& f : d.target.cpu_features) {
    if (!cpu_supports(f)) {
      throw Error("variant " + variant + " (ISA " + d.target.isa + ") needs CPU feature " + f +
                  mask_note(f));
    }
  }
  return load_descriptor(d);
}

Kernel& Registry::load_descriptor(const Descriptor& d) {
  auto it = loaded_.find(d.variant);
  if (it != loaded_.end()) return *it->second;

  runtime_handle();
  const std::string path = dir_ + "/" + d.kernel.file;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw Error(path + ": cannot load kernel: " + dlerror());
  void* argv_fn = dlsym(h, (d.kernel.entry + "_argv").c_str());
  auto md_fn = reinterpret_cast<const halide_filter_metadata_t* (*)()>(
      dlsym(h, (d.kernel.entry + "_metadata").c_str()));
  if (!argv_fn || !md_fn) throw Error(path + ": missing entry " + d.kernel.entry + "_argv");
  check_metadata(d, md_fn());
  std::unique_ptr<Kernel> k(new Kernel(d, h, argv_fn));
  return *(loaded_[d.variant] = std::move(k));
}

Kernel::Kernel(Descriptor d, void* handle, void* argv_fn)
    : desc_(std::move(d)), handle_(handle), argv_fn_(argv_fn) {
  for (const auto& in : desc_.inputs) {
    (in.role == Input::Role::scalar ? scalar_inputs_ : tensor_inputs_).push_back(&in);
  }
  // NN ops: each output is a tensor argument the caller passes by its name.
  if (desc_.shape.named_dims) {
    output_slots_.reserve(desc_.outputs.size());
    for (const auto& o : desc_.outputs)
      output_slots_.push_back({o.name, Input::Role::tensor, o.dtype, o.rank, "", o.dims});
    for (const auto& o : output_slots_) tensor_inputs_.push_back(&o);
  }
  auto slot_of = [](const std::vector<const Input*>& v, const std::string& name) {
    for (size_t k = 0; k < v.size(); ++k) {
      if (v[k]->name == name) return static_cast<int>(k);
    }
    return -1;
  };
  for (const auto& a : desc_.kernel.args) {
    std::string name = a.name;
    if (a.kind == KernelArg::Kind::output_buffer) {
      name.clear();
      for (const auto& o : desc_.outputs) {
        if (o.kernel_arg == a.name) name = desc_.shape.named_dims ? o.name : o.aliases;
      }
    }
    const int slot =
        slot_of(a.kind == KernelArg::Kind::input_scalar ? scalar_inputs_ : tensor_inputs_, name);
    if (slot < 0) throw Error(desc_.variant + ": kernel argument '" + a.name + "' has no source");
    arg_sources_.push_back({a.kind, slot});
  }
  if (tensor_inputs_.size() > kMaxArgs || scalar_inputs_.size() > kMaxArgs) {
    throw Error(desc_.variant + ": more than " + std::to_string(kMaxArgs) + " arguments");
  }
}

void Kernel::fill_argv(void** argv, halide_buffer_t* bufs, ScalarValue* values,
                       const double* s_at) const {
  for (size_t k = 0; k < arg_sources_.size(); ++k) {
    const ArgSource& src = arg_sources_[k];
    if (src.kind != KernelArg::Kind::input_scalar) {
      argv[k] = &bufs[src.slot];
      continue;
    }
    ScalarValue& v = values[src.slot];
    const double x = s_at[src.slot];
    const registry::DType t = scalar_inputs_[src.slot]->dtype;
    if ((t == registry::DType::i32 || t == registry::DType::i64) &&
        !(std::trunc(x) == x && std::fabs(x) < 9.007199254740992e15)) {
      throw Error("op '" + desc_.op + "': scalar '" + scalar_inputs_[src.slot]->name +
                  "' must be an integer, got " + std::to_string(x));
    }
    switch (t) {
      case registry::DType::f64:
        v.f64 = x;
        break;
      case registry::DType::i32:
        v.i32 = static_cast<int32_t>(x);
        break;
      case registry::DType::i64:
        v.i64 = static_cast<int64_t>(x);
        break;
      default:
        v.f32 = static_cast<float>(x);
    }
    argv[k] = &v;
  }
}

void Kernel::invoke(void** argv, const std::string& where) {
  halide_error.clear();
  const int rc = reinterpret_cast<int (*)(void**)>(argv_fn_)(argv);
  if (rc != 0) {
    throw Error("op '" + desc_.op + "': kernel " + desc_.variant + " failed with Halide error " +
                std::to_string(rc) + where + (halide_error.empty() ? "" : ": " + halide_error));
  }
}

namespace {

std::map<std::string, const TensorView*> views_by_name(const TensorView* t, size_t n) {
  std::map<std::string, const TensorView*> out;
  for (size_t k = 0; k < n; ++k) out[t[k].name] = &t[k];
  return out;
}

std::map<std::string, double> scalars_by_name(const ScalarView* s, size_t n) {
  std::map<std::string, double> out;
  for (size_t k = 0; k < n; ++k) out[s[k].name] = s[k].value;
  return out;
}

}  // namespace

std::vector<std::vector<int64_t>> Kernel::output_shapes(
    const std::vector<Tensor>& tensors, const std::map<std::string, double>& scalars) const {
  const Views v(tensors, scalars);
  return output_shapes(v.tensors.data(), v.tensors.size(), v.scalars.data(), v.scalars.size());
}

std::vector<std::vector<int64_t>> Kernel::output_shapes(const TensorView* tensors, size_t n_tensors,
                                                        const ScalarView* scalars,
                                                        size_t n_scalars) const {
  if (!desc_.shape.named_dims) {
    throw Error("op '" + desc_.op + "' updates its states in place: it has no output shapes");
  }
  return bind_shapes(desc_, views_by_name(tensors, n_tensors), scalars_by_name(scalars, n_scalars))
      .output_shapes;
}

std::map<std::string, int64_t> Kernel::shape_values(const TensorView* tensors, size_t n_tensors,
                                                    const ScalarView* scalars,
                                                    size_t n_scalars) const {
  if (!desc_.shape.named_dims) throw Error("op '" + desc_.op + "' has no named dims");
  return bind_shapes(desc_, views_by_name(tensors, n_tensors), scalars_by_name(scalars, n_scalars))
      .env;
}

// NN ops: named dims bound across the inputs, checks, output shapes, the algorithm's
// condition; then each tensor as a dense row-major Halide buffer (innermost dim first), a
// tensor without its optional leading dim broadcast over it (stride 0).
void Kernel::call_named(const TensorView* const* t_at, const double* s_at) {
  const Descriptor& d = desc_;
  auto fail = [&](const std::string& msg) { return Error("op '" + d.op + "': " + msg); };
  const size_t n_in = tensor_inputs_.size() - output_slots_.size();
  std::map<std::string, const TensorView*> inputs;
  for (size_t k = 0; k < n_in; ++k) inputs[tensor_inputs_[k]->name] = t_at[k];
  std::map<std::string, double> scalars;
  for (size_t k = 0; k < scalar_inputs_.size(); ++k) scalars[scalar_inputs_[k]->name] = s_at[k];
  const BoundShapes b = bind_shapes(d, inputs, scalars);
  const std::string why = why_not_applicable(d, b);
  if (!why.empty()) {
    throw fail("variant " + d.variant + ": " + why +
               " (Registry::select with the call's tensors picks an algorithm that applies)");
  }
  auto shape_of = [](const TensorView& t) {
    return std::vector<int64_t>(t.shape, t.shape + t.rank);
  };
  bool empty = false;
  for (size_t j = 0; j < output_slots_.size(); ++j) {
    const TensorView& t = *t_at[n_in + j];
    const std::vector<int64_t>& want = b.output_shapes[j];
    if (shape_of(t) != want) {
      std::string dims;
      for (const auto& e : output_slots_[j].dims) dims += (dims.empty() ? "" : ", ") + e;
      throw fail("output '" + output_slots_[j].name + "' has shape " + shape_text(shape_of(t)) +
                 ", expected " + shape_text(want) + " = [" + dims + "]");
    }
    for (int64_t e : want) empty = empty || e == 0;
  }
  // Outputs are written while inputs are read: no output may overlap another tensor.
  auto bytes = [&](size_t k) {
    int64_t n = registry::dtype_bytes(t_at[k]->dtype);
    for (int r = 0; r < t_at[k]->rank; ++r) n *= t_at[k]->shape[r];
    return n;
  };
  for (size_t a = n_in; a < tensor_inputs_.size(); ++a) {
    for (size_t o = 0; o < tensor_inputs_.size(); ++o) {
      if (o == a) continue;
      const char* pa = static_cast<const char*>(t_at[a]->data);
      const char* po = static_cast<const char*>(t_at[o]->data);
      if (bytes(a) && bytes(o) && pa < po + bytes(o) && po < pa + bytes(a)) {
        throw fail(std::string("output '") + t_at[a]->name + "' overlaps argument '" +
                   t_at[o]->name + "' in memory");
      }
    }
  }
  if (empty) return;
  constexpr int kMaxDims = 8;
  halide_dimension_t dims[kMaxArgs][kMaxDims];
  halide_buffer_t bufs[kMaxArgs];
  for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
    const Input& in = *tensor_inputs_[k];
    const TensorView& t = *t_at[k];
    const int rank = static_cast<int>(in.dims.size());
    if (rank > kMaxDims) throw fail("argument '" + in.name + "' has more than 8 dims");
    const bool omitted = t.rank == rank - 1;  // bind_shapes allowed it: optional leading dim
    int64_t stride = 1;
    for (int hd = 0; hd < rank; ++hd) {  // Halide dim hd is numpy dim rank - 1 - hd
      const int nd = rank - 1 - hd;
      int64_t extent = 0, s = stride;
      if (omitted && nd == 0) {
        std::string name = in.dims[0];
        name.pop_back();
        extent = b.env.at(name);
        s = 0;
      } else {
        extent = t.shape[nd - (omitted ? 1 : 0)];
        stride *= extent;
      }
      if (extent > std::numeric_limits<int32_t>::max() || s > std::numeric_limits<int32_t>::max())
        throw fail("argument '" + in.name + "' is too large for a kernel call");
      dims[k][hd] = {0, static_cast<int32_t>(extent), static_cast<int32_t>(s), 0};
    }
    bufs[k] = halide_buffer_t{};
    bufs[k].host = static_cast<uint8_t*>(t.data);
    bufs[k].type = halide_type_of(t.dtype);
    bufs[k].dimensions = rank;
    bufs[k].dim = dims[k];
  }
  ScalarValue values[kMaxArgs];
  void* argv[3 * kMaxArgs];
  fill_argv(argv, bufs, values, s_at);
  invoke(argv, "");
}

void Kernel::call(const std::vector<Tensor>& tensors,
                  const std::map<std::string, double>& scalars) {
  const Views v(tensors, scalars);
  call(v.tensors.data(), v.tensors.size(), v.scalars.data(), v.scalars.size());
}

void Kernel::call_chunked(const std::vector<Tensor>& tensors,
                          const std::map<std::string, double>& scalars, int64_t chunk_elements) {
  const Views v(tensors, scalars);
  call_chunked(v.tensors.data(), v.tensors.size(), v.scalars.data(), v.scalars.size(),
               chunk_elements);
}

void Kernel::call(const TensorView* tensors, size_t n_tensors, const ScalarView* scalars,
                  size_t n_scalars) {
  call_impl(tensors, n_tensors, scalars, n_scalars, 0);
}

void Kernel::call_chunked(const TensorView* tensors, size_t n_tensors, const ScalarView* scalars,
                          size_t n_scalars, int64_t chunk_elements) {
  if (!desc_.shape.splittable) {
    throw Error("op '" + desc_.op + "' (variant " + desc_.variant +
                ") cannot be called in chunks (" + kNotSplittable + ")");
  }
  if (chunk_elements < 1) {
    throw Error("op '" + desc_.op + "': chunk_elements must be at least 1, got " +
                std::to_string(chunk_elements));
  }
  call_impl(tensors, n_tensors, scalars, n_scalars, chunk_elements);
}

void Kernel::call_impl(const TensorView* tensors, size_t n_tensors, const ScalarView* scalars,
                       size_t n_scalars, int64_t chunk_elements) {
  const Descriptor& d = desc_;
  // Dense ops that may run on slices take any element count; the rest at most `limit`.
  const bool split_ok = d.shape.elementwise && d.shape.splittable;
  const int64_t limit = call_limit(d);
  auto fail = [&](const std::string& msg) -> Error { return Error("op '" + d.op + "': " + msg); };
  auto names_of = [](const std::vector<const Input*>& v) {
    std::vector<std::string> out;
    for (const auto* in : v) out.push_back(in->name);
    return out;
  };
  // Match arguments to descriptor slots.
  const TensorView* t_at[kMaxArgs] = {};
  double s_at[kMaxArgs];
  bool s_set[kMaxArgs] = {};
  for (size_t k = 0; k < n_tensors; ++k) {
    const TensorView& t = tensors[k];
    size_t slot = 0;
    while (slot < tensor_inputs_.size() && tensor_inputs_[slot]->name != t.name) ++slot;
    if (slot == tensor_inputs_.size()) {
      throw fail(std::string("unknown tensor argument '") + t.name + "'" +
                 did_you_mean(t.name, names_of(tensor_inputs_)));
    }
    if (t_at[slot]) throw fail(std::string("tensor '") + t.name + "' given twice");
    if (t.dtype != tensor_inputs_[slot]->dtype) {
      const bool index_attr = d.find_attr("Tindices") && d.shape.indices == t.name;
      throw fail(std::string("argument '") + t.name + "' has dtype " +
                 registry::dtype_name(t.dtype) + ", expected " +
                 registry::dtype_name(tensor_inputs_[slot]->dtype) +
                 (index_attr ? std::string(" (the variant with attr Tindices=") +
                                   registry::dtype_name(t.dtype) + " takes those)"
                             : std::string()));
    }
    if (t.rank < 0 || (t.rank > 0 && !t.shape)) {
      throw fail(std::string("argument '") + t.name + "' has a bad rank");
    }
    t_at[slot] = &t;
  }
  for (size_t k = 0; k < n_scalars; ++k) {
    size_t slot = 0;
    while (slot < scalar_inputs_.size() && scalar_inputs_[slot]->name != scalars[k].name) ++slot;
    if (slot == scalar_inputs_.size()) {
      throw fail(std::string("unknown scalar argument '") + scalars[k].name + "'" +
                 did_you_mean(scalars[k].name, names_of(scalar_inputs_)));
    }
    if (s_set[slot]) throw fail(std::string("scalar '") + scalars[k].name + "' given twice");
    s_set[slot] = true;
    s_at[slot] = scalars[k].value;
  }
  for (size_t k = 0; k < scalar_inputs_.size(); ++k) {
    if (!s_set[k]) throw fail("missing scalar argument '" + scalar_inputs_[k]->name + "'");
  }
  // Element counts: no negative dims, no int64 overflow, data present.
  auto shape_of = [](const TensorView& t) {
    return std::vector<int64_t>(t.shape, t.shape + t.rank);
  };
  int64_t elements[kMaxArgs];
  for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
    const TensorView* t = t_at[k];
    if (!t) throw fail("missing tensor argument '" + tensor_inputs_[k]->name + "'");
    int64_t e = 1;
    for (int r = 0; r < t->rank; ++r) {
      if (t->shape[r] < 0) {
        throw fail(std::string("argument '") + t->name + "' has a negative dimension " +
                   shape_text(shape_of(*t)));
      }
      if (__builtin_mul_overflow(e, t->shape[r], &e)) {
        throw fail(std::string("argument '") + t->name +
                   "' has more elements than fit in 64 bits " + shape_text(shape_of(*t)));
      }
    }
    if (e > limit && d.shape.named_dims) {
      throw fail(std::string("argument '") + t->name + "' has " + std::to_string(e) +
                 " elements, more than a kernel call takes (" + std::to_string(limit) + ")");
    }
    if (e > limit && !split_ok) {
      throw fail(std::string("argument '") + t->name + "' has " + std::to_string(e) +
                 " elements, more than this kernel's limit of " + std::to_string(limit) +
                 " per call, and the op cannot be updated in slices (" + kNotSplittable + ")");
    }
    if (e > 0 && !t->data) throw fail(std::string("argument '") + t->name + "' has no data");
    elements[k] = e;
  }
  if (d.shape.named_dims) {
    call_named(t_at, s_at);
    return;
  }
  auto slot_of = [&](const std::string& name) {
    size_t k = 0;
    while (k < tensor_inputs_.size() && tensor_inputs_[k]->name != name) ++k;
    return k;
  };
  auto require_shape = [&](size_t k, const std::vector<int64_t>& want, const std::string& why) {
    const TensorView* t = t_at[k];
    if (shape_of(*t) != want) {
      throw fail(std::string("argument '") + t->name + "' has shape " + shape_text(shape_of(*t)) +
                 " but " + why + " " + shape_text(want));
    }
  };

  // Halide dims per tensor: elementwise ops flatten to 1-D; sparse ops see states as
  // (cols, rows), gradients as (cols, len(indices)) and indices as 1-D.
  halide_dimension_t dims[kMaxArgs][2];
  int rank[kMaxArgs];
  // Results (found_inf, ...) hold one element, whatever the shape of the rest.
  bool result[kMaxArgs];
  for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
    result[k] = tensor_inputs_[k]->role == Input::Role::result;
    if (result[k] && elements[k] != 1) {
      throw fail(std::string("argument '") + t_at[k]->name + "' must hold one element, got shape " +
                 shape_text(shape_of(*t_at[k])));
    }
  }
  if (!d.shape.segments.empty()) {
    // Multi-tensor form: the flat tensors as K chunks of C, chunk k of model tensor segments[k].
    const size_t seg = slot_of(d.shape.segments);
    const size_t first = slot_of(d.shape.same_shape.at(0));
    const std::vector<int64_t> shape0 = shape_of(*t_at[first]);
    for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
      if (!result[k] && k != first && k != seg)
        require_shape(k, shape0, "'" + std::string(t_at[first]->name) + "' has shape");
    }
    const int64_t n = elements[first], chunks = elements[seg];
    if (n == 0 && chunks == 0) return;
    if (chunks < 1 || n % chunks != 0 || (n / chunks) % 16 != 0) {
      throw fail("argument '" + d.shape.segments + "' has " + std::to_string(chunks) +
                 " chunks for " + std::to_string(n) +
                 " elements: the chunk size elements/chunks must be a whole multiple of 16 "
                 "(lay the model out with ModelLayout)");
    }
    const int64_t chunk = n / chunks;
    const auto* table = static_cast<const int32_t*>(t_at[seg]->data);
    for (int64_t k = 0; k < chunks; ++k) {
      if (table[k] < 0 || table[k] >= chunks) {
        throw fail(d.shape.segments + "[" + std::to_string(k) + "] = " + std::to_string(table[k]) +
                   " is out of range [0, " + std::to_string(chunks) + ")");
      }
    }
    for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
      if (result[k] || k == seg) {
        dims[k][0] = {0, static_cast<int32_t>(result[k] ? 1 : chunks), 1, 0};
        rank[k] = 1;
      } else {
        dims[k][0] = {0, static_cast<int32_t>(chunk), 1, 0};
        dims[k][1] = {0, static_cast<int32_t>(chunks), static_cast<int32_t>(chunk), 0};
        rank[k] = 2;
      }
    }
  } else if (d.shape.elementwise) {
    const size_t first = d.shape.same_shape.empty() ? 0 : slot_of(d.shape.same_shape[0]);
    const std::vector<int64_t> shape0 = shape_of(*t_at[first]);
    for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
      if (!result[k] && k != first)
        require_shape(k, shape0, "'" + std::string(t_at[first]->name) + "' has shape");
    }
    if (elements[first] == 0) return;
    for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
      dims[k][0] = {0, result[k] ? 1 : 0, 1, 0};  // the extent is set per slice
      rank[k] = 1;
    }
  } else {
    const size_t idx = slot_of(d.shape.indices);
    const size_t first_state = slot_of(d.shape.same_shape.at(0));
    const TensorView& state = *t_at[first_state];
    if (state.rank < 1)
      throw fail(std::string("argument '") + state.name + "' must have rank >= 1");
    const std::vector<int64_t> state_shape = shape_of(state);
    if (t_at[idx]->rank != 1) {
      throw fail("argument '" + d.shape.indices + "' must be a vector, got shape " +
                 shape_text(shape_of(*t_at[idx])));
    }
    const int64_t rows = state_shape[0], count = t_at[idx]->shape[0];
    const int64_t cols = rows ? elements[first_state] / rows : 1;
    std::vector<int64_t> slice_shape = state_shape;
    slice_shape[0] = count;
    for (const auto& name : d.shape.same_shape) {
      require_shape(slot_of(name), state_shape, "'" + std::string(state.name) + "' has shape");
    }
    for (const auto& name : d.shape.row_slices) {
      require_shape(slot_of(name), slice_shape,
                    "with " + std::to_string(count) + " indices it must have shape");
    }
    if (count == 0) return;
    // Every index is checked before anything runs: a bad one changes nothing.
    for (int64_t k = 0; k < count; ++k) {
      const int64_t v = t_at[idx]->dtype == registry::DType::i64
                            ? static_cast<const int64_t*>(t_at[idx]->data)[k]
                            : static_cast<const int32_t*>(t_at[idx]->data)[k];
      if (v < 0 || v >= rows) {
        throw fail(d.shape.indices + "[" + std::to_string(k) + "] = " + std::to_string(v) +
                   " is out of range [0, " + std::to_string(rows) + ")");
      }
    }
    for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
      if (result[k]) {
        dims[k][0] = {0, 1, 1, 0};
        rank[k] = 1;
      } else if (k == idx) {
        dims[k][0] = {0, static_cast<int32_t>(count), 1, 0};
        rank[k] = 1;
      } else {
        const int64_t r = t_at[k]->shape[0];
        dims[k][0] = {0, static_cast<int32_t>(cols), 1, 0};
        dims[k][1] = {0, static_cast<int32_t>(r), static_cast<int32_t>(cols), 0};
        rank[k] = 2;
      }
    }
  }
  // In-place updates assume distinct arguments do not overlap.
  for (size_t a = 0; a < tensor_inputs_.size(); ++a) {
    for (size_t b = a + 1; b < tensor_inputs_.size(); ++b) {
      const char* pa = static_cast<const char*>(t_at[a]->data);
      const char* pb = static_cast<const char*>(t_at[b]->data);
      if (pa < pb + elements[b] * registry::dtype_bytes(t_at[b]->dtype) &&
          pb < pa + elements[a] * registry::dtype_bytes(t_at[a]->dtype)) {
        throw fail(std::string("arguments '") + t_at[a]->name + "' and '" + t_at[b]->name +
                   "' overlap in memory");
      }
    }
  }

  // One halide_buffer_t per tensor; an output gets the buffer of the state it overwrites.
  halide_buffer_t bufs[kMaxArgs];
  ScalarValue scalar_values[kMaxArgs];
  void* argv[3 * kMaxArgs];
  for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
    bufs[k] = halide_buffer_t{};
    bufs[k].host = static_cast<uint8_t*>(t_at[k]->data);
    bufs[k].type = halide_type_of(t_at[k]->dtype);
    bufs[k].dimensions = rank[k];
    bufs[k].dim = dims[k];
  }
  fill_argv(argv, bufs, scalar_values, s_at);
  // off/len: the slice a chunked call runs (len 0: the whole call); named only on failure.
  auto run = [&](int64_t off, int64_t len, int64_t n) {
    invoke(argv, len == 0
                     ? std::string()
                     : " on elements [" + std::to_string(off) + ", " + std::to_string(off + len) +
                           ") of " + std::to_string(n) + " (earlier slices are already updated)");
  };
  if (!d.shape.elementwise || !d.shape.segments.empty()) {
    run(0, 0, 0);
    return;
  }

  // Dense: one call, or consecutive slices [off, off + len) of every flattened tensor with the
  // same scalars: the caller's chunk size, else equal slices when the tensors exceed the
  // limit. Everything above was checked once, on the whole tensors.
  const int64_t n = elements[d.shape.same_shape.empty() ? 0 : slot_of(d.shape.same_shape[0])];
  int64_t chunk = n;
  if (chunk_elements > 0) {
    chunk = std::min(chunk_elements, limit);
  } else if (n > limit) {
    chunk = balanced_chunk(n, limit);
  }
  uint8_t* base[kMaxArgs];
  int64_t bytes[kMaxArgs];
  for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
    base[k] = bufs[k].host;
    bytes[k] = registry::dtype_bytes(t_at[k]->dtype);
  }
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t len = std::min(chunk, n - off);
    for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
      if (result[k]) continue;
      bufs[k].host = base[k] + off * bytes[k];
      dims[k][0].extent = static_cast<int32_t>(len);
    }
    run(off, chunk >= n ? 0 : len, n);
  }
}

}  // namespace opforge
