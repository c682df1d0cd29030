#include "generators/op_table.h"

#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>

#include "dsl/optimizer_pipeline.h"
#include "generators/nn_ops.h"
#include "generators/ops.h"

namespace opforge::generators {

namespace {

const std::vector<std::string> kAllIsas = {"avx512", "avx2"};
// The memory-bound NN ops' bf16 activation variants add the avx512_bf16 tier (vcvtneps2bf16;
// generators/isa.cpp), and the same-traffic copy and add have it too, so that `opforge bench`
// measures a tier variant against a yardstick of its own ISA. Tier / avx512 time, same
// registry, three alternating rounds (AMD EPYC family 26, 2026-12-07): cold 2 threads 0.62-0.89
// in most rounds for layer_norm, rms_norm, softmax, gelu, silu, silu_mul and add_rms_norm
// (0.44-0.81), group_norm and add_layer_norm 0.83-1.07; warm one thread 0.58-0.99 for all,
// most 0.7-0.85 (scripts/BENCHMARKS.md "bf16 stores by vcvtneps2bf16").
// matmul, conv2d and attention round a few outputs per many FMAs: not built for it.
enum class Bf16Tier { none, bf16_form, every_form };

const dsl::Storage kBf16m{registry::DType::bf16, registry::DType::bf16};
const dsl::Storage kF16m{registry::DType::f16, registry::DType::f16};
const dsl::Storage kBf16g{registry::DType::bf16, std::nullopt};
const dsl::Storage kF16g{registry::DType::f16, std::nullopt};
// bf16 optimizer states (Adam's m, v, v_max), fp32 var and gradients; and with bf16m.
const dsl::Storage kBf16s{registry::DType::f32, std::nullopt, registry::DType::bf16};
// fp16 narrow states (compress_ef's f16 output).
const dsl::Storage kF16s{registry::DType::f32, std::nullopt, registry::DType::f16};
const dsl::Storage kBf16ms{registry::DType::bf16, registry::DType::bf16, registry::DType::bf16};
// 8-bit blockwise states, blocks of 256: fp32 var and gradients, or bf16m's master and copy.
const dsl::Storage kQ8{registry::DType::f32, std::nullopt, std::nullopt, dsl::QuantMap::dynamic};
const dsl::Storage kQ8Linear{registry::DType::f32, std::nullopt, std::nullopt,
                             dsl::QuantMap::linear};
const dsl::Storage kBf16mQ8{registry::DType::bf16, registry::DType::bf16, std::nullopt,
                            dsl::QuantMap::dynamic};
// FP8 gradients (OCP E4M3 / E5M2 bits, a per-tensor scale; dsl/fp8.h): fp32 var and states,
// or with 8-bit states.
const dsl::Storage kE4m3g{registry::DType::f8e4m3, std::nullopt};
const dsl::Storage kE5m2g{registry::DType::f8e5m2, std::nullopt};
const dsl::Storage kE4m3gQ8{registry::DType::f8e4m3, std::nullopt, std::nullopt,
                            dsl::QuantMap::dynamic};
const dsl::AttrValues kUnscaleSkip = {{"unscale", "true"}, {"skip_if_nonfinite", "true"}};

// The optimizer rows given their storage, followed by the bandwidth kernels they are
// measured against.
std::vector<VariantSpec> with_bandwidth_kernels(std::vector<VariantSpec> rows) {
  std::set<std::string> seen;
  std::vector<VariantSpec> extra;
  for (auto& r : rows) {
    const auto& decl = dynamic_cast<const dsl::OptimizerDecl&>(*r.decl);
    if (!r.storage.is_f32()) r.decl = &with_storage(decl, r.storage);
  }
  for (const auto& r : rows) {
    const dsl::ResolvedOp op = r.resolve();
    if (op.as_optimizer().sparse()) continue;  // sparse ops are measured in rows/s
    const dsl::OptimizerDecl& bw = bandwidth_for(op);
    if (seen.insert(bw.name()).second)
      extra.push_back({&bw, {}, kAllIsas, r.schedule, {}, bw.storage()});
  }
  rows.insert(rows.end(), extra.begin(), extra.end());
  return rows;
}

// One row per algorithm of an NN op: the registry holds every algorithm, the runtime picks
// by shape. An op with activations (NnOpDecl::activations) ships them in fp32 and in bf16.
// `isas_of`: the algorithms shipped for some ISAs only (the rest for all).
void add_all_algorithms(std::vector<VariantSpec>& rows, const dsl::NnOpDecl& decl,
                        const dsl::AttrValues& attrs = {},
                        const std::map<std::string, std::vector<std::string>>& isas_of = {},
                        Bf16Tier tier = Bf16Tier::none) {
  std::vector<dsl::AttrValues> forms = {attrs};
  if (!decl.activation_tensors().empty()) {
    forms.push_back(attrs);
    forms.back()[dsl::kActivationDtypeAttr] = "bfloat16";
  }
  for (size_t form = 0; form < forms.size(); ++form) {
    const bool tiered = tier == Bf16Tier::every_form || (tier == Bf16Tier::bf16_form && form == 1);
    for (const auto& a : decl.algorithms()) {
      const auto it = isas_of.find(a.name);
      std::vector<std::string> isas = it == isas_of.end() ? kAllIsas : it->second;
      if (tiered) isas.insert(isas.begin(), "avx512_bf16");
      rows.push_back({&decl, forms[form], isas, {}, {}, {}, a.name});
    }
  }
}

std::vector<VariantSpec> nn_rows() {
  std::vector<VariantSpec> rows;
  add_all_algorithms(rows, bandwidth_copy(), {}, {}, Bf16Tier::every_form);
  add_all_algorithms(rows, bandwidth_add(), {}, {}, Bf16Tier::every_form);
  // direct_oc_small_14x14, direct_oc_small_8_16x16, gemm_1x1_small and gemm_1x1_s2_small on
  // AVX-512 only: AVX2 is faster with direct_oc_blocked and direct_oc_small there, except on
  // whole 16-pixel register blocks, gemm_1x1_small_16 (measured: nn_conv2d.cpp).
  const std::map<std::string, std::vector<std::string>> conv_isas = {
      {"direct_oc_small_14x14", {"avx512"}},
      {"direct_oc_small_8_16x16", {"avx512"}},
      {"gemm_1x1_small", {"avx512"}},
      {"gemm_1x1_s2_small", {"avx512"}},
      {"gemm_1x1_small_16", {"avx2"}}};
  add_all_algorithms(rows, conv2d(), {}, conv_isas);
  add_all_algorithms(rows, conv2d_bias_relu(), {}, conv_isas);
  // matmul: the transposes are compile-time (they pick the packing loads): one row each.
  for (const char* ta : {"false", "true"}) {
    for (const char* tb : {"false", "true"}) {
      add_all_algorithms(rows, matmul(), {{"transpose_a", ta}, {"transpose_b", tb}});
    }
  }
  add_all_algorithms(rows, linear());
  add_all_algorithms(rows, layer_norm(), {}, {}, Bf16Tier::bf16_form);
  add_all_algorithms(rows, rms_norm(), {}, {}, Bf16Tier::bf16_form);
  add_all_algorithms(rows, softmax(), {}, {}, Bf16Tier::bf16_form);
  add_all_algorithms(rows, add_layer_norm(), {}, {}, Bf16Tier::bf16_form);
  add_all_algorithms(rows, add_rms_norm(), {}, {}, Bf16Tier::bf16_form);
  add_all_algorithms(rows, group_norm(), {}, {}, Bf16Tier::bf16_form);
  add_all_algorithms(rows, gelu(), {{"approximate", "none"}}, {}, Bf16Tier::bf16_form);
  add_all_algorithms(rows, gelu(), {{"approximate", "tanh"}}, {}, Bf16Tier::bf16_form);
  add_all_algorithms(rows, silu(), {}, {}, Bf16Tier::bf16_form);
  add_all_algorithms(rows, silu_mul(), {}, {}, Bf16Tier::bf16_form);
  // Attention: causal is compile-time (it removes key blocks from the loop).
  add_all_algorithms(rows, scaled_dot_product_attention(), {{"causal", "false"}});
  add_all_algorithms(rows, scaled_dot_product_attention(), {{"causal", "true"}});
  add_all_algorithms(rows, scaled_dot_product_attention_masked(), {{"mask_dtype", "float32"}});
  add_all_algorithms(rows, scaled_dot_product_attention_masked(), {{"mask_dtype", "bool"}});
  add_all_algorithms(rows, onebit_compress());
  add_all_algorithms(rows, onebit_decompress());
  return rows;
}

std::vector<VariantSpec> concat(std::vector<VariantSpec> a, const std::vector<VariantSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The optimizer rows, each in its storage; with_bandwidth_kernels appends their yardsticks.
std::vector<VariantSpec> optimizer_rows() {
  const auto& all = kAllIsas;
  // Adams2019 twins for a few representative dense ops, AVX-512 only: one to three states,
  // and a whole-tensor reduction (apply_lamb; Adams2019 keeps its fp64 sum serial).
  const std::vector<std::string> auto512 = {"avx512"};
  return {
      // TensorFlow training ops.
      {&apply_gradient_descent(), {}, all, {}, auto512},
      {&apply_proximal_gradient_descent(), {}, all, {}},
      {&apply_adadelta(), {}, all, {}},
      {&apply_adagrad(), {{"update_slots", "true"}}, all, {}},
      {&apply_adagrad(), {{"update_slots", "false"}}, all, {}},
      {&apply_adagrad_v2(), {{"update_slots", "true"}}, all, {}},
      {&apply_adagrad_v2(), {{"update_slots", "false"}}, all, {}},
      {&apply_proximal_adagrad(), {}, all, {}},
      {&apply_adagrad_da(), {}, all, {}},
      {&apply_ftrl(), {{"multiply_linear_by_lr", "false"}}, all, {}},
      {&apply_ftrl(), {{"multiply_linear_by_lr", "true"}}, all, {}},
      {&apply_ftrl_v2(), {{"multiply_linear_by_lr", "false"}}, all, {}},
      {&apply_ftrl_v2(), {{"multiply_linear_by_lr", "true"}}, all, {}},
      {&apply_momentum(), {{"use_nesterov", "false"}}, all, {}, auto512},
      {&apply_momentum(), {{"use_nesterov", "true"}}, all, {}},
      {&apply_keras_momentum(), {{"use_nesterov", "false"}}, all, {}},
      {&apply_keras_momentum(), {{"use_nesterov", "true"}}, all, {}},
      {&apply_adam(), {{"use_nesterov", "false"}, {"epsilon_mode", "tf"}}, all, {}, auto512},
      {&apply_adam(), {{"use_nesterov", "true"}, {"epsilon_mode", "tf"}}, all, {}},
      {&apply_adam(), {{"use_nesterov", "false"}, {"epsilon_mode", "torch"}}, all, {}},
      {&apply_adam(), {{"use_nesterov", "true"}, {"epsilon_mode", "torch"}}, all, {}},
      {&apply_adam_with_amsgrad(), {{"epsilon_mode", "tf"}}, all, {}},
      {&apply_adam_with_amsgrad(), {{"epsilon_mode", "torch"}}, all, {}},
      {&apply_ada_max(), {}, all, {}},
      {&apply_ada_max(), {{"epsilon_mode", "torch"}}, all, {}},
      {&apply_rms_prop(), {}, all, {}, auto512},
      {&apply_rms_prop(), {{"epsilon_mode", "torch"}}, all, {}},
      {&apply_centered_rms_prop(), {}, all, {}},
      {&apply_centered_rms_prop(), {{"epsilon_mode", "torch"}}, all, {}},
      {&apply_add_sign(), {}, all, {}},
      {&apply_power_sign(), {}, all, {}},
      // Beyond TensorFlow.
      {&apply_adamw(), {}, all, {}},
      {&apply_adamw(), {{"amsgrad", "true"}}, all, {}},
      {&apply_adamw(), {{"maximize", "true"}}, all, {}},
      {&apply_adamw(), {{"amsgrad", "true"}, {"maximize", "true"}}, all, {}},
      {&apply_adamw(), {{"epsilon_mode", "tf"}}, all, {}},
      {&apply_adamw(), {{"convention", "cann"}}, all, {}},
      {&apply_adamw(), {{"convention", "cann"}, {"amsgrad", "true"}}, all, {}},
      {&apply_lamb(), {}, all, {}, auto512},
      {&apply_lars(), {{"use_nesterov", "false"}}, all, {}},
      {&apply_lars(), {{"use_nesterov", "true"}}, all, {}},
      {&apply_lion(), {}, all, {}},
      {&apply_sign_sqrt(), {}, all, {}},
      // Mixed-precision training.
      {&amp_update_scale(), {}, all, {}},
      {&clip_by_global_norm(), {{"convention", "tf"}}, all, {}},
      {&clip_by_global_norm(), {{"convention", "torch"}}, all, {}},
      {&global_norm(), {}, all, {}},
      {&global_norm(), {}, all, {}, {}, kBf16g},
      {&accumulate_grad(), {{"scaled", "false"}}, all, {}},
      {&accumulate_grad(), {{"scaled", "true"}}, all, {}},
      {&accumulate_grad(), {{"scaled", "false"}}, all, {}, {}, kBf16g},
      {&accumulate_grad(), {{"scaled", "true"}}, all, {}, {}, kBf16g},
      {&accumulate_grad(), {{"scaled", "false"}}, all, {}, {}, kF16g},
      {&accumulate_grad(), {{"scaled", "true"}}, all, {}, {}, kF16g},
      // Gradient compression with error feedback: the compressed copy is the narrow state.
      {&compress_ef(), {{"format", "bf16"}}, all, {}, {}, kBf16s},
      {&compress_ef(), {{"format", "f16"}}, all, {}, {}, kF16s},
      // Multi-tensor forms: a whole model per call, per-tensor norms as segmented reductions.
      {&multi_tensor_apply_lamb(), {}, all, {}},
      {&multi_tensor_apply_lamb(), kUnscaleSkip, all, {}},
      {&multi_tensor_apply_lars(), {{"use_nesterov", "false"}}, all, {}},
      {&multi_tensor_apply_lars(), {{"use_nesterov", "true"}}, all, {}},
      // Sparse forms, int32 and int64 indices.
      {&sparse_apply_adagrad(), {{"Tindices", "int32"}}, all, {}},
      {&sparse_apply_adagrad(), {{"Tindices", "int64"}}, all, {}},
      {&sparse_apply_ftrl(), {{"Tindices", "int32"}}, all, {}},
      {&sparse_apply_ftrl(), {{"Tindices", "int64"}}, all, {}},
      {&sparse_apply_momentum(), {{"Tindices", "int32"}}, all, {}},
      {&sparse_apply_momentum(), {{"Tindices", "int64"}}, all, {}},
      {&sparse_apply_proximal_adagrad(), {{"Tindices", "int32"}}, all, {}},
      {&sparse_apply_proximal_adagrad(), {{"Tindices", "int64"}}, all, {}},
      {&sparse_adam(), {{"Tindices", "int32"}}, all, {}},
      {&sparse_adam(), {{"Tindices", "int64"}}, all, {}},
      // Mixed precision: gradients and the model copy in bf16 / f16, fp32 master
      // weights and optimizer state, fp32 arithmetic.
      {&apply_gradient_descent(), {}, all, {}, {}, kBf16m},
      {&apply_gradient_descent(), {}, all, {}, {}, kF16m},
      {&apply_lion(), {}, all, {}, {}, kBf16m},
      {&apply_lion(), {}, all, {}, {}, kF16m},
      {&apply_momentum(), {}, all, {}, {}, kBf16m},
      {&apply_momentum(), {}, all, {}, {}, kF16m},
      {&apply_momentum(), {{"use_nesterov", "true"}}, all, {}, {}, kBf16m},
      {&apply_momentum(), {{"use_nesterov", "true"}}, all, {}, {}, kF16m},
      {&apply_keras_momentum(), {}, all, {}, {}, kBf16m},
      {&apply_keras_momentum(), {}, all, {}, {}, kF16m},
      {&apply_adam(), {}, all, {}, {}, kBf16m},
      {&apply_adam(), {}, all, {}, {}, kF16m},
      {&apply_adam(), {{"use_nesterov", "true"}}, all, {}, {}, kBf16m},
      {&apply_adam(), {{"use_nesterov", "true"}}, all, {}, {}, kF16m},
      {&apply_adam_with_amsgrad(), {}, all, {}, {}, kBf16m},
      {&apply_adam_with_amsgrad(), {}, all, {}, {}, kF16m},
      {&apply_adamw(), {}, all, {}, {}, kBf16m},
      {&apply_adamw(), {}, all, {}, {}, kF16m},
      {&apply_adamw(), {{"amsgrad", "true"}}, all, {}, {}, kBf16m},
      {&apply_adamw(), {{"amsgrad", "true"}}, all, {}, {}, kF16m},
      {&apply_lamb(), {}, all, {}, {}, kBf16m},
      {&apply_lamb(), {}, all, {}, {}, kF16m},
      // bf16 optimizer states (m, v, v_max): fp32 var, or bf16m's fp32 master and bf16 copy.
      {&apply_adam(), {}, all, {}, {}, kBf16s},
      {&apply_adam(), {}, all, {}, {}, kBf16ms},
      {&apply_adamw(), {}, all, {}, {}, kBf16s},
      {&apply_adamw(), {}, all, {}, {}, kBf16ms},
      {&apply_adamw(), {{"amsgrad", "true"}}, all, {}, {}, kBf16ms},
      {&apply_adam(), kUnscaleSkip, all, {}, {}, kBf16ms},
      {&apply_adamw(), kUnscaleSkip, all, {}, {}, kBf16ms},
      // 8-bit blockwise states (dsl/quant8.h): dynamic map, and the linear map for Adam.
      {&apply_adam(), {}, all, {}, {}, kQ8},
      {&apply_adam(), {}, all, {}, {}, kQ8Linear},
      {&apply_adam(), kUnscaleSkip, all, {}, {}, kQ8},
      {&apply_adam(), {}, all, {}, {}, kBf16mQ8},
      {&apply_adamw(), {}, all, {}, {}, kQ8},
      {&apply_adamw(), {{"amsgrad", "true"}}, all, {}, {}, kQ8},
      {&apply_adamw(), {}, all, {}, {}, kQ8Linear},
      {&apply_adamw(), {{"amsgrad", "true"}}, all, {}, {}, kQ8Linear},
      {&apply_adamw(), {}, all, {}, {}, kBf16mQ8},
      {&apply_adamw(), {{"amsgrad", "true"}}, all, {}, {}, kBf16mQ8},
      {&apply_adamw(), kUnscaleSkip, all, {}, {}, kBf16mQ8},
      {&apply_lion(), {}, all, {}, {}, kQ8},
      {&apply_lion(), {}, all, {}, {}, kBf16mQ8},
      {&apply_momentum(), {}, all, {}, {}, kQ8},
      {&apply_momentum(), {{"use_nesterov", "true"}}, all, {}, {}, kQ8},
      {&apply_momentum(), {}, all, {}, {}, kBf16mQ8},
      {&apply_momentum(), {{"use_nesterov", "true"}}, all, {}, {}, kBf16mQ8},
      // FP8 gradients: the Adam family and gradient accumulation, both formats; with loss
      // scaling's skip (NaN codes, E5M2's infinities) and with 8-bit states.
      {&apply_adam(), {}, all, {}, {}, kE4m3g},
      {&apply_adam(), {}, all, {}, {}, kE5m2g},
      {&apply_adamw(), {}, all, {}, {}, kE4m3g},
      {&apply_adamw(), {}, all, {}, {}, kE5m2g},
      {&apply_adamw(), {{"amsgrad", "true"}}, all, {}, {}, kE4m3g},
      {&apply_adamw(), kUnscaleSkip, all, {}, {}, kE4m3g},
      {&apply_adamw(), kUnscaleSkip, all, {}, {}, kE5m2g},
      {&apply_adamw(), {}, all, {}, {}, kE4m3gQ8},
      {&apply_lamb(), {}, all, {}, {}, kE4m3g},
      {&accumulate_grad(), {{"scaled", "false"}}, all, {}, {}, kE4m3g},
      {&accumulate_grad(), {{"scaled", "false"}}, all, {}, {}, kE5m2g},
      {&accumulate_grad(), {{"scaled", "true"}}, all, {}, {}, kE4m3g},
      {&accumulate_grad(), {{"scaled", "true"}}, all, {}, {}, kE5m2g},
      // Loss scaling fused into the step (OptimizerDecl::grad_scaling): gradients times
      // inv_scale, found_inf, and the skipped step.
      {&apply_adam(), kUnscaleSkip, all, {}, {}, kBf16m},
      {&apply_adam(), kUnscaleSkip, all, {}, {}, kF16m},
      {&apply_adam(), kUnscaleSkip, all, {}},
      {&apply_adam(), {{"unscale", "true"}}, all, {}, {}, kBf16m},
      {&apply_adam(), {{"skip_if_nonfinite", "true"}}, all, {}, {}, kBf16m},
      {&apply_adam_with_amsgrad(), kUnscaleSkip, all, {}},
      {&apply_adamw(), kUnscaleSkip, all, {}, {}, kBf16m},
      {&apply_adamw(), kUnscaleSkip, all, {}},
      {&apply_gradient_descent(), kUnscaleSkip, all, {}, {}, kBf16m},
      {&apply_momentum(), kUnscaleSkip, all, {}, {}, kBf16m},
      {&apply_lamb(), kUnscaleSkip, all, {}},
  };
}

}  // namespace

const std::vector<VariantSpec>& op_table() {
  static const std::vector<VariantSpec> table =
      concat(with_bandwidth_kernels(optimizer_rows()), nn_rows());
  return table;
}

const dsl::OpDecl& find_decl(const std::string& op) {
  std::set<std::string> names;
  for (const auto& row : op_table()) {
    if (row.decl->name() == op) return *row.decl;
    names.insert(row.decl->name());
  }
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown op '" + op + "' (the op table has " + known + ")");
}

namespace {

// The tensors a dense optimizer op moves per element, by kind.
struct DenseTraffic {
  int states = 0, grads = 0, reductions = 0;
  int byte_states = 0;  // 8-bit states: raw bytes in the bandwidth kernel
  dsl::Storage plain;   // the storage without the 8-bit states (the byte states stand for them)
};

DenseTraffic dense_traffic(const dsl::ResolvedOp& op) {
  DenseTraffic t;
  for (const auto& a : op.args) {
    t.states += a.role == registry::Input::Role::state;
    t.grads += a.role == registry::Input::Role::gradient ||
               (a.role == registry::Input::Role::tensor && a.name != dsl::kSegmentsArg);
    t.byte_states += a.role == registry::Input::Role::state && a.dtype == registry::DType::u8;
  }
  const dsl::Storage& s = op.as_optimizer().storage();
  if (s.model) --t.states;  // the model copy: with_storage adds it to the bandwidth kernel too
  t.reductions = static_cast<int>(dsl::reduction_reads(op).size());
  t.plain = s;
  t.plain.quant.reset();
  return t;
}

}  // namespace

std::string tuning_family_name(const dsl::ResolvedOp& op) {
  const DenseTraffic t = dense_traffic(op);
  return "s" + std::to_string(t.states) + "_g" + std::to_string(t.grads) +
         (t.reductions ? "_r" : "") + (t.byte_states ? "_q8" : "") +
         (t.plain.is_f32() ? "" : "_narrow");
}

const dsl::OptimizerDecl& bandwidth_for(const dsl::ResolvedOp& op) {
  const DenseTraffic t = dense_traffic(op);
  const dsl::OptimizerDecl& bw = bandwidth(t.states, t.grads, t.reductions, t.byte_states);
  const dsl::Storage& plain = t.plain;
  if (plain.is_f32()) return bw;
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<dsl::OptimizerDecl>> made;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = made[bw.name() + "_" + plain.tag()];
  if (!slot)
    slot =
        std::make_unique<dsl::OptimizerDecl>(bw.with_storage(plain, bw.name() + "_" + plain.tag()));
  return *slot;
}

std::string bandwidth_op_name(const dsl::ResolvedOp& op) {
  if (const dsl::NnOpDecl* nn = op.nn()) return nn->bandwidth_op();
  return op.as_optimizer().sparse() ? "" : bandwidth_for(op).name();
}

const dsl::OptimizerDecl& with_storage(const dsl::OptimizerDecl& decl, const dsl::Storage& s) {
  if (s.is_f32() && decl.storage().is_f32()) return decl;
  static std::mutex mu;
  static std::map<std::pair<const dsl::OptimizerDecl*, std::string>,
                  std::unique_ptr<dsl::OptimizerDecl>>
      made;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = made[{&decl, s.tag()}];
  if (!slot) slot = std::make_unique<dsl::OptimizerDecl>(decl.with_storage(s));
  return *slot;
}

}  // namespace opforge::generators
