// oneDNN peer of matmul and linear: dnnl::matmul on the caller's tensors. The transposes are
// strides of the memory descriptors (no copies), a tensor without the batch dim is a batch of 1
// that oneDNN broadcasts, as opforge's runtime does.
#include <dnnl.hpp>
#include <stdexcept>
#include <unordered_map>

#include "registry/cli/peers/onednn.h"

namespace opforge::peers {

namespace {

const Tensor& tensor_named(const std::vector<Tensor>& ts, const std::string& name) {
  for (const auto& t : ts) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("oneDNN matmul: no tensor '" + name + "'");
}

bool attr_true(const std::map<std::string, std::string>& attrs, const std::string& name) {
  auto it = attrs.find(name);
  return it != attrs.end() && it->second == "true";
}

// The logical [batch, rows, cols] of op(t) (op = transpose when `transposed`) over t's
// row-major storage.
dnnl::memory::desc operand(const Tensor& t, bool transposed) {
  const size_t r = t.shape.size();
  if (r != 2 && r != 3) throw std::runtime_error("oneDNN matmul: '" + t.name + "' is not 2-D/3-D");
  const int64_t batch = r == 3 ? t.shape[0] : 1, rows = t.shape[r - 2], cols = t.shape[r - 1];
  using dims = dnnl::memory::dims;
  const dims shape = transposed ? dims{batch, cols, rows} : dims{batch, rows, cols};
  const dims strides = transposed ? dims{rows * cols, 1, cols} : dims{rows * cols, cols, 1};
  return dnnl::memory::desc(shape, dnnl::memory::data_type::f32, strides);
}

struct MatmulRun : PeerRun {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul prim;
  std::unordered_map<int, dnnl::memory> args;
  void run() override {
    prim.execute(stream, args);
    stream.wait();
  }
};

}  // namespace

std::unique_ptr<PeerRun> onednn_matmul_peer(const std::string& op,
                                            const std::map<std::string, std::string>& attrs,
                                            const std::vector<Tensor>& tensors,
                                            const std::map<std::string, double>& /*scalars*/) {
  if (op != "matmul" && op != "linear") return nullptr;
  // linear: x . weight^T + bias, the bias as oneDNN's [1, 1, N] bias operand (fused, as the
  // linear op fuses it).
  const bool linear = op == "linear";
  const Tensor &a = tensor_named(tensors, linear ? "x" : "a"),
               &b = tensor_named(tensors, linear ? "weight" : "b"),
               &c = tensor_named(tensors, linear ? "y" : "c");
  try {
    auto r = std::make_unique<MatmulRun>();
    const dnnl::memory::desc amd = operand(a, !linear && attr_true(attrs, "transpose_a")),
                             bmd = operand(b, linear || attr_true(attrs, "transpose_b")),
                             cmd = operand(c, false);
    if (linear) {
      const Tensor& bias = tensor_named(tensors, "bias");
      const dnnl::memory::desc biasmd({1, 1, bias.shape.at(0)}, dnnl::memory::data_type::f32,
                                      dnnl::memory::format_tag::abc);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(amd, bmd, biasmd, cmd), r->engine);
      r->prim = dnnl::matmul(pd);
      r->args = {{DNNL_ARG_BIAS, dnnl::memory(biasmd, r->engine, bias.data)}};
      r->name = std::string("oneDNN matmul with bias (") + pd.impl_info_str() + ")";
    } else {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(amd, bmd, cmd), r->engine);
      r->prim = dnnl::matmul(pd);
      r->name = std::string("oneDNN matmul (") + pd.impl_info_str() + ")";
    }
    r->args.insert({{DNNL_ARG_SRC, dnnl::memory(amd, r->engine, a.data)},
                    {DNNL_ARG_WEIGHTS, dnnl::memory(bmd, r->engine, b.data)},
                    {DNNL_ARG_DST, dnnl::memory(cmd, r->engine, c.data)}});
    return r;
  } catch (const dnnl::error& e) {
    throw std::runtime_error(std::string("oneDNN matmul: ") + e.what());
  }
}

}  // namespace opforge::peers
