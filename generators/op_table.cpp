#include "generators/op_table.h"

#include <cctype>
#include <set>
#include <stdexcept>

#include "dsl/optimizer_pipeline.h"
#include "generators/ops.h"

namespace opforge::generators {

namespace {

const std::vector<std::string> kAllIsas = {"avx512", "avx2"};

std::vector<VariantSpec> with_bandwidth_kernels(std::vector<VariantSpec> rows) {
  std::set<std::string> seen;
  std::vector<VariantSpec> extra;
  for (const auto& r : rows) {
    if (r.decl->sparse()) continue;  // sparse ops are measured in rows/s
    const dsl::OptimizerDecl& bw = bandwidth_for(*r.decl, r.decl->resolve_attrs(r.attrs));
    if (seen.insert(bw.name()).second) extra.push_back({&bw, {}, kAllIsas, r.schedule});
  }
  rows.insert(rows.end(), extra.begin(), extra.end());
  return rows;
}

}  // namespace

const std::vector<VariantSpec>& op_table() {
  const auto& all = kAllIsas;
  // Adams2019 twins for a few representative dense ops, AVX-512 only: one to three states,
  // and a whole-tensor reduction (apply_lamb; Adams2019 keeps its fp64 sum serial).
  const std::vector<std::string> auto512 = {"avx512"};
  static const std::vector<VariantSpec> table = with_bandwidth_kernels({
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
      {&apply_rms_prop(), {}, all, {}, auto512},
      {&apply_centered_rms_prop(), {}, all, {}},
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
  });
  return table;
}

std::string variant_id(const dsl::OptimizerDecl& decl, const dsl::AttrValues& attrs,
                       const std::string& isa) {
  std::string id = decl.name();
  for (const auto& a : decl.attrs()) {
    std::string v = attrs.at(a.name);
    if (a.type == registry::Attr::Type::boolean) v = v == "true" ? "1" : "0";
    for (char& ch : v) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    id += "__" + a.name + "_" + v;
  }
  return id + "__f32__" + isa;
}

const dsl::OptimizerDecl& find_decl(const std::string& op) {
  std::set<std::string> names;
  for (const auto& row : op_table()) {
    if (row.decl->name() == op) return *row.decl;
    names.insert(row.decl->name());
  }
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown op '" + op + "' (the op table has " + known + ")");
}

const dsl::OptimizerDecl& bandwidth_for(const dsl::OptimizerDecl& decl,
                                        const dsl::AttrValues& resolved_attrs) {
  int states = 0, grads = 0;
  for (const auto& a : decl.args_for(resolved_attrs)) {
    states += a.role == registry::Input::Role::state;
    grads += a.role != registry::Input::Role::state && a.role != registry::Input::Role::scalar;
  }
  return bandwidth(states, grads,
                   static_cast<int>(dsl::reduction_reads(decl, resolved_attrs).size()));
}

}  // namespace opforge::generators
