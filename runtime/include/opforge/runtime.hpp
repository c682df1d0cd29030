// opforge runtime: C++ API. No libHalide: kernels are dlopen'ed lazily from a registry.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "opforge/descriptor.h"
#include "opforge/scalar_domain.h"

struct halide_buffer_t;

namespace opforge {

class DenseCall;  // runtime/dense_call.h

// Any runtime failure: the message names the op, the argument and what was wrong.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Tensor {
  std::string name;
  void* data = nullptr;
  registry::DType dtype = registry::DType::f32;
  std::vector<int64_t> shape;
  int64_t elements() const;
};

class Registry;

// Allocation-free views of call arguments (what the C ABI passes straight through).
struct TensorView {
  const char* name;
  void* data;
  registry::DType dtype;
  const int64_t* shape;
  int rank;
};
struct ScalarView {
  const char* name;
  double value;
};

// One loaded kernel variant.
class Kernel {
 public:
  ~Kernel();
  const registry::Descriptor& descriptor() const { return desc_; }
  // Validates every argument against the descriptor (names, missing/extra, dtype, equal
  // shapes, aliasing between distinct arguments) and calls the kernel. Throws Error.
  //
  // Large tensors: one kernel call indexes with 32 bits and takes at most
  // descriptor().shape.max_elements elements (2^30 as built). A splittable op (below) with
  // more elements is called on consecutive equal slices of the flattened tensors (multiples of
  // 64 elements, each at most that long) with the same scalars; any other op over the limit
  // throws an Error naming the op, the tensor, its element count and the limit.
  void call(const std::vector<Tensor>& tensors, const std::map<std::string, double>& scalars);
  // The same, without allocating: a per-call cost of well under a microsecond matters for
  // small tensors.
  void call(const TensorView* tensors, size_t n_tensors, const ScalarView* scalars,
            size_t n_scalars);

  // NN ops (descriptor shape.named_dims): outputs are fresh buffers the caller passes as
  // tensors named like the outputs, with the shapes output_shapes() gives; call() checks every
  // rank and extent against the descriptor's named dims and checks, and that this variant's
  // algorithm applies (Registry::select with shapes picks one that does).
  // The shape of each output, in descriptor order, for these inputs and scalars (outputs in
  // `tensors` are ignored). Throws Error naming the argument and the shapes on bad input.
  std::vector<std::vector<int64_t>> output_shapes(
      const std::vector<Tensor>& tensors, const std::map<std::string, double>& scalars) const;
  std::vector<std::vector<int64_t>> output_shapes(const TensorView* tensors, size_t n_tensors,
                                                  const ScalarView* scalars,
                                                  size_t n_scalars) const;

  // NN ops: what shape expressions read for this call: every dim name's extent, int scalars,
  // int/bool attrs (e.g. to evaluate descriptor().cost). Throws Error like output_shapes().
  std::map<std::string, int64_t> shape_values(const TensorView* tensors, size_t n_tensors,
                                              const ScalarView* scalars, size_t n_scalars) const;

  // Whether the op may run on slices: every output element depends only on the same element
  // of its inputs (dense, no whole-tensor reduction). False for LAMB and LARS (their norms
  // span the whole tensor), for sparse ops and for descriptors that predate the field.
  bool splittable() const { return desc_.shape.splittable; }

  // call(), as consecutive kernel calls over slices [0, c), [c, 2c), ... of the flattened
  // tensors, c = min(chunk_elements, max_elements): every pointer offset per slice, scalars
  // identical. Arguments are validated once, on the whole tensors (names, dtypes, shapes,
  // aliasing). The result is the bytes of one call() per slice, and of one whole call()
  // except in the last bits for kernels whose vector tails round differently from full vectors
  // (runtime/README.md, Large tensors and chunked calls). Throws Error when the op is not
  // splittable (whatever the size) or chunk_elements < 1. A Halide error in a slice names the
  // slice; the slices before it are already updated.
  void call_chunked(const std::vector<Tensor>& tensors,
                    const std::map<std::string, double>& scalars, int64_t chunk_elements);
  void call_chunked(const TensorView* tensors, size_t n_tensors, const ScalarView* scalars,
                    size_t n_scalars, int64_t chunk_elements);

