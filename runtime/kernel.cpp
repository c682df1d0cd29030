// A loaded kernel: its argument slots, output shapes, and calls (whole or in slices).
#include <algorithm>
#include <cmath>
#include <limits>

#include "opforge/runtime.hpp"
#include "runtime/call_dump.h"
#include "runtime/dense_call.h"
#include "runtime/kernel_call.h"
#include "runtime/shape_rules.h"
#include "runtime/views.h"

namespace opforge {

using registry::Descriptor;
using registry::Input;
using registry::KernelArg;

namespace {

thread_local std::string halide_error;  // last message from the Halide runtime

}  // namespace

void capture_halide_error(void*, const char* msg) {
  halide_error = msg ? msg : "";
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Kernel::Kernel(Descriptor d, void* handle, void* argv_fn)
    : desc_(std::move(d)), handle_(handle), argv_fn_(argv_fn) {
  for (const auto& in : desc_.inputs) {
    (in.role == Input::Role::scalar ? scalar_inputs_ : tensor_inputs_).push_back(&in);
    if (in.role == Input::Role::scalar) {
      scalar_domains_.push_back(
          registry::ScalarDomain::parse(in.domain.empty() ? "any" : in.domain));
    }
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
  std::vector<DenseCall::Arg> args;
  for (const ArgSource& a : arg_sources_)
    args.push_back({a.kind == KernelArg::Kind::input_scalar, a.slot});
  dense_ = DenseCall::build(desc_, tensor_inputs_, scalar_inputs_, scalar_domains_, args);
}

Kernel::~Kernel() = default;

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

std::shared_mutex& thread_pool_mutex() {
  static std::shared_mutex mu;
  return mu;
}

void Kernel::invoke(void** argv, const std::string& where) {
  halide_error.clear();
  std::shared_lock<std::shared_mutex> pool(thread_pool_mutex());
  const int rc = reinterpret_cast<int (*)(void**)>(argv_fn_)(argv);
  pool.unlock();
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

namespace {

// Slice length when a splittable op's tensors exceed `limit`: the fewest slices, of equal
// length rounded up to 64 elements so that every slice starts as aligned as the first.
int64_t balanced_chunk(int64_t n, int64_t limit) {
  const int64_t step = limit >= 64 ? limit / 64 * 64 : limit;
  const int64_t pieces = (n + step - 1) / step;
  const int64_t even = (n + pieces - 1) / pieces;
  return limit >= 64 ? std::min(step, (even + 63) / 64 * 64) : even;
}

// A dense call's slice length: the caller's chunk size, else equal slices when the tensors
// exceed the limit, else the whole of the `n` elements.
int64_t slice_length(int64_t n, int64_t chunk_elements, int64_t limit) {
  if (chunk_elements > 0) return std::min(chunk_elements, limit);
  if (n > limit) return balanced_chunk(n, limit);
  return n;
}

constexpr int kMaxDims = 8;

// An NN tensor as a dense row-major Halide buffer (innermost dim first), a tensor without its
// optional leading dim broadcast over it (stride 0).
void named_buffer(const Descriptor& d, const Input& in, const TensorView& t, const BoundShapes& b,
                  halide_dimension_t* dims, halide_buffer_t& buf) {
  const int rank = static_cast<int>(in.dims.size());
  if (rank > kMaxDims) throw op_error(d, "argument '" + in.name + "' has more than 8 dims");
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
      throw op_error(d, "argument '" + in.name + "' is too large for a kernel call");
    dims[hd] = {0, static_cast<int32_t>(extent), static_cast<int32_t>(s), 0};
  }
  buf = halide_buffer_t{};
  buf.host = host_of(t.data);
  buf.type = halide_type_of(t.dtype);
  buf.dimensions = rank;
  buf.dim = dims;
}

}  // namespace

// NN ops: named dims bound across the inputs, checks, output shapes, the algorithm's
// condition; then each tensor as a Halide buffer (named_buffer).
void Kernel::call_named(const TensorView* const* t_at, const double* s_at) {
  const Descriptor& d = desc_;
  const size_t n_in = tensor_inputs_.size() - output_slots_.size();
  std::map<std::string, const TensorView*> inputs;
  for (size_t k = 0; k < n_in; ++k) inputs[tensor_inputs_[k]->name] = t_at[k];
  std::map<std::string, double> scalars;
  for (size_t k = 0; k < scalar_inputs_.size(); ++k) scalars[scalar_inputs_[k]->name] = s_at[k];
  const BoundShapes b = bind_shapes(d, inputs, scalars);
  const std::string why = why_not_applicable(d, b);
  if (!why.empty()) {
    throw op_error(d, "variant " + d.variant + ": " + why +
                          " (Registry::select with the call's tensors picks an algorithm that "
                          "applies)");
  }
  const Slots slots{d, tensor_inputs_, scalar_inputs_, scalar_domains_};
  if (check_named_outputs(slots, n_in, t_at, b.output_shapes, output_slots_)) return;
  halide_dimension_t dims[kMaxArgs][kMaxDims];
  halide_buffer_t bufs[kMaxArgs];
  for (size_t k = 0; k < tensor_inputs_.size(); ++k)
    named_buffer(d, *tensor_inputs_[k], *t_at[k], b, dims[k], bufs[k]);
  ScalarValue values[kMaxArgs];
  void* argv[3 * kMaxArgs];
  fill_argv(argv, bufs, values, s_at);
  const auto dumped = dump::begin(d, tensor_inputs_, n_in, t_at, scalar_inputs_, s_at);
  invoke(argv, "");
  if (dumped) dump::finish(*dumped);
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

// Checks the arguments (kernel_args.cpp), then one call, or consecutive slices of a dense op.
void Kernel::call_impl(const TensorView* tensors, size_t n_tensors, const ScalarView* scalars,
                       size_t n_scalars, int64_t chunk_elements) {
  if (chunk_elements == 0 && !dump::on()) {
    if (dense_) {
      DenseCall::Frame f;
      switch (dense_->prepare(tensors, n_tensors, scalars, n_scalars, f)) {
        case DenseCall::Outcome::run:
          invoke(f.argv, "");
          return;
        case DenseCall::Outcome::empty:
          return;
        case DenseCall::Outcome::decline:
          break;  // the full path below accepts the call or names its error
      }
    }
    if (dense_calls() == DenseCalls::required)
      throw Error(desc_.variant + ": the dense call path declined this call");
  }
  const Descriptor& d = desc_;
  const Slots slots{d, tensor_inputs_, scalar_inputs_, scalar_domains_};
  CallArgs a;
  match_arguments(slots, tensors, n_tensors, scalars, n_scalars, a);
  count_elements(slots, a);
  if (d.shape.named_dims) {
    call_named(a.t_at, a.s_at);
    return;
  }
  Layout l;
  if (!plan_layout(slots, a, l)) return;
  check_no_overlap(slots, a);
  // Precision dumps (call_dump.h), once every check has passed: the inputs now, the outputs
  // once every slice has run.
  const auto dumped =
      dump::begin(d, tensor_inputs_, tensor_inputs_.size(), a.t_at, scalar_inputs_, a.s_at);

  // One halide_buffer_t per tensor; an output gets the buffer of the state it overwrites.
  halide_buffer_t bufs[kMaxArgs];
  ScalarValue scalar_values[kMaxArgs];
  void* argv[3 * kMaxArgs];
  for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
    bufs[k] = halide_buffer_t{};
    bufs[k].host = host_of(a.t_at[k]->data);
    bufs[k].type = halide_type_of(a.t_at[k]->dtype);
    bufs[k].dimensions = l.rank[k];
    bufs[k].dim = l.dims[k];
  }
  fill_argv(argv, bufs, scalar_values, a.s_at);
  // off/len: the slice a chunked call runs (len 0: the whole call); named only on failure.
  auto run = [&](int64_t off, int64_t len, int64_t n) {
    invoke(argv, len == 0
                     ? std::string()
                     : " on elements [" + std::to_string(off) + ", " + std::to_string(off + len) +
                           ") of " + std::to_string(n) + " (earlier slices are already updated)");
  };
  if (!d.shape.elementwise || !d.shape.segments.empty()) {
    run(0, 0, 0);
    if (dumped) dump::finish(*dumped);
    return;
  }

  // Dense: one call, or consecutive slices [off, off + len) of every flattened tensor with the
  // same scalars. Everything above was checked once, on the whole tensors.
  const int64_t n =
      a.elements[d.shape.same_shape.empty() ? 0 : slot_of(slots, d.shape.same_shape[0])];
  int64_t chunk = slice_length(n, chunk_elements, call_limit(d));
  // 8-bit states: every slice starts on a block boundary and takes its blocks' scales.
  const int64_t block = d.shape.block;
  if (block > 0 && chunk < n) chunk = std::max(block, chunk - chunk % block);
  uint8_t* base[kMaxArgs];
  int64_t bytes[kMaxArgs];
  for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
    base[k] = bufs[k].host;
    bytes[k] = registry::dtype_bytes(a.t_at[k]->dtype);
  }
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t len = std::min(chunk, n - off);
    for (size_t k = 0; k < tensor_inputs_.size(); ++k) {
      if (l.result[k]) continue;
      if (tensor_inputs_[k]->role == registry::Input::Role::block_scale) {
        bufs[k].host = base[k] + off / block * bytes[k];
        l.dims[k][0].extent = static_cast<int32_t>((len + block - 1) / block);
        continue;
      }
      bufs[k].host = base[k] + off * bytes[k];
      l.dims[k][0].extent = static_cast<int32_t>(len);
    }
    run(off, chunk >= n ? 0 : len, n);
  }
  if (dumped) dump::finish(*dumped);
}

}  // namespace opforge
