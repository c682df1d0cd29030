#include "runtime/dense_call.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

namespace opforge {

using registry::DType;
using registry::Input;

namespace {

std::atomic<DenseCalls> g_mode{DenseCalls::on};

bool copy_name(const std::string& from, char* to, size_t size) {
  if (from.size() >= size) return false;
  std::memcpy(to, from.c_str(), from.size() + 1);
  return true;
}

}  // namespace

void set_dense_calls(DenseCalls mode) {
  g_mode = mode;
}

DenseCalls dense_calls() {
  return g_mode.load(std::memory_order_relaxed);
}

std::unique_ptr<DenseCall> DenseCall::build(const registry::Descriptor& d,
                                            const std::vector<const Input*>& tensors,
                                            const std::vector<const Input*>& scalars,
                                            const std::vector<registry::ScalarDomain>& domains,
                                            const std::vector<Arg>& args) {
  const auto& shape = d.shape;
  if (shape.named_dims || !shape.elementwise || !shape.segments.empty() || !shape.indices.empty() ||
      tensors.empty() || tensors.size() > kMaxArgs || scalars.size() > kMaxArgs ||
      args.size() > 3 * kMaxArgs)
    return nullptr;
  auto c = std::make_unique<DenseCall>();
  c->n_tensors_ = tensors.size();
  c->n_scalars_ = scalars.size();
  c->n_args_ = args.size();
  c->first_ = tensors.size();
  for (size_t k = 0; k < tensors.size(); ++k) {
    TensorSlot& t = c->tensors_[k];
    if (!copy_name(tensors[k]->name, t.name, kName)) return nullptr;
    t.dtype = tensors[k]->dtype;
    t.bytes = registry::dtype_bytes(t.dtype);
    t.kind = tensors[k]->role == Input::Role::result        ? Kind::result
             : tensors[k]->role == Input::Role::block_scale ? Kind::block_scale
                                                            : Kind::same_shape;
    if (shape.same_shape.empty() ? k == 0 : tensors[k]->name == shape.same_shape[0]) {
      if (c->first_ == tensors.size()) c->first_ = k;
    }
  }
  if (c->first_ == tensors.size()) return nullptr;
  for (size_t k = 0; k < scalars.size(); ++k) {
    ScalarSlot& s = c->scalars_[k];
    if (!copy_name(scalars[k]->name, s.name, kName)) return nullptr;
    s.dtype = scalars[k]->dtype;
    s.domain = domains.at(k);
  }
  std::copy(args.begin(), args.end(), c->args_);
  c->block_ = shape.block;
  c->limit_ = call_limit(d);
  return c;
}

// The full path's checks, in the order it makes them (kernel_args.cpp: match_arguments,
// count_elements, plan_layout's dense layout, check_no_overlap; Kernel::fill_argv).
DenseCall::Outcome DenseCall::prepare(const TensorView* tensors, size_t n_tensors,
                                      const ScalarView* scalars, size_t n_scalars, Frame& f) const {
  if (dense_calls() == DenseCalls::off) return Outcome::decline;
  // Every tensor and scalar once, by a known name, tensors with their declared dtype.
  if (n_tensors != n_tensors_ || n_scalars != n_scalars_) return Outcome::decline;
  const TensorView* t_at[kMaxArgs] = {};
  for (size_t i = 0; i < n_tensors; ++i) {
    const TensorView& t = tensors[i];
    size_t k = 0;
    while (k < n_tensors_ && std::strcmp(tensors_[k].name, t.name) != 0) ++k;
    if (k == n_tensors_ || t_at[k] || t.dtype != tensors_[k].dtype) return Outcome::decline;
    if (t.rank < 0 || (t.rank > 0 && !t.shape)) return Outcome::decline;
    t_at[k] = &t;
  }
  double s_at[kMaxArgs];
  bool s_set[kMaxArgs] = {};
  for (size_t i = 0; i < n_scalars; ++i) {
    size_t k = 0;
    while (k < n_scalars_ && std::strcmp(scalars_[k].name, scalars[i].name) != 0) ++k;
    if (k == n_scalars_ || s_set[k]) return Outcome::decline;
    s_set[k] = true;
    s_at[k] = scalars[i].value;
  }
  if (scalar_checks()) {
    for (size_t k = 0; k < n_scalars_; ++k) {
      const ScalarSlot& s = scalars_[k];
      if (s.domain.any) continue;
      const double v = s_at[k];
      if (!s.domain.contains(s.dtype == DType::f32 ? static_cast<double>(static_cast<float>(v))
                                                   : v))
        return Outcome::decline;
    }
  }
  // Element counts: no negative dims, no overflow, within one call's limit, data present.
  int64_t elements[kMaxArgs] = {};
  for (size_t k = 0; k < n_tensors_; ++k) {
    const TensorView& t = *t_at[k];
    int64_t e = 1;
    for (int r = 0; r < t.rank; ++r) {
      if (t.shape[r] < 0 || __builtin_mul_overflow(e, t.shape[r], &e)) return Outcome::decline;
    }
    if (e > limit_ || (e > 0 && !t.data)) return Outcome::decline;
    elements[k] = e;
  }
  // Dense layout: one element per result, ceil(n / block) per block scale, the first
  // tensor's shape for the rest.
  const TensorView& first = *t_at[first_];
  const int64_t n = elements[first_];
  for (size_t k = 0; k < n_tensors_; ++k) {
    if (tensors_[k].kind == Kind::result && elements[k] != 1) return Outcome::decline;
  }
  for (size_t k = 0; k < n_tensors_; ++k) {
    const TensorView& t = *t_at[k];
    if (tensors_[k].kind == Kind::block_scale) {
      if (elements[k] != (block_ > 0 ? (n + block_ - 1) / block_ : 0)) return Outcome::decline;
    } else if (tensors_[k].kind == Kind::same_shape && k != first_) {
      if (t.rank != first.rank) return Outcome::decline;
      for (int r = 0; r < t.rank; ++r) {
        if (t.shape[r] != first.shape[r]) return Outcome::decline;
      }
    }
  }
  if (n == 0) return Outcome::empty;
  // No two tensors overlap in memory.
  for (size_t i = 0; i < n_tensors_; ++i) {
    const char* pi = static_cast<const char*>(t_at[i]->data);
    for (size_t j = i + 1; j < n_tensors_; ++j) {
      const char* pj = static_cast<const char*>(t_at[j]->data);
      if (pi < pj + elements[j] * tensors_[j].bytes && pj < pi + elements[i] * tensors_[i].bytes)
        return Outcome::decline;
    }
  }
  // One Halide buffer per tensor (1-D), one value per scalar, in the kernel's argument order.
  for (size_t k = 0; k < n_tensors_; ++k) {
    const Kind kind = tensors_[k].kind;
    const int64_t extent = kind == Kind::result ? 1 : kind == Kind::block_scale ? elements[k] : n;
    f.dims[k] = {0, static_cast<int32_t>(extent), 1, 0};
    f.bufs[k] = halide_buffer_t{};
    f.bufs[k].host = host_of(t_at[k]->data);
    f.bufs[k].type = halide_type_of(tensors_[k].dtype);
    f.bufs[k].dimensions = 1;
    f.bufs[k].dim = &f.dims[k];
  }
  for (size_t a = 0; a < n_args_; ++a) {
    const Arg& arg = args_[a];
    if (!arg.scalar) {
      f.argv[a] = &f.bufs[arg.slot];
      continue;
    }
    const double x = s_at[arg.slot];
    Value& v = f.values[arg.slot];
    switch (scalars_[arg.slot].dtype) {
      case DType::f64:
        v.f64 = x;
        break;
      case DType::i32:
      case DType::i64:
        if (!(std::trunc(x) == x && std::fabs(x) < 9.007199254740992e15)) return Outcome::decline;
        if (scalars_[arg.slot].dtype == DType::i32) {
          v.i32 = static_cast<int32_t>(x);
        } else {
          v.i64 = static_cast<int64_t>(x);
        }
        break;
      default:
        v.f32 = static_cast<float>(x);
    }
    f.argv[a] = &v;
  }
  return Outcome::run;
}

}  // namespace opforge
