// The argument checks of a kernel call, and the Halide dims its tensors get: every check runs
// on the whole call before anything is computed, so a bad argument changes nothing.
#include <atomic>
#include <cmath>
#include <cstdio>

#include "opforge/scalar_domain.h"
#include "opforge/suggest.hpp"
#include "runtime/kernel_call.h"
#include "runtime/shape_rules.h"

namespace opforge {

using registry::Descriptor;
using registry::DType;
using registry::Input;

const char* const kNotSplittable =
    "its descriptor's shape.splittable is false: the update reads whole-tensor reductions "
    "such as norms, or indexes rows";

Error op_error(const Descriptor& d, const std::string& msg) {
  return Error("op '" + d.op + "': " + msg);
}

namespace {

std::vector<std::string> names_of(const std::vector<const Input*>& v) {
  std::vector<std::string> out;
  for (const auto* in : v) out.push_back(in->name);
  return out;
}

void require_shape(const Slots& s, const CallArgs& a, size_t k, const std::vector<int64_t>& want,
                   const std::string& why) {
  const TensorView* t = a.t_at[k];
  if (shape_of(*t) != want) {
    throw op_error(s.d, std::string("argument '") + t->name + "' has shape " +
                            shape_text(shape_of(*t)) + " but " + why + " " + shape_text(want));
  }
}

// Multi-tensor form: the flat tensors as K chunks of C, chunk k of model tensor segments[k].
bool segmented_layout(const Slots& s, const CallArgs& a, Layout& l) {
  const Descriptor& d = s.d;
  const size_t seg = slot_of(s, d.shape.segments);
  const size_t first = slot_of(s, d.shape.same_shape.at(0));
  const std::vector<int64_t> shape0 = shape_of(*a.t_at[first]);
  for (size_t k = 0; k < s.tensors.size(); ++k) {
    if (!l.result[k] && k != first && k != seg)
      require_shape(s, a, k, shape0, "'" + std::string(a.t_at[first]->name) + "' has shape");
  }
  const int64_t n = a.elements[first], chunks = a.elements[seg];
  if (n == 0 && chunks == 0) return false;
  if (chunks < 1 || n % chunks != 0 || (n / chunks) % 16 != 0) {
    throw op_error(d, "argument '" + d.shape.segments + "' has " + std::to_string(chunks) +
                          " chunks for " + std::to_string(n) +
                          " elements: the chunk size elements/chunks must be a whole multiple "
                          "of 16 (lay the model out with ModelLayout)");
  }
  const int64_t chunk = n / chunks;
  const auto* table = static_cast<const int32_t*>(a.t_at[seg]->data);
  for (int64_t k = 0; k < chunks; ++k) {
    if (table[k] < 0 || table[k] >= chunks) {
      throw op_error(d, d.shape.segments + "[" + std::to_string(k) +
                            "] = " + std::to_string(table[k]) + " is out of range [0, " +
                            std::to_string(chunks) + ")");
    }
  }
  for (size_t k = 0; k < s.tensors.size(); ++k) {
    if (l.result[k] || k == seg) {
      l.dims[k][0] = {0, static_cast<int32_t>(l.result[k] ? 1 : chunks), 1, 0};
      l.rank[k] = 1;
    } else {
      l.dims[k][0] = {0, static_cast<int32_t>(chunk), 1, 0};
      l.dims[k][1] = {0, static_cast<int32_t>(chunks), static_cast<int32_t>(chunk), 0};
      l.rank[k] = 2;
    }
  }
  return true;
}

bool dense_layout(const Slots& s, const CallArgs& a, Layout& l) {
  const Descriptor& d = s.d;
  const size_t first = d.shape.same_shape.empty() ? 0 : slot_of(s, d.shape.same_shape[0]);
  const std::vector<int64_t> shape0 = shape_of(*a.t_at[first]);
  const int64_t n = a.elements[first], block = d.shape.block;
  for (size_t k = 0; k < s.tensors.size(); ++k) {
    if (s.tensors[k]->role == Input::Role::block_scale) {
      // One fp32 scale per block of the flattened tensors, any shape.
      const int64_t want = block > 0 ? (n + block - 1) / block : 0;
      if (a.elements[k] != want) {
        throw op_error(d, std::string("argument '") + a.t_at[k]->name + "' has " +
                              std::to_string(a.elements[k]) + " elements, expected ceil(" +
                              std::to_string(n) + " / " + std::to_string(block) +
                              ") = " + std::to_string(want) + " (one float32 scale per block of " +
                              std::to_string(block) + " elements of '" + a.t_at[first]->name +
                              "')");
      }
      continue;
    }
    if (!l.result[k] && k != first)
      require_shape(s, a, k, shape0, "'" + std::string(a.t_at[first]->name) + "' has shape");
  }
  if (n == 0) return false;
  for (size_t k = 0; k < s.tensors.size(); ++k) {
    l.dims[k][0] = {0, l.result[k] ? 1 : 0, 1, 0};  // the extent is set per slice
    l.rank[k] = 1;
  }
  return true;
}

bool sparse_layout(const Slots& s, const CallArgs& a, Layout& l) {
  const Descriptor& d = s.d;
  const size_t idx = slot_of(s, d.shape.indices);
  const size_t first_state = slot_of(s, d.shape.same_shape.at(0));
  const TensorView& state = *a.t_at[first_state];
  if (state.rank < 1)
    throw op_error(d, std::string("argument '") + state.name + "' must have rank >= 1");
  const std::vector<int64_t> state_shape = shape_of(state);
  if (a.t_at[idx]->rank != 1) {
    throw op_error(d, "argument '" + d.shape.indices + "' must be a vector, got shape " +
                          shape_text(shape_of(*a.t_at[idx])));
  }
  const int64_t rows = state_shape[0], count = a.t_at[idx]->shape[0];
  const int64_t cols = rows ? a.elements[first_state] / rows : 1;
  std::vector<int64_t> slice_shape = state_shape;
  slice_shape[0] = count;
  for (const auto& name : d.shape.same_shape) {
    require_shape(s, a, slot_of(s, name), state_shape,
                  "'" + std::string(state.name) + "' has shape");
  }
  for (const auto& name : d.shape.row_slices) {
    require_shape(s, a, slot_of(s, name), slice_shape,
                  "with " + std::to_string(count) + " indices it must have shape");
  }
  if (count == 0) return false;
  // Every index is checked before anything runs: a bad one changes nothing.
  for (int64_t k = 0; k < count; ++k) {
    const int64_t v = a.t_at[idx]->dtype == registry::DType::i64
                          ? static_cast<const int64_t*>(a.t_at[idx]->data)[k]
                          : static_cast<const int32_t*>(a.t_at[idx]->data)[k];
    if (v < 0 || v >= rows) {
      throw op_error(d, d.shape.indices + "[" + std::to_string(k) + "] = " + std::to_string(v) +
                            " is out of range [0, " + std::to_string(rows) + ")");
    }
  }
  for (size_t k = 0; k < s.tensors.size(); ++k) {
    if (l.result[k]) {
      l.dims[k][0] = {0, 1, 1, 0};
      l.rank[k] = 1;
    } else if (k == idx) {
      l.dims[k][0] = {0, static_cast<int32_t>(count), 1, 0};
      l.rank[k] = 1;
    } else {
      const int64_t r = a.t_at[k]->shape[0];
      l.dims[k][0] = {0, static_cast<int32_t>(cols), 1, 0};
      l.dims[k][1] = {0, static_cast<int32_t>(r), static_cast<int32_t>(cols), 0};
      l.rank[k] = 2;
    }
  }
  return true;
}

}  // namespace

namespace {

std::atomic<bool> g_scalar_checks{true};

// A scalar within the domain its descriptor declares ("" from older registries: any). An f32
// scalar is checked as the kernel will see it, rounded to float32: 1e39 becomes inf.
void check_domain(const Descriptor& d, const registry::Input& in,
                  const registry::ScalarDomain& domain, double value) {
  if (domain.any) return;
  const double seen =
      in.dtype == DType::f32 ? static_cast<double>(static_cast<float>(value)) : value;
  if (domain.contains(seen)) return;
  char text[64];
  std::snprintf(text, sizeof text, "%.9g", value);
  const bool overflow = std::isfinite(value) && !std::isfinite(seen);
  throw op_error(d, "scalar " + in.name + " = " + text + (overflow ? " overflows float32" : "") +
                        " is outside its domain " + in.domain +
                        " (to pass it anyway: set_scalar_checks(false), or opforge run / bench "
                        "--unchecked-scalars)");
}

}  // namespace

void set_scalar_checks(bool enabled) {
  g_scalar_checks = enabled;
}

bool scalar_checks() {
  return g_scalar_checks;
}

size_t slot_of(const Slots& s, const std::string& name) {
  size_t k = 0;
  while (k < s.tensors.size() && s.tensors[k]->name != name) ++k;
  return k;
}

void match_arguments(const Slots& s, const TensorView* tensors, size_t n_tensors,
                     const ScalarView* scalars, size_t n_scalars, CallArgs& a) {
  const Descriptor& d = s.d;
  for (size_t k = 0; k < n_tensors; ++k) {
    const TensorView& t = tensors[k];
    size_t slot = 0;
    while (slot < s.tensors.size() && s.tensors[slot]->name != t.name) ++slot;
    if (slot == s.tensors.size()) {
      throw op_error(d, std::string("unknown tensor argument '") + t.name + "'" +
                            did_you_mean(t.name, names_of(s.tensors)));
    }
    if (a.t_at[slot]) throw op_error(d, std::string("tensor '") + t.name + "' given twice");
    if (t.dtype != s.tensors[slot]->dtype) {
      const bool index_attr = d.find_attr("Tindices") && d.shape.indices == t.name;
      throw op_error(d, std::string("argument '") + t.name + "' has dtype " +
                            registry::dtype_name(t.dtype) + ", expected " +
                            registry::dtype_name(s.tensors[slot]->dtype) +
                            (index_attr ? std::string(" (the variant with attr Tindices=") +
                                              registry::dtype_name(t.dtype) + " takes those)"
                                        : std::string()));
    }
    if (t.rank < 0 || (t.rank > 0 && !t.shape)) {
      throw op_error(d, std::string("argument '") + t.name + "' has a bad rank");
    }
    a.t_at[slot] = &t;
  }
  bool s_set[kMaxArgs] = {};
  for (size_t k = 0; k < n_scalars; ++k) {
    size_t slot = 0;
    while (slot < s.scalars.size() && s.scalars[slot]->name != scalars[k].name) ++slot;
    if (slot == s.scalars.size()) {
      throw op_error(d, std::string("unknown scalar argument '") + scalars[k].name + "'" +
                            did_you_mean(scalars[k].name, names_of(s.scalars)));
    }
    if (s_set[slot]) throw op_error(d, std::string("scalar '") + scalars[k].name + "' given twice");
    s_set[slot] = true;
    a.s_at[slot] = scalars[k].value;
  }
  for (size_t k = 0; k < s.scalars.size(); ++k) {
    if (!s_set[k]) throw op_error(d, "missing scalar argument '" + s.scalars[k]->name + "'");
  }
  if (!scalar_checks()) return;
  for (size_t k = 0; k < s.scalars.size(); ++k) {
    check_domain(d, *s.scalars[k], s.domains[k], a.s_at[k]);
  }
}

void count_elements(const Slots& s, CallArgs& a) {
  const Descriptor& d = s.d;
  // Dense ops that may run on slices take any element count; the rest at most `limit`.
  const bool split_ok = d.shape.elementwise && d.shape.splittable;
  const int64_t limit = call_limit(d);
  for (size_t k = 0; k < s.tensors.size(); ++k) {
    const TensorView* t = a.t_at[k];
    if (!t) throw op_error(d, "missing tensor argument '" + s.tensors[k]->name + "'");
    int64_t e = 1;
    for (int r = 0; r < t->rank; ++r) {
      if (t->shape[r] < 0) {
        throw op_error(d, std::string("argument '") + t->name + "' has a negative dimension " +
                              shape_text(shape_of(*t)));
      }
      if (__builtin_mul_overflow(e, t->shape[r], &e)) {
        throw op_error(d, std::string("argument '") + t->name +
                              "' has more elements than fit in 64 bits " +
                              shape_text(shape_of(*t)));
      }
    }
    if (e > limit && d.shape.named_dims) {
      throw op_error(d, std::string("argument '") + t->name + "' has " + std::to_string(e) +
                            " elements, more than a kernel call takes (" + std::to_string(limit) +
                            ")");
    }
    if (e > limit && !split_ok) {
      throw op_error(d, std::string("argument '") + t->name + "' has " + std::to_string(e) +
                            " elements, more than this kernel's limit of " + std::to_string(limit) +
                            " per call, and the op cannot be updated in slices (" + kNotSplittable +
                            ")");
    }
    if (e > 0 && !t->data) throw op_error(d, std::string("argument '") + t->name + "' has no data");
    a.elements[k] = e;
  }
}

bool plan_layout(const Slots& s, const CallArgs& a, Layout& l) {
  for (size_t k = 0; k < s.tensors.size(); ++k) {
    l.result[k] = s.tensors[k]->role == Input::Role::result;
    if (l.result[k] && a.elements[k] != 1) {
      throw op_error(s.d, std::string("argument '") + a.t_at[k]->name +
                              "' must hold one element, got shape " +
                              shape_text(shape_of(*a.t_at[k])));
    }
  }
  if (!s.d.shape.segments.empty()) return segmented_layout(s, a, l);
  if (s.d.shape.elementwise) return dense_layout(s, a, l);
  return sparse_layout(s, a, l);
}

void check_no_overlap(const Slots& s, const CallArgs& a) {
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    for (size_t j = i + 1; j < s.tensors.size(); ++j) {
      const char* pi = static_cast<const char*>(a.t_at[i]->data);
      const char* pj = static_cast<const char*>(a.t_at[j]->data);
      if (pi < pj + a.elements[j] * registry::dtype_bytes(a.t_at[j]->dtype) &&
          pj < pi + a.elements[i] * registry::dtype_bytes(a.t_at[i]->dtype)) {
        throw op_error(s.d, std::string("arguments '") + a.t_at[i]->name + "' and '" +
                                a.t_at[j]->name + "' overlap in memory");
      }
    }
  }
}

