// Validation: name rules and the cross-field checks of a parsed descriptor.
#include <set>

#include "registry/format/format_json.h"
#include "registry/format/shape_expr.h"

namespace opforge::registry {

namespace {

bool is_lower(char c) {
  return c >= 'a' && c <= 'z';
}
bool is_upper(char c) {
  return c >= 'A' && c <= 'Z';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_ident_char(char c) {
  return is_lower(c) || is_upper(c) || is_digit(c) || c == '_';
}
bool is_path_char(char c) {
  return is_ident_char(c) || c == '.' || c == '-' || c == '/';
}

}  // namespace

namespace detail {

namespace {

void check_unique_names(const std::string& origin, const std::vector<std::string>& names,
                        const std::string& array_ptr, const char* what) {
  std::set<std::string> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!seen.insert(names[i]).second) {
      fail(origin, child(child(array_ptr, i), "name"),
           std::string("duplicate ") + what + " " + quote(names[i]));
    }
  }
}

template <typename T>
std::vector<std::string> names_of(const std::vector<T>& items) {
  std::vector<std::string> out;
  for (const T& item : items) out.push_back(item.name);
  return out;
}

const KernelArg* find_kernel_arg(const Kernel& k, const std::string& name) {
  for (const KernelArg& a : k.args) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

void check_alias(const Descriptor& d, const std::string& origin, size_t i,
                 std::set<std::string>& aliased) {
  const Output& out = d.outputs[i];
  std::string ptr = child(child("/outputs", i), "aliases");
  const Input* in = d.find_input(out.aliases);
  if (!in) fail(origin, ptr, quote(out.aliases) + " names no input");
  if (in->role != Input::Role::state && in->role != Input::Role::result &&
      in->role != Input::Role::block_scale) {
    fail(origin, ptr,
         "input " + quote(in->name) + " has role " + role_name(in->role) +
             "; only state, result and block_scale inputs can be aliased");
  }
  if (in->dtype != out.dtype) {
    fail(origin, child(child("/outputs", i), "dtype"),
         std::string(dtype_name(out.dtype)) + " differs from aliased input " + quote(in->name) +
             " (" + dtype_name(in->dtype) + ")");
  }
  if (!aliased.insert(in->name).second) {
    fail(origin, ptr, "input " + quote(in->name) + " is aliased by two outputs");
  }
}

void check_output_kernel_arg(const Descriptor& d, const std::string& origin, size_t i,
                             std::set<std::string>& claimed) {
  const Output& out = d.outputs[i];
  std::string ptr = child(child("/outputs", i), "kernel_arg");
  const KernelArg* a = find_kernel_arg(d.kernel, out.kernel_arg);
  if (!a || a->kind != KernelArg::Kind::output_buffer) {
    fail(origin, ptr, quote(out.kernel_arg) + " is not an output_buffer in /kernel/args");
  }
  if (a->dtype != out.dtype) {
    fail(origin, ptr,
         "kernel argument " + quote(a->name) + " is " + dtype_name(a->dtype) + ", output is " +
             dtype_name(out.dtype));
  }
  if (!claimed.insert(a->name).second) {
    fail(origin, ptr, "kernel argument " + quote(a->name) + " is used by two outputs");
  }
}

void check_outputs(const Descriptor& d, const std::string& origin) {
  check_unique_names(origin, names_of(d.outputs), "/outputs", "output name");
  std::set<std::string> aliased, claimed;
  for (size_t i = 0; i < d.outputs.size(); ++i) {
    if (!d.outputs[i].aliases.empty()) check_alias(d, origin, i, aliased);
    check_output_kernel_arg(d, origin, i, claimed);
  }
}

void check_input_kernel_arg(const Descriptor& d, const std::string& origin, size_t i) {
  const KernelArg& a = d.kernel.args[i];
  std::string ptr = child("/kernel/args", i);
  const Input* in = d.find_input(a.name);
  if (!in) fail(origin, child(ptr, "name"), quote(a.name) + " names no input");
  bool scalar = in->role == Input::Role::scalar;
  if (scalar != (a.kind == KernelArg::Kind::input_scalar)) {
    fail(origin, child(ptr, "kind"),
         std::string(kernel_arg_kind_name(a.kind)) + " does not fit input " + quote(in->name) +
             " of role " + role_name(in->role));
  }
  if (a.dtype != in->dtype) {
    fail(origin, child(ptr, "dtype"),
         std::string(dtype_name(a.dtype)) + " differs from input " + quote(in->name) + " (" +
             dtype_name(in->dtype) + ")");
  }
}

bool is_output_kernel_arg(const Descriptor& d, const std::string& name) {
  for (const Output& out : d.outputs) {
    if (out.kernel_arg == name) return true;
  }
  return false;
}

void check_kernel_args(const Descriptor& d, const std::string& origin) {
  check_unique_names(origin, names_of(d.kernel.args), "/kernel/args", "kernel argument");
  for (size_t i = 0; i < d.kernel.args.size(); ++i) {
    const KernelArg& a = d.kernel.args[i];
    if (a.kind != KernelArg::Kind::output_buffer) {
      check_input_kernel_arg(d, origin, i);
    } else if (!is_output_kernel_arg(d, a.name)) {
      fail(origin, child(child("/kernel/args", i), "name"),
           "output_buffer " + quote(a.name) + " is the kernel_arg of no output");
    }
  }
  for (size_t i = 0; i < d.inputs.size(); ++i) {
    const KernelArg* a = find_kernel_arg(d.kernel, d.inputs[i].name);
    if (!a || a->kind == KernelArg::Kind::output_buffer) {
      fail(origin, child(child("/inputs", i), "name"),
           "input " + quote(d.inputs[i].name) + " is not among the kernel's input arguments");
    }
  }
}

void check_shape(const Descriptor& d, const std::string& origin) {
  std::set<std::string> seen;
  for (size_t i = 0; i < d.shape.same_shape.size(); ++i) {
    const std::string& name = d.shape.same_shape[i];
    std::string ptr = child("/shape/same_shape", i);
    const Input* in = d.find_input(name);
    if (!in) fail(origin, ptr, quote(name) + " names no input");
    if (in->role == Input::Role::scalar) fail(origin, ptr, quote(name) + " is a scalar input");
    if (in->role == Input::Role::result) fail(origin, ptr, quote(name) + " is a result input");
    if (in->role == Input::Role::block_scale)
      fail(origin, ptr, quote(name) + " is a block_scale input (ceil(n / block) elements)");
    if (!seen.insert(name).second) fail(origin, ptr, quote(name) + " is listed twice");
  }
  bool scales = false;
  for (const Input& in : d.inputs) {
    if (in.role != Input::Role::block_scale) continue;
    scales = true;
    if (in.dtype != DType::f32)
      fail(origin, "/inputs", "block_scale input " + quote(in.name) + " must be float32");
  }
  if (scales != (d.shape.block > 0)) {
    fail(origin, "/shape/block",
         scales ? "block_scale inputs need shape.block > 0"
                : "shape.block without block_scale inputs");
  }
  if (scales && (!d.shape.elementwise || d.shape.multi_tensor || !d.shape.segments.empty()))
    fail(origin, "/shape/block", "block_scale inputs are for dense single-tensor ops");
  if (d.shape.multi_tensor && !d.shape.elementwise) {
    fail(origin, "/shape/multi_tensor",
         "a sparse-rows op (elementwise false) cannot be multi_tensor");
  }
  if (d.shape.splittable && !d.shape.elementwise) {
    fail(origin, "/shape/splittable", "a sparse-rows op (elementwise false) cannot be splittable");
  }
  if (!d.shape.segments.empty()) {
    const Input* seg = d.find_input(d.shape.segments);
    if (!d.shape.elementwise || d.shape.splittable || !seg || seg->role != Input::Role::tensor ||
        seg->dtype != DType::i32 || seen.count(d.shape.segments)) {
      fail(origin, "/shape/segments",
           quote(d.shape.segments) +
               " must name an int32 tensor input outside same_shape, in an elementwise, "
               "unsplittable op");
    }
  }
  if (d.shape.elementwise || d.shape.named_dims) return;
  const Input* idx = d.find_input(d.shape.indices);
  if (!idx || idx->role == Input::Role::scalar ||
      (idx->dtype != DType::i32 && idx->dtype != DType::i64)) {
    fail(origin, "/shape/indices",
         quote(d.shape.indices) + " must name an int32 or int64 tensor input");
  }
  for (size_t i = 0; i < d.shape.row_slices.size(); ++i) {
    const std::string& name = d.shape.row_slices[i];
    const Input* in = d.find_input(name);
    if (!in || in->role == Input::Role::scalar || !seen.insert(name).second ||
        name == d.shape.indices) {
      fail(origin, child("/shape/row_slices", i),
           quote(name) + " must name a tensor input not listed elsewhere in /shape");
    }
  }
}

}  // namespace

// Kernel argument names come from Halide ("var", "updated.0"): [A-Za-z0-9_.], 1..128 chars.
bool is_valid_kernel_arg_name(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (!is_ident_char(c) && c != '.') return false;
  }
  return true;
}

// CPU feature names as __builtin_cpu_supports spells them ("avx2", "sse4.1", "x86-64-v3"):
// [A-Za-z0-9_.-], 1..64 chars.
bool is_valid_cpu_feature(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!is_ident_char(c) && c != '.' && c != '-') return false;
  }
  return true;
}

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!is_digit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

