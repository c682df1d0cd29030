// oneDNN 2.6 peer of scaled_dot_product_attention: the unfused path a framework takes without
// a fused kernel, on the caller's q, k, v and o (no copies of them):
//   scores = matmul(q, k^T) * scale [+ mask]          dnnl::matmul, output scale attr, the
//                                                      causal or given additive mask as a
//                                                      binary_add post-op
//   p      = softmax(scores) over the keys            dnnl::softmax_forward, in place
//   o      = matmul(p, v)                             dnnl::matmul
// The B*H*L*S score matrix is a real buffer (268 MB at B = 1, H = 16, L = S = 2048), as in
// torch's math path. Grouped-query heads need no copies either: the H / Hkv query heads that
// share a kv head are adjacent in q and o, so q viewed as [B, Hkv, (H/Hkv)*L, D] stacks their
// rows against one [S, D] k and v (the same matmul shapes as nn_matmul's peer, batched over
// B*Hkv); the causal mask [(H/Hkv)*L, S] then repeats the L x S triangle per stacked head.
#include <cmath>
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "registry/cli/peers/onednn.h"

namespace opforge::peers {

namespace {

const Tensor& named(const std::vector<Tensor>& ts, const std::string& name) {
  for (const auto& t : ts) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("oneDNN attention peer: no tensor '" + name + "'");
}

struct AttentionRun : PeerRun {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<float> scores, mask;
  struct Step {
    dnnl::primitive prim;
    std::unordered_map<int, dnnl::memory> args;
  };
  std::vector<Step> steps;
  void run() override {
    for (auto& s : steps) s.prim.execute(stream, s.args);
    stream.wait();
  }
};

}  // namespace

std::unique_ptr<PeerRun> onednn_attention_peer(const std::string& op,
                                               const std::map<std::string, std::string>& attrs,
                                               const std::vector<Tensor>& tensors,
                                               const std::map<std::string, double>& scalars) {
  const bool masked = op == "scaled_dot_product_attention_masked";
  if (op != "scaled_dot_product_attention" && !masked) return nullptr;
  const Tensor &q = named(tensors, "q"), &k = named(tensors, "k"), &v = named(tensors, "v"),
               &o = named(tensors, "o");
  if (q.shape.size() != 4 || k.shape.size() != 4)
    throw std::runtime_error("oneDNN attention peer: q and k must be [B, H, L, D]");
  const int64_t B = q.shape[0], H = q.shape[1], L = q.shape[2], D = q.shape[3];
  const int64_t Hkv = k.shape[1], S = k.shape[2], G = H / Hkv, R = G * L;
  auto it = attrs.find("causal");
  const bool causal = it != attrs.end() && it->second == "true";
  auto sc = scalars.find("scale");
  const float scale = sc != scalars.end() && sc->second > 0
                          ? static_cast<float>(sc->second)
                          : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  try {
    auto r = std::make_unique<AttentionRun>();
    r->scores.assign(static_cast<size_t>(B * H * L * S), 0.0f);
    using dims = dnnl::memory::dims;
    const auto f32 = dnnl::memory::data_type::f32;
    const dnnl::memory::desc qmd(dims{B, Hkv, R, D}, f32, dims{Hkv * R * D, R * D, D, 1});
    const dnnl::memory::desc ktmd(dims{B, Hkv, D, S}, f32, dims{Hkv * S * D, S * D, 1, D});
    const dnnl::memory::desc vmd(dims{B, Hkv, S, D}, f32, dims{Hkv * S * D, S * D, D, 1});
    const dnnl::memory::desc smd(dims{B, Hkv, R, S}, f32, dims{Hkv * R * S, R * S, S, 1});
    const dnnl::memory::desc omd = qmd;
    const dnnl::memory smem(smd, r->engine, r->scores.data());

    dnnl::primitive_attr qk_attr;
    qk_attr.set_output_scales(0, {scale});
    dnnl::memory::desc mmd;
    if (causal || masked) {
      // causal: top-left, key s is masked for query l when s > l (as the opforge op); masked:
      // the caller's [L, S] mask, repeated for each query head stacked in the rows; a bool mask
      // (oneDNN 2.6 has none) as the additive one it means, 0 where true and -inf where false.
      r->mask.assign(static_cast<size_t>(R * S), 0.0f);
      const Tensor* given = masked ? &named(tensors, "mask") : nullptr;
      auto given_at = [given](int64_t i) {
        if (given->dtype == registry::DType::b8)
          return static_cast<const uint8_t*>(given->data)[i] ? 0.0f : -INFINITY;
        return static_cast<const float*>(given->data)[i];
      };
      for (int64_t row = 0; row < R; ++row) {
        for (int64_t s = 0; s < S; ++s) {
          r->mask[row * S + s] = given         ? given_at((row % L) * S + s)
                                 : s > row % L ? -INFINITY
                                               : 0.0f;
        }
      }
      mmd = dnnl::memory::desc(dims{1, 1, R, S}, f32, dims{R * S, R * S, S, 1});
      dnnl::post_ops po;
      po.append_binary(dnnl::algorithm::binary_add, mmd);
      qk_attr.set_post_ops(po);
    }
    dnnl::matmul::primitive_desc qk_pd(dnnl::matmul::desc(qmd, ktmd, smd), qk_attr, r->engine);
    AttentionRun::Step qk{dnnl::matmul(qk_pd),
                          {{DNNL_ARG_SRC, dnnl::memory(qmd, r->engine, q.data)},
                           {DNNL_ARG_WEIGHTS, dnnl::memory(ktmd, r->engine, k.data)},
                           {DNNL_ARG_DST, smem}}};
    if (causal || masked)
      qk.args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] =
          dnnl::memory(mmd, r->engine, r->mask.data());
    r->steps.push_back(std::move(qk));

    const dnnl::memory::desc rows(dims{B * Hkv * R, S}, f32, dnnl::memory::format_tag::ab);
    const dnnl::memory rmem(rows, r->engine, r->scores.data());
    dnnl::softmax_forward::primitive_desc sm_pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, rows, 1), r->engine);
    r->steps.push_back(
        {dnnl::softmax_forward(sm_pd), {{DNNL_ARG_SRC, rmem}, {DNNL_ARG_DST, rmem}}});

    dnnl::matmul::primitive_desc pv_pd(dnnl::matmul::desc(smd, vmd, omd), r->engine);
    r->steps.push_back({dnnl::matmul(pv_pd),
                        {{DNNL_ARG_SRC, smem},
                         {DNNL_ARG_WEIGHTS, dnnl::memory(vmd, r->engine, v.data)},
                         {DNNL_ARG_DST, dnnl::memory(omd, r->engine, o.data)}}});
    r->name = std::string("oneDNN matmul+softmax+matmul (") + qk_pd.impl_info_str() + ")";
    return r;
  } catch (const dnnl::error& e) {
    throw std::runtime_error(std::string("oneDNN attention: ") + e.what());
  }
}

}  // namespace opforge::peers
