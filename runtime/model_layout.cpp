// Multi-tensor apply: model layouts, per-tensor views of flat buffers, one call per model.
#include "opforge/model_layout.hpp"

#include <set>

#include "runtime/suggest.h"

namespace opforge {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t k = 0; k < s.size(); ++k) t += (k ? ", " : "") + std::to_string(s[k]);
  return t + "]";
}

// A flat buffer must hold the whole layout: `who` prefixes the message naming the argument.
void check_flat(const std::string& who, const ModelLayout& layout, const char* name,
                const int64_t* shape, int rank) {
  const std::string arg = name ? name : "(unnamed)";
  if (rank < 0 || (rank > 0 && !shape)) {
    throw Error(who + ": flat argument '" + arg + "' has a bad rank");
  }
  int64_t e = 1;
  for (int r = 0; r < rank; ++r) {
    if (shape[r] < 0) {
      throw Error(who + ": flat argument '" + arg + "' has a negative dimension " +
                  shape_text(std::vector<int64_t>(shape, shape + rank)));
    }
    if (__builtin_mul_overflow(e, shape[r], &e)) {
      throw Error(who + ": flat argument '" + arg + "' has more elements than fit in 64 bits");
    }
  }
  if (e != layout.total_elements()) {
    throw Error(who + ": flat argument '" + arg + "' has " + std::to_string(e) +
                " elements, the model layout needs " + std::to_string(layout.total_elements()) +
                " (" + std::to_string(layout.size()) + " tensors of " +
                std::to_string(layout.model_elements()) + " elements, padded to " +
                std::to_string(layout.alignment()) + "-element alignment)");
  }
}

void check_flat(const std::string& who, const ModelLayout& layout, const TensorView* flat,
                size_t n_flat) {
  if (n_flat && !flat) throw Error(who + ": NULL flat tensor array");
  for (size_t k = 0; k < n_flat; ++k) {
    check_flat(who, layout, flat[k].name, flat[k].shape, flat[k].rank);
  }
}

void check_flat(const std::string& who, const ModelLayout& layout,
                const std::vector<Tensor>& flat) {
  for (const Tensor& t : flat) {
    check_flat(who, layout, t.name.c_str(), t.shape.data(), static_cast<int>(t.shape.size()));
  }
}

void check_index(const ModelLayout& layout, size_t i) {
  if (i >= layout.size()) {
    throw Error("tensor_views: tensor index " + std::to_string(i) + " is out of range (" +
                std::to_string(layout.size()) + " tensors)");
  }
}

}  // namespace

ModelLayout::ModelLayout(std::vector<TensorShape> tensors, int64_t alignment)
    : tensors_(std::move(tensors)), alignment_(alignment) {
  if (alignment < 1 || alignment > kMaxAlignment || (alignment & (alignment - 1)) != 0) {
    throw Error("model layout: alignment must be a power of two from 1 to " +
                std::to_string(kMaxAlignment) + " elements, got " + std::to_string(alignment));
  }
  std::set<std::string> names;
  int64_t at = 0;
  auto align_up = [&](int64_t x, const std::string& where) {
    int64_t up = 0;
    if (__builtin_add_overflow(x, alignment - 1, &up)) {
      throw Error("model layout: more elements than fit in 64 bits at tensor '" + where + "'");
    }
    return up / alignment * alignment;
  };
  offsets_.reserve(tensors_.size() + 1);
  elements_.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorShape& t = tensors_[i];
    if (t.name.empty()) {
      throw Error("model layout: tensor " + std::to_string(i) + " has no name");
    }
    if (!names.insert(t.name).second) {
      throw Error("model layout: tensor name '" + t.name + "' appears twice (tensor " +
                  std::to_string(i) + ")");
    }
    int64_t e = 1;
    for (int64_t d : t.shape) {
      if (d < 0) {
        throw Error("model layout: tensor '" + t.name + "' has a negative dimension " +
                    shape_text(t.shape));
      }
      if (__builtin_mul_overflow(e, d, &e)) {
        throw Error("model layout: tensor '" + t.name + "' has more elements than fit in 64 bits " +
                    shape_text(t.shape));
      }
    }
    at = align_up(at, t.name);
    offsets_.push_back(at);
    elements_.push_back(e);
    if (__builtin_add_overflow(at, e, &at) ||
        __builtin_add_overflow(model_elements_, e, &model_elements_)) {
      throw Error("model layout: more elements than fit in 64 bits at tensor '" + t.name + "'");
    }
  }
  offsets_.push_back(tensors_.empty() ? 0 : align_up(at, tensors_.back().name));
}

size_t ModelLayout::index_of(const std::string& name) const {
  std::vector<std::string> names;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].name == name) return i;
    names.push_back(tensors_[i].name);
  }
  throw Error("model layout has no tensor '" + name + "'" + did_you_mean(name, names));
}

void check_multi_tensor(const registry::Descriptor& d) {
  if (!d.shape.elementwise) {
    throw Error("op '" + d.op + "' is a sparse op (it updates the rows named by '" +
                d.shape.indices +
                "'): a model's flat buffers can only be updated in one call by elementwise ops");
  }
  if (!d.shape.splittable) {
    // The hook for a segmented kernel form: an op whose update reads per-tensor reductions
    // (LAMB's and LARS's norms) would take layout.offsets() and reduce per segment. Until the
    // registry has such kernels, these ops are called once per tensor (tensor_views).
    throw Error("op '" + d.op +
                "' needs per-tensor norms: its update reads reductions over each whole tensor "
                "(descriptor shape.splittable is false), so one call over the flat buffers would "
                "mix tensors; call it once per tensor (tensor_views) until a segmented kernel "
                "takes the layout's offsets table");
  }
}

std::vector<TensorView> tensor_views(const ModelLayout& layout, size_t i, const TensorView* flat,
                                     size_t n_flat) {
  check_index(layout, i);
  check_flat("tensor_views", layout, flat, n_flat);
  const TensorShape& t = layout.tensor(i);
  std::vector<TensorView> out(flat, flat + n_flat);
  for (TensorView& v : out) {
    v.data = static_cast<uint8_t*>(v.data) + layout.offset(i) * registry::dtype_bytes(v.dtype);
    v.shape = t.shape.data();
    v.rank = static_cast<int>(t.shape.size());
  }
  return out;
}

std::vector<Tensor> tensor_views(const ModelLayout& layout, size_t i,
                                 const std::vector<Tensor>& flat) {
  check_index(layout, i);
  check_flat("tensor_views", layout, flat);
  std::vector<Tensor> out;
  for (const Tensor& t : flat) {
    out.push_back(
        {t.name, static_cast<uint8_t*>(t.data) + layout.offset(i) * registry::dtype_bytes(t.dtype),
         t.dtype, layout.tensor(i).shape});
  }
  return out;
}

void call_model(Kernel& k, const ModelLayout& layout, const TensorView* flat, size_t n_flat,
                const ScalarView* scalars, size_t n_scalars) {
  const registry::Descriptor& d = k.descriptor();
  check_multi_tensor(d);
  check_flat("op '" + d.op + "'", layout, flat, n_flat);
  k.call(flat, n_flat, scalars, n_scalars);
}

void call_model(Kernel& k, const ModelLayout& layout, const std::vector<Tensor>& flat,
                const std::map<std::string, double>& scalars) {
  const registry::Descriptor& d = k.descriptor();
  check_multi_tensor(d);
  check_flat("op '" + d.op + "'", layout, flat);
  k.call(flat, scalars);
}

}  // namespace opforge
