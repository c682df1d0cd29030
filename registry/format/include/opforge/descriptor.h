// The op-variant descriptor: what one registered kernel is, in data.
//
// Written by the builder (registry/builder), read by the runtime (runtime/) and the CLI.
// This header and registry/format/*.cpp depend only on the standard library and
// nlohmann/json: the runtime must not need libHalide or LLVM. The JSON form is documented in
// registry/SCHEMA.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace opforge::registry {

// Error in a descriptor or index: the message names the file and the JSON location.
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// b8: one byte per element, 0 false, anything else true (torch.bool, NumPy bool_).
// u8: one byte per element, an unsigned integer (the codes of 8-bit optimizer states).
// f8e4m3 / f8e5m2: one byte per element, the OCP FP8 formats E4M3 (no infinities) and E5M2
// (FP8 gradients, dsl/fp8.h); "float8_e4m3fn" and "float8_e5m2" as torch and ml_dtypes name them.
enum class DType { f16, bf16, f32, f64, i32, i64, b8, u8, f8e4m3, f8e5m2 };
const char* dtype_name(DType t);                         // "float32", ...
std::optional<DType> parse_dtype(const std::string& s);  // accepts the names dtype_name gives
int dtype_bytes(DType t);
// The storage tag of a mixed-precision variant (in its id, and `--attr storage=TAG`), from the
// dtypes of its gradients, of its write-only model copy (master-weights mode) and of its
// optimizer states after the first: "f32" when all are fp32; else "<g>m" (model copy; "<g><c>m"
// when the copy's dtype c differs) or "<g>g" (narrow gradients only), then "s" for narrow states
// ("<s>s" when their dtype differs from the gradients'): bf16m, f16g, bf16s, bf16ms.
std::string storage_tag(DType grad, std::optional<DType> model, std::optional<DType> state);
// The same with 8-bit blockwise states: the gradient/model part ("" for fp32), then "q8s"
// (dynamic map) or "q8ls" (linear map), then the block size unless it is 256: q8s, bf16mq8s,
// q8ls64.
std::string quantized_storage_tag(DType grad, std::optional<DType> model, bool linear_map,
                                  int64_t block);

// One argument of the op, in the op's (TensorFlow) argument order.
struct Input {
  // result: a one-element tensor (any rank) the call reads and overwrites in place, outside
  // the elementwise shape: a flag or a statistic of the whole call (found_inf, global_norm).
  // block_scale: an fp32 tensor the call reads and overwrites in place, one element per
  // ShapeConstraints::block elements of the same_shape tensors (ceil(n / block) in all): the
  // absmax of each block of an 8-bit state.
  enum class Role { state, gradient, tensor, scalar, result, block_scale };
  std::string name;
  Role role = Role::tensor;
  DType dtype = DType::f32;
  int rank = -1;  // -1: any rank (elementwise ops flatten); 0 for scalars
  std::string description;
  // NN ops (shape.named_dims): a name per dim, outermost first; a leading "B?" may be absent
  // (it is then 1). Equal names must have equal extents across the op's tensors.
  std::vector<std::string> dims;
  // Scalars: the values a call may pass (opforge/scalar_domain.h: "any", "finite",
  // "[0, 1)", ...), checked by the runtime before the call; "" (absent) reads as "any".
  std::string domain;
  // Scalars: the value a caller that names none uses (a rule's `hyper lr = 0.01`); absent
  // for scalars every call must give (the C++ ops').
  std::optional<double> default_value;
  // Scalars: a value typical of real use, inside the domain (beta1 0.9, FTRL's lr_power -0.5):
  // what check, bench, profile and report pass when the user names none. Absent: none declared.
  std::optional<double> typical;
  // uint8 states (8-bit optimizer states): the map their codes index, "dynamic_signed",
  // "dynamic_unsigned", "linear_signed" or "linear_unsigned"; "" otherwise.
  std::string quant_map;
};
const char* role_name(Input::Role r);  // "state", "gradient", "tensor", "scalar", "result"

// One result. For an in-place op every output aliases (overwrites) one input state.
struct Output {
  std::string name;        // op-level name, e.g. "var"
  std::string kernel_arg;  // the kernel's output argument, e.g. "updated.0"
  std::string aliases;     // input it overwrites ("" when it is a fresh buffer)
  DType dtype = DType::f32;
  int rank = -1;
  // NN ops: the extent of each dim, outermost first, as a shape expression
  // (registry/format/shape_expr.h) over the inputs' dim names, int/bool scalars and attrs.
  std::vector<std::string> dims;
};

