// oneDNN 2.6 peers of the row-wise ops, gelu and silu, on the caller's buffers (no copies):
//   layer_norm -> layer_normalization_forward (inference, use_scale | use_shift)
//   softmax    -> softmax_forward (inference, axis 1 of [R, C])
//   gelu       -> eltwise_forward, eltwise_gelu_erf (approximate=none) / eltwise_gelu_tanh
//   silu       -> eltwise_forward, eltwise_swish with alpha 1 (x * sigmoid(1 * x))
//   rms_norm, add_rms_norm, add_layer_norm, group_norm, silu_mul -> none (peers::onednn_missing
//   says why),
//                 compared with the bandwidth kernel only.
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <unordered_map>

#include "registry/cli/peers/onednn.h"

namespace opforge::peers {

namespace {

const Tensor& find_tensor(const std::vector<Tensor>& tensors, const std::string& op,
                          const std::string& name) {
  for (const auto& t : tensors) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("oneDNN " + op + " peer: no tensor '" + name + "'");
}

// fp32, or bf16 for the bf16 activation variants (oneDNN computes those in fp32 as well).
dnnl::memory::desc tensor_desc(const Tensor& t, const std::string& op) {
  if (t.dtype != registry::DType::f32 && t.dtype != registry::DType::bf16)
    throw std::runtime_error("oneDNN " + op + " peer: tensor '" + t.name +
                             "' is neither float32 nor bfloat16");
  const auto type = t.dtype == registry::DType::f32 ? dnnl::memory::data_type::f32
                                                    : dnnl::memory::data_type::bf16;
  dnnl::memory::dims dims(t.shape.begin(), t.shape.end());
  using tag = dnnl::memory::format_tag;
  switch (dims.size()) {
    case 1:
      return {dims, type, tag::a};
    case 2:
      return {dims, type, tag::ab};
    default:
      throw std::runtime_error("oneDNN " + op + " peer: tensor '" + t.name + "' has rank " +
                               std::to_string(dims.size()) + ", expected 1 or 2");
  }
}

// One primitive and its arguments, each a memory object over the caller's buffer.
struct Prepared : PeerRun {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::primitive primitive;
  std::unordered_map<int, dnnl::memory> args;
  void bind(int arg, const Tensor& t, const std::string& op) {
    args[arg] = dnnl::memory(tensor_desc(t, op), engine, t.data);
  }
  void run() override {
    primitive.execute(stream, args);
    stream.wait();
  }
};

}  // namespace

std::unique_ptr<PeerRun> onednn_norm_peer(const std::string& op,
                                          const std::map<std::string, std::string>& attrs,
                                          const std::vector<Tensor>& tensors,
                                          const std::map<std::string, double>& scalars) {
  if (op != "layer_norm" && op != "softmax" && op != "gelu" && op != "silu") return nullptr;
  try {
    auto p = std::make_unique<Prepared>();
    const Tensor& x = find_tensor(tensors, op, "x");
    const Tensor& y = find_tensor(tensors, op, "y");
    const dnnl::memory::desc md = tensor_desc(x, op);
    p->bind(DNNL_ARG_SRC, x, op);
    p->bind(DNNL_ARG_DST, y, op);
    if (op == "silu") {
      const dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::eltwise_swish, md, 1.f, 0.f);
      p->primitive = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(desc, p->engine));
      p->name = "oneDNN eltwise_swish";
      return p;
    }
    if (op == "layer_norm") {
      auto eps = scalars.find("eps");
      if (eps == scalars.end()) throw std::runtime_error("oneDNN layer_norm peer: no scalar eps");
      const dnnl::layer_normalization_forward::desc desc(
          dnnl::prop_kind::forward_inference, md, static_cast<float>(eps->second),
          dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
      p->primitive = dnnl::layer_normalization_forward(
          dnnl::layer_normalization_forward::primitive_desc(desc, p->engine));
      p->bind(DNNL_ARG_SCALE, find_tensor(tensors, op, "gamma"), op);
      p->bind(DNNL_ARG_SHIFT, find_tensor(tensors, op, "beta"), op);
      p->name = "oneDNN layer_normalization";
    } else if (op == "softmax") {
      const dnnl::softmax_forward::desc desc(dnnl::prop_kind::forward_inference, md,
                                             static_cast<int>(x.shape.size()) - 1);
      p->primitive = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(desc, p->engine));
      p->name = "oneDNN softmax";
    } else {
      auto a = attrs.find("approximate");
      const bool tanh_form = a != attrs.end() && a->second == "tanh";
      const dnnl::eltwise_forward::desc desc(
          dnnl::prop_kind::forward_inference,
          tanh_form ? dnnl::algorithm::eltwise_gelu_tanh : dnnl::algorithm::eltwise_gelu_erf, md);
      p->primitive = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(desc, p->engine));
      p->name = tanh_form ? "oneDNN eltwise_gelu_tanh" : "oneDNN eltwise_gelu_erf";
    }
    return p;
  } catch (const dnnl::error& e) {
    throw std::runtime_error("oneDNN " + op + ": " + e.what());
  }
}

}  // namespace opforge::peers
