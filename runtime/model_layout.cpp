// Multi-tensor apply: model layouts, per-tensor views of flat buffers, one call per model.
#include "opforge/model_layout.hpp"

#include <set>

#include "opforge/suggest.hpp"
#include "runtime/views.h"

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

// Arguments that are not flat model buffers: results (one element, e.g. found_inf) and the
// chunk table of segmented kernels. `d` null: every argument is flat.
bool not_flat(const registry::Descriptor* d, const char* name) {
  if (!d || !name) return false;
  const registry::Input* in = d->find_input(name);
  return in && (in->role == registry::Input::Role::result || d->shape.segments == name);
}

// The block scales of 8-bit states (one absmax per d.shape.block elements): flat buffers of
// their own length, total_elements() / block.
bool is_block_scale(const registry::Descriptor* d, const char* name) {
  if (!d || !name || d->shape.block <= 0) return false;
  const registry::Input* in = d->find_input(name);
  return in && in->role == registry::Input::Role::block_scale;
}

// 8-bit states: every tensor must start on a block, so that no block (one absmax) straddles
// two tensors, and the absmaxes of tensor i are the flat absmaxes from offset(i) / block.
void check_blocks(const std::string& who, const ModelLayout& layout,
                  const registry::Descriptor* d) {
  if (!d || d->shape.block <= 0 || layout.alignment() % d->shape.block == 0) return;
  throw Error(who + ": op '" + d->op + "' keeps 8-bit states in blocks of " +
              std::to_string(d->shape.block) +
              " elements with one absmax each; lay the model out with an alignment that is a "
              "multiple of " +
              std::to_string(d->shape.block) + " (ModelLayout(tensors, " +
              std::to_string(d->shape.block) + ")) so that no block straddles two tensors, got " +
              std::to_string(layout.alignment()));
}

void check_flat(const std::string& who, const ModelLayout& layout, const TensorView* flat,
                size_t n_flat, const registry::Descriptor* d = nullptr) {
  if (n_flat && !flat) throw Error(who + ": NULL flat tensor array");
  check_blocks(who, layout, d);
  for (size_t k = 0; k < n_flat; ++k) {
    if (not_flat(d, flat[k].name)) continue;
    if (is_block_scale(d, flat[k].name)) {
      // The kernel checks the count against the codes' (ceil(total / block)); the layout
      // makes total a multiple of the block.
      continue;
    }
    check_flat(who, layout, flat[k].name, flat[k].shape, flat[k].rank);
  }
}

void check_flat(const std::string& who, const ModelLayout& layout, const std::vector<Tensor>& flat,
                const registry::Descriptor* d = nullptr) {
  check_blocks(who, layout, d);
  for (const Tensor& t : flat) {
    if (not_flat(d, t.name.c_str()) || is_block_scale(d, t.name.c_str())) continue;
    check_flat(who, layout, t.name.c_str(), t.shape.data(), static_cast<int>(t.shape.size()));
  }
}

// The chunk table of a segmented kernel: chunks of alignment() elements, each naming the tensor
// whose [offset, next offset) holds it.
std::vector<int32_t> chunk_table(const registry::Descriptor& d, const ModelLayout& layout) {
  const int64_t c = layout.alignment();
  if (c % 16 != 0) {
    throw Error("op '" + d.op + "' reduces per tensor over chunks of the layout's alignment, " +
                "which must be a multiple of 16 (2048 is a good chunk), got " + std::to_string(c));
  }
  const int64_t chunks = layout.total_elements() / c;
  if (chunks > INT32_MAX) throw Error("op '" + d.op + "': too many chunks for one call");
  std::vector<int32_t> table(static_cast<size_t>(chunks));
  for (size_t i = 0; i < layout.size(); ++i) {
    for (int64_t k = layout.offset(i) / c; k < layout.offsets()[i + 1] / c; ++k)
      table[static_cast<size_t>(k)] = static_cast<int32_t>(i);
  }
  return table;
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
  // Splittable descriptors predate multi_tensor: they are multi-tensor too.
  if (!d.shape.multi_tensor && !d.shape.splittable) {
    throw Error("op '" + d.op +
                "' needs per-tensor norms: its update reads reductions over each whole tensor, "
                "so one call over the flat buffers would mix tensors; use its multi-tensor form "
                "(multi_tensor_" +
                d.op +
                ", per-tensor norms over the layout's chunks) or call it once per tensor "
                "(tensor_views)");
  }
}

std::vector<TensorView> tensor_views(const ModelLayout& layout, size_t i, const TensorView* flat,
                                     size_t n_flat, const registry::Descriptor* d) {
  check_index(layout, i);
  check_flat("tensor_views", layout, flat, n_flat, d);
  const TensorShape& t = layout.tensor(i);
  std::vector<TensorView> out(flat, flat + n_flat);
  for (TensorView& v : out) {
    if (not_flat(d, v.name)) continue;  // a result (found_inf) is shared by every call
    if (is_block_scale(d, v.name)) {
      // A view's shape points into the layout, which holds no block counts.
      throw Error("tensor_views: '" + std::string(v.name) +
                  "' is a block scale of 8-bit states: take the per-tensor views of op '" + d->op +
                  "' with the std::vector<Tensor> overload");
    }
    v.data = static_cast<uint8_t*>(v.data) + layout.offset(i) * registry::dtype_bytes(v.dtype);
    v.shape = t.shape.data();
    v.rank = static_cast<int>(t.shape.size());
  }
  return out;
}

std::vector<Tensor> tensor_views(const ModelLayout& layout, size_t i,
                                 const std::vector<Tensor>& flat, const registry::Descriptor* d) {
  check_index(layout, i);
  check_flat("tensor_views", layout, flat, d);
  std::vector<Tensor> out;
  for (const Tensor& t : flat) {
    if (not_flat(d, t.name.c_str())) {
      out.push_back(t);
      continue;
    }
    if (is_block_scale(d, t.name.c_str())) {  // the absmaxes of tensor i's blocks
      const int64_t b = d->shape.block;
      out.push_back(
          {t.name,
           static_cast<uint8_t*>(t.data) + layout.offset(i) / b * registry::dtype_bytes(t.dtype),
           t.dtype,
           {(layout.elements(i) + b - 1) / b}});
      continue;
    }
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
  check_flat("op '" + d.op + "'", layout, flat, n_flat, &d);
  if (d.shape.segments.empty()) {
    k.call(flat, n_flat, scalars, n_scalars);
    return;
  }
  // Segmented: the chunk table comes from the layout, never from the caller.
  for (size_t i = 0; i < n_flat; ++i) {
    if (flat[i].name && d.shape.segments == flat[i].name)
      throw Error("op '" + d.op + "': call_model builds '" + d.shape.segments +
                  "' from the layout; do not pass it");
  }
  const std::vector<int32_t> table = chunk_table(d, layout);
  const int64_t chunks = static_cast<int64_t>(table.size());
  std::vector<TensorView> args(flat, flat + n_flat);
  args.push_back({d.shape.segments.c_str(), const_cast<int32_t*>(table.data()),
                  registry::DType::i32, &chunks, 1});
  k.call(args.data(), args.size(), scalars, n_scalars);
}

void call_model(Kernel& k, const ModelLayout& layout, const std::vector<Tensor>& flat,
                const std::map<std::string, double>& scalars) {
  const Views v(flat, scalars);
  call_model(k, layout, v.tensors.data(), v.tensors.size(), v.scalars.data(), v.scalars.size());
}

}  // namespace opforge