// A condition over dims, scalars and attrs that every call must meet (shape.checks), with the
// message a call that fails it gets.
struct ShapeCheck {
  std::string condition;
  std::string message;
};

// Which algorithm an NN variant implements and when it applies: the runtime picks, among the
// variants whose condition holds for the call's shapes and scalars, the highest priority.
struct Algorithm {
  std::string name;          // "" when the op has one
  std::string applies_when;  // shape expression; "" = always
  int priority = 0;
  std::string description;
};

// Work per call as shape expressions, for benchmarks (GFLOP/s, GB/s).
struct Cost {
  std::string flops;
  std::string bytes;
  // A typical call, for `opforge bench`: "x=4096,1024 gamma=1024 eps=1e-05" (tensor shapes,
  // outermost first, and scalar values).
  std::string example;
};

// A compile-time attribute: declared once (type, default, description); `value` is the one
// this variant was compiled with. Values are kept as canonical strings: bool "true"/"false",
// int decimal, float "%.17g", string as is. JSON carries them typed.
struct Attr {
  enum class Type { boolean, integer, real, string };
  std::string name;
  Type type = Type::boolean;
  std::string default_value;
  std::string value;
  std::string description;
  std::vector<std::string> choices;  // for string attrs: allowed values (empty = any)
};
const char* attr_type_name(Attr::Type t);  // "bool", "int", "float", "string"
// User text for an attr value -> its canonical string (bool also accepts 1/0/True/False;
// float must be finite; string must be one of `choices` when there are any). Throws
// std::invalid_argument saying what was expected and what was given.
std::string canonical_attr_value(Attr::Type type, const std::vector<std::string>& choices,
                                 const std::string& text);

// One argument of the compiled kernel, in call order; checked against <entry>_metadata().
struct KernelArg {
  enum class Kind { input_buffer, input_scalar, output_buffer };
  std::string name;
  Kind kind = Kind::input_buffer;
  DType dtype = DType::f32;
  int dims = 1;  // 0 for scalars
};
const char* kernel_arg_kind_name(KernelArg::Kind k);  // "input_buffer", ...

struct Kernel {
  std::string file;   // relative to the registry root, e.g. "kernels/<variant>.so"
  std::string entry;  // C symbol; "<entry>_argv" and "<entry>_metadata" exist too
  std::vector<KernelArg> args;
  // SHA-256 of `file` as installed; the runtime checks it before dlopen ("" in registries
  // built before it was recorded: not checked).
  std::string sha256;
};

struct TargetInfo {
  std::string isa;                        // "avx512", "avx2", ...
  std::string halide_target;              // canonical Halide target string
  std::vector<std::string> cpu_features;  // names as __builtin_cpu_supports spells them
  int priority = 0;                       // higher wins when the CPU has every feature
};

struct Schedule {
  std::string recipe;                         // e.g. "elementwise"
  std::map<std::string, std::string> params;  // canonical strings
  std::string summary;                        // one line for humans
  // The machine tuning applied (`opforge tune`): the tuning file's machine fingerprint and
  // the op family whose params it set; both empty for the recipe's defaults.
  std::string tuning_machine;
  std::string tuning_family;
};

struct ShapeConstraints {
  bool elementwise = true;              // all same_shape tensors are flattened to 1-D
  std::vector<std::string> same_shape;  // tensors whose shapes must be equal
  // The most elements one kernel call takes: 32-bit Halide indexing, and the builder writes
  // 2^30 (its schedules' int32 arithmetic overflows near 2^31: registry_builder.cpp).
  int64_t max_elements = 2147483647;
  // Every output element depends only on the same element of the inputs (dense, no
  // whole-tensor reduction): the op may be called on consecutive slices of the flattened
  // tensors with the same scalars, which is how the runtime updates more than max_elements
  // elements. False for sparse ops and for ops with norm2()/sum() (LAMB, LARS).
  bool splittable = false;
  // One call may update many tensors stored back to back in flat buffers (multi-tensor apply,
  // runtime/model_layout.hpp): dense, and no reduction per tensor (whole-call ones, like
  // found_inf's check, are fine), or per-tensor reductions through `segments`.
  bool multi_tensor = false;
  // Sparse rows (elementwise false): same_shape are the states [rows, ...]; `indices` is the
  // 1-D index tensor; each row_slices tensor is [len(indices)] + state.shape[1:].
  std::string indices;
  std::vector<std::string> row_slices;
  // Multi-tensor form (elementwise true): the int32 input naming, for each of the K chunks of
  // the flat same_shape tensors (C = elements / K each, C a multiple of 16), the tensor it
  // belongs to; whole-tensor reductions (LAMB's, LARS's norms) are per tensor. "" otherwise.
  std::string segments;
  // NN ops (kind "nn"): every tensor has named dims (Input::dims), the outputs are fresh
  // buffers the caller passes by name with shapes from Output::dims, after `checks` hold.
  // elementwise is false and there are no indices.
  bool named_dims = false;
  std::vector<ShapeCheck> checks;
  // Elements per element of each block_scale tensor (8-bit states' blocks); 0: none.
  int64_t block = 0;
};