void check_descriptor(const Descriptor& d, const std::string& origin) {
  check_unique_names(origin, names_of(d.inputs), "/inputs", "input name");
  check_unique_names(origin, names_of(d.attrs), "/attrs", "attr name");
  check_outputs(d, origin);
  check_kernel_args(d, origin);
  check_shape(d, origin);
}

// An NN descriptor's dims and expressions: dim names are identifiers (a leading "B?" may be
// optional), ranks match, every expression parses and names only dims, int/bool scalars and
// int/bool attrs; outputs are fresh buffers.
void check_named_dims(const Descriptor& d, const std::string& origin) {
  std::set<std::string> names;
  for (size_t i = 0; i < d.inputs.size(); ++i) {
    const Input& in = d.inputs[i];
    const std::string ptr = child("/inputs", i);
    if (in.role == Input::Role::scalar) {
      if (in.dtype == DType::i32 || in.dtype == DType::i64) names.insert(in.name);
      continue;
    }
    if (in.role != Input::Role::tensor)
      fail(origin, child(ptr, "role"), "an NN op's tensor inputs have role tensor");
    if (static_cast<int>(in.dims.size()) != in.rank)
      fail(origin, child(ptr, "dims"),
           "names " + std::to_string(in.dims.size()) + " dims for rank " + std::to_string(in.rank));
    for (size_t k = 0; k < in.dims.size(); ++k) {
      std::string n = in.dims[k];
      if (k == 0 && !n.empty() && n.back() == '?') n.pop_back();
      if (!is_valid_identifier(n))
        fail(origin, child(child(ptr, "dims"), k),
             quote(in.dims[k]) + " is not a dim name (an identifier; \"B?\" first for optional)");
      names.insert(n);
    }
  }
  for (const Attr& a : d.attrs) {
    if (a.type == Attr::Type::boolean || a.type == Attr::Type::integer) names.insert(a.name);
  }
  auto check_expr = [&](const std::string& text, const std::string& ptr) {
    try {
      for (const auto& n : ShapeExpr::parse(text).names()) {
        if (!names.count(n))
          fail(origin, ptr,
               quote(n) + " in " + quote(text) +
                   " is not a dim, an int scalar or an int/bool attr of the op");
      }
    } catch (const ShapeExprError& e) {
      fail(origin, ptr, e.what());
    }
  };
  for (size_t i = 0; i < d.outputs.size(); ++i) {
    const Output& out = d.outputs[i];
    const std::string ptr = child("/outputs", i);
    if (!out.aliases.empty()) fail(origin, child(ptr, "aliases"), "NN outputs are fresh buffers");
    if (static_cast<int>(out.dims.size()) != out.rank)
      fail(origin, child(ptr, "dims"),
           "has " + std::to_string(out.dims.size()) + " dims for rank " + std::to_string(out.rank));
    for (size_t k = 0; k < out.dims.size(); ++k) {
      std::string e = out.dims[k];
      if (k == 0 && !e.empty() && e.back() == '?') e.pop_back();
      check_expr(e, child(child(ptr, "dims"), k));
    }
  }
  for (size_t i = 0; i < d.shape.checks.size(); ++i)
    check_expr(d.shape.checks[i].condition, child(child("/shape/checks", i), "condition"));
  if (!d.algorithm.applies_when.empty())
    check_expr(d.algorithm.applies_when, "/algorithm/applies_when");
  if (!d.cost.flops.empty()) check_expr(d.cost.flops, "/cost/flops");
  if (!d.cost.bytes.empty()) check_expr(d.cost.bytes, "/cost/bytes");
  for (size_t i = 0; i < d.kernel.args.size(); ++i) {
    const KernelArg& a = d.kernel.args[i];
    int rank = -1;
    if (const Input* in = d.find_input(a.name)) rank = in->rank;
    for (const Output& out : d.outputs) {
      if (out.kernel_arg == a.name) rank = out.rank;
    }
    if (rank != a.dims)
      fail(origin, child(child("/kernel/args", i), "dims"),
           "has " + std::to_string(a.dims) + " dims, its tensor has rank " + std::to_string(rank));
  }
}

}  // namespace detail

bool is_valid_op_name(const std::string& s) {
  if (s.empty() || s.size() > 64 || !is_lower(s[0])) return false;
  for (char c : s) {
    if (!is_lower(c) && !is_digit(c) && c != '_') return false;
  }
  return true;
}

bool is_valid_identifier(const std::string& s) {
  if (s.empty() || s.size() > 128 || is_digit(s[0])) return false;
  for (char c : s) {
    if (!is_ident_char(c)) return false;
  }
  return true;
}

bool is_valid_schedule_param_key(const std::string& s) {
  const size_t at = s.find('@');
  if (at == std::string::npos) return is_valid_identifier(s);
  const std::string count = s.substr(at + 1);
  if (!is_valid_identifier(s.substr(0, at)) || count.empty() || count.size() > 10 ||
      count[0] == '0')
    return false;
  for (char c : count) {
    if (!is_digit(c)) return false;
  }
  return true;
}

bool is_safe_relative_path(const std::string& s) {
  if (s.empty() || s.size() > 255 || s[0] == '/') return false;
  for (char c : s) {
    if (!is_path_char(c)) return false;
  }
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('/', start);
    if (end == std::string::npos) end = s.size();
    std::string seg = s.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace opforge::registry