 private:
  friend class Registry;
  Kernel(registry::Descriptor d, void* handle, void* argv_fn);
  // chunk_elements 0: one call, or equal slices past the limit (splittable ops only).
  void call_impl(const TensorView* tensors, size_t n_tensors, const ScalarView* scalars,
                 size_t n_scalars, int64_t chunk_elements);
  // Where each kernel argument comes from: tensor slot, scalar slot or aliased state slot.
  struct ArgSource {
    registry::KernelArg::Kind kind;
    int slot;
  };
  registry::Descriptor desc_;
  void* handle_;
  void* argv_fn_;
  std::vector<const registry::Input*> tensor_inputs_;  // descriptor order
  std::vector<const registry::Input*> scalar_inputs_;
  std::vector<registry::ScalarDomain> scalar_domains_;  // by scalar slot, parsed once
  std::vector<ArgSource> arg_sources_;
  // NN ops: the outputs as tensor slots (after the inputs in tensor_inputs_).
  std::vector<registry::Input> output_slots_;
  // Dense elementwise ops: the same checks over a compact copy of the slots (null otherwise).
  std::unique_ptr<DenseCall> dense_;
  void call_named(const TensorView* const* t_at, const double* s_at);
  union ScalarValue {
    float f32;
    double f64;
    int32_t i32;
    int64_t i64;
  };
  // argv of one kernel call: each argument's buffer (bufs by tensor slot) or scalar value.
  void fill_argv(void** argv, halide_buffer_t* bufs, ScalarValue* values, const double* s_at) const;
  // Calls the kernel; a Halide error becomes an Error naming the variant (and `where`).
  void invoke(void** argv, const std::string& where);
};

// A variant's tensor storage from its descriptor: "f32" (every tensor fp32); "<g>m" for fp32
// master weights with a write-only narrow "model" copy and gradients of dtype <g> ("bf16m",
// "f16m"); "<g>g" for narrow gradients only; a trailing "s" when the optimizer states after
// the first are narrow ("bf16s": fp32 var and gradients; "bf16ms"). The same tag is in the
// variant id (registry::storage_tag).
std::string storage_tag(const registry::Descriptor& d);

class Registry {
 public:
  // Opens and validates the index. dir empty: default_dir(). user_dir: the user registry read
  // beside this one (see "User registry" below); nullopt: default_user_dir(); "": none.
  static std::unique_ptr<Registry> open(const std::string& dir = "",
                                        const std::optional<std::string>& user_dir = {});
  // $OPFORGE_REGISTRY if set; else, for an installed library, the op library installed with
  // it (<prefix>/share/opforge/registry, found relative to the library, so the prefix can
  // move); for the library in its build tree, that build's op library.
  static std::string default_dir();
  // $OPFORGE_USER_REGISTRY, else <compile cache>/user-registry (opforge/user_dirs.h).
  static std::string default_user_dir();
  ~Registry();

  // User registry: the ops `opforge build --user` (or run/check/bench --rules, or Python's
  // opforge.rule) built from rule files, kept apart from the op library. An op this registry
  // lacks is looked up there (ops(), variants(), select(), choose(), load(), descriptor());
  // an op both have is this registry's. It is opened on first need, re-read when an op is not
  // found (a rule built meanwhile by another process) and by ops() (after a rule was rebuilt
  // under the same name: select() then loads its new kernels), and ignored, with the reason
  // in unknown-op errors, when its kernels were built against another Halide runtime.
  const std::string& user_dir() const { return user_dir_; }
  std::vector<std::string> user_ops() const;  // the ops only the user registry has, sorted

  const std::string& dir() const { return dir_; }
  // The index as read at open, or as re-read after the registry was rebuilt meanwhile (see
  // "Rebuilds" below). A reference stays valid for the Registry's life.
  const registry::Index& index() const { return *index_.load(); }
  std::vector<std::string> ops() const;  // sorted, unique; the user registry's too
  registry::Descriptor descriptor(const std::string& variant) const;  // reads and validates
  // Descriptors of every variant of `op`; throws Error for an unknown op (with a suggestion).
  std::vector<registry::Descriptor> variants(const std::string& op) const;