struct Tolerance {
  double rtol = 0;  // |kernel - fp64 reference| <= atol + rtol * |reference|
  double atol = 0;
  // + conditioning * (|fp32 evaluation - fp64 reference| + that evaluation's one-ulp input
  // sensitivity) per element (0: no such term): where the update cancels (centered RMSProp's
  // ms - mg^2), a plain fp32 evaluation of the same declaration loses what the kernel loses,
  // so the bound widens there and only there.
  double conditioning = 0;
};

// Bytes moved per element, for GB/s figures and for picking the bandwidth kernel to
// compare with.
struct Traffic {
  int bytes_read_per_element = 0;
  int bytes_written_per_element = 0;
};

struct Descriptor {
  static constexpr const char* kSchema = "opforge.op/1";

  std::string op;  // matches ^[a-z][a-z0-9_]{0,63}$
  int op_version = 1;
  std::string variant;  // unique id, a C identifier: also the file stem and entry symbol
  std::string summary;
  std::string formula;    // the update, as the declaration states it
  std::string reference;  // e.g. "TensorFlow ApplyAdam (tensorflow/core/kernels/training_ops.cc)"
  std::string kind;       // "optimizer", "bandwidth", "nn"
  std::vector<Input> inputs;
  std::vector<Output> outputs;
  std::vector<Attr> attrs;
  ShapeConstraints shape;
  Kernel kernel;
  TargetInfo target;
  Schedule schedule;
  Tolerance tolerance;
  Traffic traffic;
  std::string cache_key;  // hex SHA-256
  std::string halide_version;
  std::string bandwidth_op;  // the bandwidth kernel op with this traffic (for `bench`)
  Algorithm algorithm;       // NN ops
  Cost cost;                 // NN ops

  const Input* find_input(const std::string& name) const;
  const Attr* find_attr(const std::string& name) const;
  std::map<std::string, std::string> attr_values() const;  // name -> value
};

// JSON <-> Descriptor. from_json validates everything (required fields, types, names,
// relative paths that stay inside the registry, kernel args consistent with inputs/outputs)
// and throws FormatError naming `origin` (a file name) and the JSON pointer of the problem.
std::string to_json(const Descriptor& d);  // pretty-printed, stable key order
Descriptor descriptor_from_json(const std::string& text, const std::string& origin);

// The registry index: every variant the registry holds.
struct IndexEntry {
  std::string variant;
  std::string op;
  std::string descriptor;  // relative path, e.g. "ops/<variant>.json"
  std::string isa;
  std::map<std::string, std::string> attrs;  // canonical attr values of this variant
  // SHA-256 of the descriptor file; the runtime checks it when it reads the descriptor (a
  // flipped byte can leave valid JSON with another tolerance or dim). "": not recorded.
  std::string sha256;
};

struct Index {
  static constexpr const char* kSchema = "opforge.index/1";
  std::string runtime_library;  // relative path of the shared Halide runtime
  std::string runtime_sha256;   // its SHA-256, checked before dlopen ("": not recorded)
  std::string halide_version;
  std::vector<IndexEntry> variants;
};

// The index records the SHA-256 of its own content (index_digest: of the index as to_json
// writes it, without that field); index_from_json refuses a mismatch.
std::string to_json(const Index& idx);
Index index_from_json(const std::string& text, const std::string& origin);
std::string index_digest(const Index& idx);

// Names. An op name matches ^[a-z][a-z0-9_]{0,63}$; nothing builds a path from a name that
// has not passed this check.
bool is_valid_op_name(const std::string& s);
bool is_valid_identifier(const std::string& s);  // C identifier, at most 128 chars
// A schedule param key: an identifier, or an identifier, '@' and a count without a leading
// zero ("tasks@316228": the value for N >= 316228, a size bucket).
bool is_valid_schedule_param_key(const std::string& s);
// A relative path inside the registry: no leading '/', no "..", no empty or "." segments,
// only [A-Za-z0-9_.-/].
bool is_safe_relative_path(const std::string& s);

}  // namespace opforge::registry
