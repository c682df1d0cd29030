// Model presets: realistic tensor lists from architecture formulas.
#include "opforge/model_presets.hpp"

#include "opforge/suggest.hpp"

namespace opforge {

std::vector<TensorShape> gpt2_tensors(int64_t vocab, int64_t context, int64_t width,
                                      int64_t layers) {
  std::vector<TensorShape> t = {{"wte", {vocab, width}}, {"wpe", {context, width}}};
  for (int64_t l = 0; l < layers; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    const std::vector<TensorShape> block = {
        {h + "ln_1.weight", {width}},
        {h + "ln_1.bias", {width}},
        {h + "attn.c_attn.weight", {width, 3 * width}},
        {h + "attn.c_attn.bias", {3 * width}},
        {h + "attn.c_proj.weight", {width, width}},
        {h + "attn.c_proj.bias", {width}},
        {h + "ln_2.weight", {width}},
        {h + "ln_2.bias", {width}},
        {h + "mlp.c_fc.weight", {width, 4 * width}},
        {h + "mlp.c_fc.bias", {4 * width}},
        {h + "mlp.c_proj.weight", {4 * width, width}},
        {h + "mlp.c_proj.bias", {width}},
    };
    t.insert(t.end(), block.begin(), block.end());
  }
  t.push_back({"ln_f.weight", {width}});
  t.push_back({"ln_f.bias", {width}});
  return t;
}

std::vector<TensorShape> preact_resnet_cifar_tensors(int64_t blocks, int64_t classes) {
  std::vector<TensorShape> t = {{"conv1.weight", {16, 3, 3, 3}}};
  auto bn = [&](const std::string& name, int64_t channels) {
    t.push_back({name + ".weight", {channels}});
    t.push_back({name + ".bias", {channels}});
  };
  int64_t in = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t planes = int64_t(16) << stage, out = 4 * planes;
    for (int64_t b = 0; b < blocks; ++b) {
      const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(b) + ".";
      bn(p + "bn1", in);
      t.push_back({p + "conv1.weight", {planes, in, 1, 1}});
      bn(p + "bn2", planes);
      t.push_back({p + "conv2.weight", {planes, planes, 3, 3}});
      bn(p + "bn3", planes);
      t.push_back({p + "conv3.weight", {out, planes, 1, 1}});
      if (b == 0) t.push_back({p + "shortcut.0.weight", {out, in, 1, 1}});
      in = out;
    }
  }
  bn("bn", in);
  t.push_back({"linear.weight", {classes, in}});
  t.push_back({"linear.bias", {classes}});
  return t;
}

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"transformer-small",
       "GPT-2 small (124M; Radford et al. 2019): 12 layers, width 768, vocab 50257, context 1024",
       [] { return gpt2_tensors(50257, 1024, 768, 12); }},
      {"transformer-medium",
       "GPT-2 medium (355M): 24 layers, width 1024, vocab 50257, context 1024",
       [] { return gpt2_tensors(50257, 1024, 1024, 24); }},
      // 10,178,490 convolution and fc weights (the paper's "10.2M") and 149,216 BatchNorm
      // weights and biases.
      {"resnet-1001",
       "pre-activation ResNet-1001 for CIFAR-10 (He et al. 2016, arXiv:1603.05027): 3 stages of "
       "111 bottleneck blocks, one BatchNorm weight and bias per normalization",
       [] { return preact_resnet_cifar_tensors(111, 10); }},
  };
  return presets;
}

std::vector<TensorShape> model_preset_tensors(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& p : model_presets()) {
    if (p.name == name) return p.tensors();
    names.push_back(p.name);
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw Error("unknown model preset '" + name + "'" + did_you_mean(name, names) +
              " (presets: " + list + ")");
}

ModelLayout model_preset(const std::string& name, int64_t alignment) {
  return ModelLayout(model_preset_tensors(name), alignment);
}

}  // namespace opforge
