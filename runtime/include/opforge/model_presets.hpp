// opforge runtime: model presets for multi-tensor apply, tensor lists generated from the
// published architectures' formulas (names as the reference implementations name the
// parameters). No libHalide.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "opforge/model_layout.hpp"

namespace opforge {

struct ModelPreset {
  std::string name;     // "transformer-small"
  std::string summary;  // the model, its source, tensors and elements
  std::vector<TensorShape> (*tensors)();
};

// Every preset, in a fixed order: transformer-small (GPT-2 small, 148 tensors),
// transformer-medium (GPT-2 medium, 292 tensors), resnet-1001 (pre-activation ResNet-1001,
// 3005 tensors).
const std::vector<ModelPreset>& model_presets();

// The preset's tensors; throws Error for an unknown name (listing the presets, with a
// suggestion).
std::vector<TensorShape> model_preset_tensors(const std::string& name);
ModelLayout model_preset(const std::string& name,
                         int64_t alignment = ModelLayout::kDefaultAlignment);

// GPT-2 (Radford et al. 2019; openai/gpt-2 model.py, Hugging Face GPT2Model names): token
// embedding wte [vocab, width], position embedding wpe [context, width], `layers` blocks of
// ln_1, attn.c_attn [width, 3 width], attn.c_proj [width, width], ln_2, mlp.c_fc
// [width, 4 width], mlp.c_proj [4 width, width] (weights and biases; layer norms weight and
// bias [width]), then ln_f. The LM head is tied to wte.
std::vector<TensorShape> gpt2_tensors(int64_t vocab, int64_t context, int64_t width,
                                      int64_t layers);

// Pre-activation ResNet with bottleneck blocks for CIFAR (He et al. 2016, "Identity Mappings in
// Deep Residual Networks", arXiv:1603.05027; depth = 9 * blocks + 2, PyTorch's usual
// PreActBottleneck: convolutions without bias, BatchNorm weight and bias per normalization):
// conv1 3x3 3->16, three stages of `blocks` bottlenecks with 16, 32, 64 planes (expansion 4;
// each block: bn1, conv1 1x1, bn2, conv2 3x3, bn3, conv3 1x1; the first block of a stage has
// a 1x1 shortcut convolution), a final BatchNorm of 256 channels and fc [classes, 256] + bias.
std::vector<TensorShape> preact_resnet_cifar_tensors(int64_t blocks, int64_t classes);

}  // namespace opforge
