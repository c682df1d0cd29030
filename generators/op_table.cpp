#include "generators/op_table.h"

#include <cctype>
#include <set>
#include <stdexcept>

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
  static const std::vector<VariantSpec> table = with_bandwidth_kernels({
      {&apply_gradient_descent(), {}, kAllIsas, {}},
      {&apply_momentum(), {{"use_nesterov", "false"}}, kAllIsas, {}},
      {&apply_momentum(), {{"use_nesterov", "true"}}, kAllIsas, {}},
      {&apply_adam(), {{"use_nesterov", "false"}}, kAllIsas, {}},
      {&apply_adam(), {{"use_nesterov", "true"}}, kAllIsas, {}},
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
  return bandwidth(states, grads);
}

}  // namespace opforge::generators