bool check_named_outputs(const Slots& s, size_t n_in, const TensorView* const* t_at,
                         const std::vector<std::vector<int64_t>>& output_shapes,
                         const std::vector<Input>& output_slots) {
  bool empty = false;
  for (size_t j = 0; j < output_slots.size(); ++j) {
    const TensorView& t = *t_at[n_in + j];
    const std::vector<int64_t>& want = output_shapes[j];
    if (shape_of(t) != want) {
      std::string dims;
      for (const auto& e : output_slots[j].dims) dims += (dims.empty() ? "" : ", ") + e;
      throw op_error(s.d, "output '" + output_slots[j].name + "' has shape " +
                              shape_text(shape_of(t)) + ", expected " + shape_text(want) + " = [" +
                              dims + "]");
    }
    for (int64_t e : want) empty = empty || e == 0;
  }
  // Outputs are written while inputs are read: no output may overlap another tensor.
  auto bytes = [&](size_t k) {
    int64_t n = registry::dtype_bytes(t_at[k]->dtype);
    for (int r = 0; r < t_at[k]->rank; ++r) n *= t_at[k]->shape[r];
    return n;
  };
  for (size_t a = n_in; a < s.tensors.size(); ++a) {
    for (size_t o = 0; o < s.tensors.size(); ++o) {
      if (o == a) continue;
      const char* pa = static_cast<const char*>(t_at[a]->data);
      const char* po = static_cast<const char*>(t_at[o]->data);
      if (bytes(a) && bytes(o) && pa < po + bytes(o) && po < pa + bytes(a)) {
        throw op_error(s.d, std::string("output '") + t_at[a]->name + "' overlaps argument '" +
                                t_at[o]->name + "' in memory");
      }
    }
  }
  return empty;
}

}  // namespace opforge
