// The NN half of the op table (the optimizer half is op_table.cpp). Not named nn_*.cpp: the
// NN sources fingerprint covers the ops' schedules, not this list.
#include <cctype>

#include "generators/nn_ops.h"
#include "generators/op_table.h"

namespace opforge::generators {

namespace {

const std::vector<std::string> kAllIsas = {"avx512", "avx2"};

// One row per algorithm of `decl`: the registry holds every algorithm, the runtime picks by
// shape.
void add_all_algorithms(std::vector<NnVariantSpec>& rows, const dsl::NnOpDecl& decl,
                        const dsl::AttrValues& attrs = {}) {
  for (const auto& a : decl.algorithms()) rows.push_back({&decl, attrs, a.name, kAllIsas});
}

}  // namespace

const std::vector<NnVariantSpec>& nn_op_table() {
  static const std::vector<NnVariantSpec> table = [] {
    std::vector<NnVariantSpec> rows;
    add_all_algorithms(rows, bandwidth_copy());
    add_all_algorithms(rows, conv2d());
    add_all_algorithms(rows, conv2d_bias_relu());
    // matmul: the transposes are compile-time (they pick the packing loads): one row each.
    for (const char* ta : {"false", "true"}) {
      for (const char* tb : {"false", "true"}) {
        add_all_algorithms(rows, matmul(), {{"transpose_a", ta}, {"transpose_b", tb}});
      }
    }
    add_all_algorithms(rows, layer_norm());
    add_all_algorithms(rows, rms_norm());
    add_all_algorithms(rows, softmax());
    add_all_algorithms(rows, gelu(), {{"approximate", "none"}});
    add_all_algorithms(rows, gelu(), {{"approximate", "tanh"}});
    return rows;
  }();
  return table;
}

std::string nn_variant_id(const dsl::NnOpDecl& decl, const dsl::AttrValues& attrs,
                          const std::string& algorithm, const std::string& isa) {
  std::string id = decl.name();
  for (const auto& a : decl.attrs()) {
    std::string v = attrs.at(a.name);
    if (a.type == registry::Attr::Type::boolean) v = v == "true" ? "1" : "0";
    for (char& c : v) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    id += "__" + a.name + "_" + v;
  }
  if (!algorithm.empty()) id += "__" + algorithm;
  return id + "__f32__" + isa;
}

}  // namespace opforge::generators