  // Picks the variant of `op` whose attrs match (unspecified attrs take their defaults) and
  // whose ISA the CPU supports, best priority first; `isa` forces one ("" = auto,
  // $OPFORGE_ISA overrides auto), and the best priority among that ISA's variants wins
  // (hand schedules rank above their autoscheduled twins). Loads it on first use.
  // attrs may hold "storage" (not a declared attr): the variants' tensor storage, as
  // storage_tag() names it ("f32", "bf16m", "bf16ms", ...); without it, fp32 storage where the op
  // has fp32 variants.
  //
  // NN ops: attrs may hold "algorithm" (not a declared attr) to force one of the op's
  // algorithms (descriptor algorithm.name). Without shapes, select() prefers an algorithm that
  // applies to every shape (no condition); the overloads below pick by the call's shapes.
  Kernel& select(const std::string& op, const std::map<std::string, std::string>& attrs = {},
                 const std::string& isa = "");
  // NN ops: among the variants whose algorithm applies to these tensors and scalars (the
  // descriptor's algorithm.applies_when), the highest algorithm priority, then the best ISA.
  // A forced algorithm that does not apply is an Error saying why (the condition and the
  // values it read).
  Kernel& select(const std::string& op, const std::map<std::string, std::string>& attrs,
                 const std::vector<Tensor>& tensors, const std::map<std::string, double>& scalars,
                 const std::string& isa = "");
  Kernel& select(const std::string& op, const std::map<std::string, std::string>& attrs,
                 const TensorView* tensors, size_t n_tensors, const ScalarView* scalars,
                 size_t n_scalars, const std::string& isa = "");
  // The descriptor select(op, attrs, isa) would load, without loading it: for commands that
  // read only descriptors and cache entries (inspect, diff), so that they work for any variant
  // on any host. A forced ISA (isa or $OPFORGE_ISA) need not run on this CPU; without one, the
  // best variant that runs here, else the best of all.
  registry::Descriptor choose(const std::string& op,
                              const std::map<std::string, std::string>& attrs = {},
                              const std::string& isa = "") const;
  // Loads one variant by id (e.g. an autoscheduled "..._avx512__auto", which select() never
  // prefers over its hand-scheduled twin). Throws Error for an unknown id (with a suggestion)
  // or a CPU without the variant's features.
  Kernel& load(const std::string& variant);
  // A kernel built outside the registry: a schedule preview in the compile cache (`opforge
  // bench --set`, `opforge tune`). `d` describes it (its kernel.sha256, when set, is checked),
  // `path` is the .so; it runs on this registry's Halide runtime. Each path is loaded once and
  // stays loaded with the registry. Throws Error naming the path.
  Kernel& load_file(const registry::Descriptor& d, const std::string& path);

  // Threads of a kernel's parallel loop; 0 = the calling thread's OpenMP team size (Halide's
  // default with OPFORGE_THREAD_POOL=halide). Waits for kernel calls in flight (in any thread)
  // to finish; calls made meanwhile wait for it.
  void set_num_threads(int n);

  // Thread safety: a Registry and its Kernels may be shared between threads. select(), load()
  // and the Kernel calls may run concurrently; load() dlopens each variant once.
  //
  // Rebuilds: `opforge build` may rewrite the registry while a process uses it. Descriptors
  // are read once per variant and kept; kernels loaded stay loaded. When a file the index
  // names is missing or not the one it recorded, the registry waits for an install in
  // progress (the build's lock), re-reads index.json and, if it changed, tries again with the
  // new index. A rebuild with another Halide runtime than the one loaded is an Error.

 private:
  Registry() = default;
  void* runtime_handle();  // the shared Halide runtime, loaded once
  // The variants of `op` matching attrs (storage, algorithm) that run on this CPU (or the
  // forced ISA), best first by ISA priority. need_cpu false (choose()): a forced ISA's variants
  // even where the CPU lacks its features, and without one every variant when none runs here.
  std::vector<registry::Descriptor> candidates(const std::string& op,
                                               const std::map<std::string, std::string>& attrs,
                                               const std::string& isa, std::string* algorithm,
                                               bool need_cpu = true) const;
  std::vector<registry::Descriptor> variants_of(const std::string& op) const;
  registry::Descriptor read_descriptor(const std::string& variant) const;  // kept once read
  Kernel& load_variant(const std::string& variant);
  // dlopen + metadata check, once per variant.
  Kernel& load_descriptor(const registry::Descriptor& d);
  std::unique_ptr<Kernel> open_kernel(const registry::Descriptor& d, const std::string& path);
  // Runs `f`; when it throws Error and index.json has changed since it was read (after any
  // install in progress), runs it again with the new index.
  template <class F>
  decltype(auto) retrying(F&& f) const;
  bool refresh_index() const;  // true when index.json changed and was re-read
  bool has(const std::string& name, bool variant) const;  // an op, or a variant id, indexed
  // The user registry, opened (or re-read) now; nullptr when there is none or it is unusable
  // (user_error_ says why).
  Registry* user_registry(bool reread) const;
  // Where `op` (a variant id when `variant`) lives: this registry, else the user registry
  // when it has it; this registry when neither does (its error names both).
  Registry* owner(const std::string& name, bool variant) const;
  Kernel* selected(const std::string& key) const;             // selected_'s, or nullptr
  Kernel& remember(const std::string& key, Kernel& k) const;  // into selected_
  std::string unknown_op_note() const;  // " (registry D[, user registry U])" for errors

