// opforge runtime: multi-tensor apply. A model's tensors (parameters, gradients, optimizer
// states) live back to back in flat buffers, one per op argument, at the offsets of a
// ModelLayout; an elementwise op then updates the whole model in ONE kernel call over the flat
// buffers instead of one call per tensor. No libHalide.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "opforge/runtime.hpp"

namespace opforge {

// One tensor of a model: a name (unique in the model) and a shape (rank 0 is one element).
struct TensorShape {
  std::string name;
  std::vector<int64_t> shape;
};

// Where each tensor of a model lies in the flat buffers: tensor i occupies elements
// [offset(i), offset(i) + elements(i)), and every offset is a multiple of alignment() elements,
// so with 64-byte aligned buffers and the default alignment every tensor starts on a cache line
// for fp32 and for 16-bit (bf16/f16) tensors alike. The elements between one tensor's end and
// the next offset (and up to total_elements()) are padding.
class ModelLayout {
 public:
  // 32 elements: 128 B of fp32, 64 B of bf16/f16.
  static constexpr int64_t kDefaultAlignment = 32;
  static constexpr int64_t kMaxAlignment = int64_t(1) << 20;

  // Throws Error for an alignment that is not a power of two in [1, kMaxAlignment], an empty
  // or duplicate tensor name, a negative dimension, or a model whose padded size overflows
  // int64.
  explicit ModelLayout(std::vector<TensorShape> tensors, int64_t alignment = kDefaultAlignment);

  size_t size() const { return tensors_.size(); }  // tensors
  const std::vector<TensorShape>& tensors() const { return tensors_; }
  const TensorShape& tensor(size_t i) const { return tensors_.at(i); }
  int64_t alignment() const { return alignment_; }

  int64_t offset(size_t i) const { return offsets_.at(i); }
  int64_t elements(size_t i) const { return elements_.at(i); }
  // The offsets table kernels take: size() + 1 entries, offsets()[i] = offset(i) and
  // offsets().back() = total_elements(); [offsets()[i], offsets()[i + 1]) is tensor i and the
  // padding after it.
  const std::vector<int64_t>& offsets() const { return offsets_; }
  const std::vector<int64_t>& element_counts() const { return elements_; }  // size() entries
  // Length of every flat buffer: the model's elements plus padding.
  int64_t total_elements() const { return offsets_.back(); }
  // The model's own elements (parameters), without padding.
  int64_t model_elements() const { return model_elements_; }

  // Index of the tensor named `name`; throws Error (with a suggestion) when there is none.
  size_t index_of(const std::string& name) const;

 private:
  std::vector<TensorShape> tensors_;
  int64_t alignment_;
  std::vector<int64_t> offsets_;
  std::vector<int64_t> elements_;
  int64_t model_elements_ = 0;
};

// Throws Error unless the op of `d` can update a whole model in one call over flat buffers:
// descriptor shape.multi_tensor (dense, no per-tensor reduction unless segmented) or, for
// descriptors that predate it, splittable. apply_lamb and apply_lars need per-tensor norms
// (their multi_tensor_ forms take the layout) and sparse ops index rows; the message names the
// op and says why.
void check_multi_tensor(const registry::Descriptor& d);

// Tensor i's part of each flat buffer: the same names and dtypes, data advanced by offset(i)
// elements, the tensor's own shape (pointing into `layout`). Every flat buffer must have
// layout.total_elements() elements (Error naming the argument and both counts). The views are
// valid while the flat buffers and the layout live: calling Kernel::call with them once per
// tensor is the per-tensor form of call_model.
// With `d`, its results (one-element tensors such as found_inf) are passed through unchanged,
// shared by every per-tensor call; the block scales of 8-bit states (one absmax per
// d->shape.block elements, flat buffers of total_elements() / block) are cut at
// offset(i) / block, ceil(elements / block) long (the Tensor overload only: a TensorView's
// shape would have nowhere to live).
std::vector<TensorView> tensor_views(const ModelLayout& layout, size_t i, const TensorView* flat,
                                     size_t n_flat, const registry::Descriptor* d = nullptr);
std::vector<Tensor> tensor_views(const ModelLayout& layout, size_t i,
                                 const std::vector<Tensor>& flat,
                                 const registry::Descriptor* d = nullptr);

// 8-bit states (descriptor shape.block): the layout's alignment must be a multiple of the block,
// so that every tensor starts on a block and no absmax covers two tensors; their block-scale
// buffers hold total_elements() / block absmaxes. Ops with loss scaling (found_inf: a reduction
// over the whole call) qualify; so do segmented
// forms (descriptor shape.segments, e.g. multi_tensor_apply_lamb), whose per-tensor norms run
// over chunks of layout.alignment() elements (a multiple of 16; lay such models out with
// ModelLayout(tensors, 2048)): call_model builds their chunk table from the layout. Results
// (found_inf) are passed as one-element tensors beside the flat buffers.
//
// Multi-tensor apply: ONE Kernel::call over the flat buffers (one per tensor argument of the
// kernel, each of layout.total_elements() elements, dtypes as the descriptor says) updates
// every tensor of the model with the same scalars. Throws Error when check_multi_tensor fails
// or a flat buffer's element count differs from the layout's total, before anything runs;
// otherwise as Kernel::call (names, dtypes, shapes, overlap; models over the per-call limit
// run in slices).
//
// Padding is updated too: it goes through the op's update like any element. Every real
// element equals, bit for bit, what one call per tensor (tensor_views) gives, whatever the
// padding holds, since an elementwise op never mixes elements. Keep padding finite, zeros
// best: with zeros, Adam, SGD, momentum and most ops keep it zero (a narrow `model` copy gets
// zeros too), while ops that divide by a state without epsilon (Adagrad) may turn it into NaN;
// never reduce over whole flat buffers (norms, sums) without skipping padding.
void call_model(Kernel& k, const ModelLayout& layout, const TensorView* flat, size_t n_flat,
                const ScalarView* scalars, size_t n_scalars);
void call_model(Kernel& k, const ModelLayout& layout, const std::vector<Tensor>& flat,
                const std::map<std::string, double>& scalars);

}  // namespace opforge
