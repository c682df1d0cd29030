// Model presets: tensor counts and element totals against the published numbers and against
// totals computed here by hand from the architectures (not from the preset code).
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "opforge/model_presets.hpp"
#include "runtime/runtime_test_util.h"

namespace opforge::testing {
namespace {

TEST_CASE("transformer-small is GPT-2 small: 148 tensors, 124,439,808 elements") {
  const ModelLayout l = model_preset("transformer-small");
  CHECK(l.size() == 148);  // wte, wpe, 12 x 12 per block, ln_f weight and bias
  // Radford et al.'s "117M" model; Hugging Face's gpt2 has 124,439,808 parameters.
  CHECK(l.model_elements() == 124439808);
  const int64_t d = 768;
  const int64_t block =
      2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d);
  CHECK(l.model_elements() == 50257 * d + 1024 * d + 12 * block + 2 * d);
  CHECK(l.tensor(0).name == "wte");
  CHECK(l.tensor(0).shape == std::vector<int64_t>{50257, 768});
  CHECK(l.tensor(l.index_of("h.11.attn.c_attn.weight")).shape == std::vector<int64_t>{768, 2304});
  CHECK(l.tensor(l.index_of("h.0.mlp.c_proj.weight")).shape == std::vector<int64_t>{3072, 768});
  CHECK(l.tensor(147).name == "ln_f.bias");
  // Every dimension is a multiple of 32: no padding at the default alignment.
  CHECK(l.total_elements() == l.model_elements());
}

TEST_CASE("transformer-medium is GPT-2 medium: 292 tensors, 354,823,168 elements") {
  const ModelLayout l = model_preset("transformer-medium");
  CHECK(l.size() == 2 + 24 * 12 + 2);
  const int64_t d = 1024;
  CHECK(l.model_elements() == 50257 * d + 1024 * d + 24 * (12 * d * d + 13 * d) + 2 * d);
  CHECK(l.model_elements() == 354823168);
}

TEST_CASE("resnet-1001 is pre-activation ResNet-1001 for CIFAR-10: 3005 tensors") {
  const ModelLayout l = model_preset("resnet-1001");
  // conv1; per bottleneck bn1, conv1, bn2, conv2, bn3, conv3 = 9 tensors, 3 x 111 blocks; a
  // shortcut convolution per stage; the final bn; fc weight and bias.
  CHECK(l.size() == 1 + 9 * 333 + 3 + 2 + 2);
  CHECK(l.size() >= 1000);
  // Bottleneck with `in` input channels and p planes: BN(in), 1x1 in->p, BN(p), 3x3 p->p,
  // BN(p), 1x1 p->4p. Stage s (p = 16, 32, 64) takes in = 16, 64, 128 in its first block,
  // which also has a 1x1 in->4p shortcut, and 4p in the other 110.
  auto block = [](int64_t in, int64_t p) {
    return 2 * in + in * p + 2 * p + 9 * p * p + 2 * p + 4 * p * p;
  };
  const int64_t conv1 = 16 * 3 * 3 * 3;
  const int64_t stage1 = block(16, 16) + 16 * 64 + 110 * block(64, 16);
  const int64_t stage2 = block(64, 32) + 64 * 128 + 110 * block(128, 32);
  const int64_t stage3 = block(128, 64) + 128 * 256 + 110 * block(256, 64);
  const int64_t head = 2 * 256 + 256 * 10 + 10;
  CHECK(l.model_elements() == conv1 + stage1 + stage2 + stage3 + head);
  CHECK(l.model_elements() == 10327706);
  // Without the BatchNorm weights and biases: the paper's 10.2M parameters.
  int64_t bn = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    const std::string& n = l.tensor(i).name;
    if (n.find(".bn") != std::string::npos || n.rfind("bn.", 0) == 0) bn += l.elements(i);
  }
  CHECK(bn == 149216);
  CHECK(l.model_elements() - bn == 10178490);
  CHECK(l.tensor(l.index_of("layer3.0.shortcut.0.weight")).shape ==
        std::vector<int64_t>{256, 128, 1, 1});
  CHECK(l.tensor(l.index_of("layer2.110.conv2.weight")).shape ==
        std::vector<int64_t>{32, 32, 3, 3});
  // 16-channel BatchNorms and the 10-element fc bias are padded at the default alignment.
  CHECK(l.total_elements() > l.model_elements());
  CHECK(ModelLayout(model_preset_tensors("resnet-1001"), 1).total_elements() == 10327706);
}

TEST_CASE("presets: listed, unique tensor names, unknown names are errors with a suggestion") {
  std::vector<std::string> names;
  for (const auto& p : model_presets()) {
    names.push_back(p.name);
    CHECK_FALSE(p.summary.empty());
    CHECK_NOTHROW(ModelLayout(p.tensors()));  // duplicate names would throw
  }
  CHECK(names ==
        std::vector<std::string>{"transformer-small", "transformer-medium", "resnet-1001"});
  const std::string msg = error_of([] { model_preset("transformer-smal"); });
  CHECK(contains(msg, "unknown model preset 'transformer-smal'"));
  CHECK(contains(msg, "did you mean 'transformer-small'"));
  CHECK(contains(msg, "resnet-1001"));
  CHECK(model_preset("transformer-small", 1).alignment() == 1);
}

TEST_CASE("scripts/profiles/transformer_small_adam.json has transformer-small's tensor sizes") {
  std::ifstream in(std::string(OPFORGE_SOURCE_DIR) +
                   "/scripts/profiles/transformer_small_adam.json");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str());
  std::multiset<int64_t> profile, preset;
  for (const auto& c : j.at("calls")) {
    for (int64_t r = 0; r < c.value("repeat", int64_t(1)); ++r)
      profile.insert(c.at("n").get<int64_t>());
  }
  const ModelLayout l = model_preset("transformer-small");
  for (size_t i = 0; i < l.size(); ++i) preset.insert(l.elements(i));
  CHECK(profile == preset);
}

}  // namespace
}  // namespace opforge::testing