  std::string dir_;
  mutable std::atomic<const registry::Index*> index_{nullptr};  // the latest of generations_
  // Guards what follows (recursive: load() calls load_descriptor()).
  std::unique_ptr<std::recursive_mutex> mu_ = std::make_unique<std::recursive_mutex>();
  mutable std::vector<std::unique_ptr<const registry::Index>> generations_;
  mutable std::string index_text_digest_;  // of the index.json bytes last read
  mutable std::map<std::string, registry::Descriptor> descriptors_;  // by variant, checked
  // select()'s answers by selection_key (op, attrs, ISA, tensor shapes, scalars): a selection
  // copies every candidate descriptor of the op (conv2d with shapes: 0.31 ms a call from
  // Python), and a model calls the same shapes over and over. Cleared with descriptors_.
  mutable std::map<std::string, Kernel*> selected_;
  void* runtime_ = nullptr;
  std::map<std::string, std::unique_ptr<Kernel>> loaded_;  // by variant id
  std::map<std::string, std::unique_ptr<Kernel>> files_;   // load_file's, by path
  std::vector<std::unique_ptr<Kernel>> retired_;           // replaced by a rebuild
  std::string user_dir_;                                   // "" for none
  mutable std::unique_ptr<Registry> user_;                 // opened on first need
  mutable std::string user_error_;                         // why user_ is not used
};

// The opforge command that belongs with this library (the builder of `opforge build --user`):
// the build tree's for a build-tree library, else <prefix>/bin/opforge of the install; "" when
// that file is missing.
std::string cli_path();

// CPU features by the names registry descriptors use (__builtin_cpu_supports spelling), as the
// runtime sees them: the CPU's own, less what $OPFORGE_CPU_FEATURES masks off. Variant
// selection, load() and the CLI all ask here, so a mask makes an AVX-512 host behave as an
// AVX2 one. The variable is read once, at first use; a malformed one throws Error (every call).
bool cpu_supports(const std::string& feature);

// Whether calls check every scalar against the domain its descriptor declares (finite, or e.g.
// beta in [0, 1)) and refuse the call naming the scalar. On by default; off is for experiments
// outside the declared domains (NaN/inf inputs, betas of 1). Process-wide.
void set_scalar_checks(bool enabled);
bool scalar_checks();

// Precision dumps: while `dir` is set (not ""), every kernel call in the process writes its
// inputs, scalars and outputs under it for `opforge check --replay DIR` (layout:
// runtime/call_dump.h). Starts from $OPFORGE_DUMP_DIR when that is set. Throws Error when the
// directory cannot be created; a failed write during a call throws from that call, after the
// kernel has run.
void set_dump_dir(const std::string& dir);
std::string dump_dir();  // "" when off

// What cpu_supports sees, for reports.
struct CpuFeatures {
  std::vector<std::string> host;     // the CPU's own, in known_cpu_features() order
  std::vector<std::string> visible;  // what the mask leaves of them (host when unmasked)
  std::string mask;                  // $OPFORGE_CPU_FEATURES as read; "" when unset or empty
};
const CpuFeatures& cpu_features();  // throws Error for a malformed $OPFORGE_CPU_FEATURES

// The feature names cpu_supports and masks know, baseline first.
const std::vector<std::string>& known_cpu_features();

// The features of `host` that `mask` leaves visible (host order). The mask is a comma list of
//   a level:       avx2 (sse4.1 sse4.2 avx avx2 fma f16c), avx512 (avx2's and avx512f avx512cd
//                  avx512vl avx512bw avx512dq: the registry's avx512 ISA), none;
//   a feature:     one of known_cpu_features();
//   -FEATURE:      removes that feature (applied last).
// The levels and features listed are the most the runtime may see; a list of removals only
// starts from every host feature. A mask only hides features: one the host lacks stays absent.
// Throws Error naming the offending item (unknown name, empty item, a level after '-').
std::vector<std::string> mask_cpu_features(const std::string& mask,
                                           const std::vector<std::string>& host);

// Parses "a=1,b=true" into a map; throws Error on malformed text.
std::map<std::string, std::string> parse_attr_list(const std::string& text);

}  // namespace opforge
