// The C ABI over the C++ runtime: exceptions become return codes and opforge_last_error().
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <optional>
#include <string>

#include "opforge/fp8.h"
#include "opforge/model_presets.hpp"
#include "opforge/opforge.h"
#include "opforge/runtime.hpp"
#include "registry/format/shape_expr.h"

struct opforge_registry {
  std::unique_ptr<opforge::Registry> reg;
  std::vector<std::string> ops;  // Registry::ops() once, so opforge_registry_op can hand out names
};
struct opforge_kernel {};  // an opaque alias of opforge::Kernel
struct opforge_model_layout {
  opforge::ModelLayout layout;
};

namespace {

thread_local std::string last_error;

template <class F>
int guarded(F&& f) {
  try {
    f();
    last_error.clear();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown error";
  }
  return 1;
}

opforge::Kernel* K(opforge_kernel* k) {
  return reinterpret_cast<opforge::Kernel*>(k);
}
const opforge::Kernel* K(const opforge_kernel* k) {
  return reinterpret_cast<const opforge::Kernel*>(k);
}

opforge::registry::DType to_dtype(int d) {
  using opforge::registry::DType;
  switch (d) {
    case OPFORGE_F16:
      return DType::f16;
    case OPFORGE_BF16:
      return DType::bf16;
    case OPFORGE_F32:
      return DType::f32;
    case OPFORGE_F64:
      return DType::f64;
    case OPFORGE_I32:
      return DType::i32;
    case OPFORGE_I64:
      return DType::i64;
    case OPFORGE_BOOL:
      return DType::b8;
    case OPFORGE_U8:
      return DType::u8;
    case OPFORGE_F8E4M3:
      return DType::f8e4m3;
    case OPFORGE_F8E5M2:
      return DType::f8e5m2;
  }
  throw opforge::Error("unknown dtype code " + std::to_string(d));
}

// opforge_call, opforge_call_chunked and opforge_call_model: argument checks, then views
// straight over the caller's arrays (no allocation on the call path), passed to `call`.
template <class Call>
int with_views(const char* fn, const opforge_tensor* tensors, size_t n_tensors,
               const opforge_scalar* scalars, size_t n_scalars, Call&& call) {
  if ((n_tensors && !tensors) || (n_scalars && !scalars)) {
    return last_error = std::string(fn) + ": NULL argument array", 1;
  }
  return guarded([&] {
    constexpr size_t kMax = 32;
    if (n_tensors > kMax || n_scalars > kMax)
      throw opforge::Error(std::string(fn) + ": too many arguments");
    opforge::TensorView tv[kMax];
    opforge::ScalarView sv[kMax];
    for (size_t i = 0; i < n_tensors; ++i) {
      const opforge_tensor& t = tensors[i];
      if (!t.name)
        throw opforge::Error(std::string(fn) + ": tensor " + std::to_string(i) + " has no name");
      tv[i] = {t.name, t.data, to_dtype(t.dtype), t.shape, t.rank};
    }
    for (size_t i = 0; i < n_scalars; ++i) {
      if (!scalars[i].name)
        throw opforge::Error(std::string(fn) + ": scalar " + std::to_string(i) + " has no name");
      sv[i] = {scalars[i].name, scalars[i].value};
    }
    call(tv, sv);
  });
}

template <class Call>
int call_views(const char* fn, opforge_kernel* k, const opforge_tensor* tensors, size_t n_tensors,
               const opforge_scalar* scalars, size_t n_scalars, Call&& call) {
  if (!k) return last_error = std::string(fn) + ": kernel is NULL", 1;
  return with_views(
      fn, tensors, n_tensors, scalars, n_scalars,
      [&](const opforge::TensorView* tv, const opforge::ScalarView* sv) { call(*K(k), tv, sv); });
}

}  // namespace

extern "C" {

const char* opforge_last_error(void) {
  return last_error.c_str();
}

const char* opforge_version(void) {
  return OPFORGE_VERSION_STRING;
}

const char* opforge_default_registry(void) {
  thread_local std::string dir;
  dir = opforge::Registry::default_dir();
  return dir.c_str();
}

const char* opforge_default_user_registry(void) {
  thread_local std::string dir;
  dir = opforge::Registry::default_user_dir();
  return dir.c_str();
}

const char* opforge_cli_path(void) {
  thread_local std::string path;
  path = opforge::cli_path();
  return path.c_str();
}

int opforge_open(const char* dir, opforge_registry** out) {
  return opforge_open_with_user(dir, nullptr, out);
}

int opforge_open_with_user(const char* dir, const char* user_dir, opforge_registry** out) {
  if (!out) return last_error = "opforge_open: out is NULL", 1;
  *out = nullptr;
  return guarded([&] {
    auto r = std::make_unique<opforge_registry>();
    std::optional<std::string> user;
    if (user_dir) user = user_dir;
    r->reg = opforge::Registry::open(dir ? dir : "", user);
    r->ops = r->reg->ops();
    *out = r.release();
  });
}

const char* opforge_registry_user_dir(const opforge_registry* reg) {
  return reg ? reg->reg->user_dir().c_str() : nullptr;
}

int opforge_registry_refresh_ops(opforge_registry* reg) {
  if (!reg) return last_error = "opforge_registry_refresh_ops: NULL registry", 1;
  return guarded([&] { reg->ops = reg->reg->ops(); });
}

void opforge_close(opforge_registry* reg) {
  delete reg;
}

const char* opforge_registry_dir(const opforge_registry* reg) {
  return reg ? reg->reg->dir().c_str() : nullptr;
}

const char* opforge_registry_op(const opforge_registry* reg, size_t i) {
  return reg && i < reg->ops.size() ? reg->ops[i].c_str() : nullptr;
}

int opforge_op_variants_json(opforge_registry* reg, const char* op, const char** json) {
  if (!reg || !op || !json) return last_error = "opforge_op_variants_json: NULL argument", 1;
  *json = nullptr;
  return guarded([&] {
    thread_local std::string text;
    std::string s = "[";
    for (const auto& d : reg->reg->variants(op)) {
      s += (s.size() > 1 ? ",\n" : "\n") + opforge::registry::to_json(d);
    }
    text = s + "\n]\n";
    *json = text.c_str();
  });
}

int opforge_select(opforge_registry* reg, const char* op, const char* attrs, const char* isa,
                   opforge_kernel** out) {
  if (!reg || !op || !out) return last_error = "opforge_select: NULL argument", 1;
  *out = nullptr;
  return guarded([&] {
    auto& k = reg->reg->select(op, opforge::parse_attr_list(attrs ? attrs : ""), isa ? isa : "");
    *out = reinterpret_cast<opforge_kernel*>(&k);
  });
}

int opforge_select_for(opforge_registry* reg, const char* op, const char* attrs, const char* isa,
                       const opforge_tensor* tensors, size_t n_tensors,
                       const opforge_scalar* scalars, size_t n_scalars, opforge_kernel** out) {
  if (!reg || !op || !out) return last_error = "opforge_select_for: NULL argument", 1;
  *out = nullptr;
  return with_views("opforge_select_for", tensors, n_tensors, scalars, n_scalars,
                    [&](const opforge::TensorView* tv, const opforge::ScalarView* sv) {
                      auto& k = reg->reg->select(op, opforge::parse_attr_list(attrs ? attrs : ""),
                                                 tv, n_tensors, sv, n_scalars, isa ? isa : "");
                      *out = reinterpret_cast<opforge_kernel*>(&k);
                    });
}

int opforge_output_shape(opforge_kernel* k, const opforge_tensor* tensors, size_t n_tensors,
                         const opforge_scalar* scalars, size_t n_scalars, size_t index,
                         int64_t* shape, int max_rank, int* rank) {
  if (!shape || !rank) return last_error = "opforge_output_shape: NULL argument", 1;
  return call_views(
      "opforge_output_shape", k, tensors, n_tensors, scalars, n_scalars,
      [&](opforge::Kernel& kernel, const opforge::TensorView* tv, const opforge::ScalarView* sv) {
        const auto shapes = kernel.output_shapes(tv, n_tensors, sv, n_scalars);
        if (index >= shapes.size()) {
          throw opforge::Error("opforge_output_shape: op '" + kernel.descriptor().op + "' has " +
                               std::to_string(shapes.size()) + " outputs, asked for index " +
                               std::to_string(index));
        }
        const auto& s = shapes[index];
        if (static_cast<int>(s.size()) > max_rank) {
          throw opforge::Error("opforge_output_shape: output has rank " + std::to_string(s.size()) +
                               ", more than max_rank " + std::to_string(max_rank));
        }
        std::copy(s.begin(), s.end(), shape);
        *rank = static_cast<int>(s.size());
      });
}

int opforge_shape_value(opforge_kernel* k, const opforge_tensor* tensors, size_t n_tensors,
                        const opforge_scalar* scalars, size_t n_scalars, const char* expr,
                        int64_t* value) {
  if (!expr || !value) return last_error = "opforge_shape_value: NULL argument", 1;
  return call_views(
      "opforge_shape_value", k, tensors, n_tensors, scalars, n_scalars,
      [&](opforge::Kernel& kernel, const opforge::TensorView* tv, const opforge::ScalarView* sv) {
        const auto env = kernel.shape_values(tv, n_tensors, sv, n_scalars);
        try {
          const auto v = opforge::registry::ShapeExpr::parse(expr).evaluate(env);
          if (!v) {
            throw opforge::Error(std::string("opforge_shape_value: \"") + expr +
                                 "\" reads a name this call does not bind");
          }
          *value = *v;
        } catch (const opforge::registry::ShapeExprError& e) {
          throw opforge::Error(e.what());
        }
      });
}

const char* opforge_kernel_variant(const opforge_kernel* k) {
  return k ? K(k)->descriptor().variant.c_str() : "";
}
const char* opforge_kernel_isa(const opforge_kernel* k) {
  return k ? K(k)->descriptor().target.isa.c_str() : "";
}

int opforge_kernel_descriptor_json(const opforge_kernel* k, const char** json) {
  if (!k || !json) return last_error = "opforge_kernel_descriptor_json: NULL argument", 1;
  *json = nullptr;
  return guarded([&] {
    thread_local std::string text;
    text = opforge::registry::to_json(K(k)->descriptor());
    *json = text.c_str();
  });
}

int opforge_call(opforge_kernel* k, const opforge_tensor* tensors, size_t n_tensors,
                 const opforge_scalar* scalars, size_t n_scalars) {
  return call_views(
      "opforge_call", k, tensors, n_tensors, scalars, n_scalars,
      [&](opforge::Kernel& kernel, const opforge::TensorView* tv, const opforge::ScalarView* sv) {
        kernel.call(tv, n_tensors, sv, n_scalars);
      });
}

int opforge_call_chunked(opforge_kernel* k, const opforge_tensor* tensors, size_t n_tensors,
                         const opforge_scalar* scalars, size_t n_scalars, int64_t chunk_elements) {
  if (chunk_elements < 1) {
    return last_error = "opforge_call_chunked: chunk_elements must be at least 1, got " +
                        std::to_string(chunk_elements),
           1;
  }
  return call_views(
      "opforge_call_chunked", k, tensors, n_tensors, scalars, n_scalars,
      [&](opforge::Kernel& kernel, const opforge::TensorView* tv, const opforge::ScalarView* sv) {
        kernel.call_chunked(tv, n_tensors, sv, n_scalars, chunk_elements);
      });
}

int opforge_kernel_splittable(const opforge_kernel* k) {
  return k && K(k)->splittable() ? 1 : 0;
}

int opforge_model_layout_create(const opforge_tensor_shape* tensors, size_t n_tensors,
                                int64_t alignment, opforge_model_layout** out) {
  if (!out) return last_error = "opforge_model_layout_create: out is NULL", 1;
  *out = nullptr;
  if (n_tensors && !tensors) {
    return last_error = "opforge_model_layout_create: NULL tensor array", 1;
  }
  return guarded([&] {
    std::vector<opforge::TensorShape> shapes;
    for (size_t i = 0; i < n_tensors; ++i) {
      const opforge_tensor_shape& t = tensors[i];
      if (!t.name || t.rank < 0 || (t.rank > 0 && !t.shape)) {
        throw opforge::Error(
            "opforge_model_layout_create: tensor " + std::to_string(i) +
            (t.name ? " ('" + std::string(t.name) + "') has a bad rank" : " has no name"));
      }
      shapes.push_back({t.name, std::vector<int64_t>(t.shape, t.shape + t.rank)});
    }
    *out = new opforge_model_layout{opforge::ModelLayout(
        std::move(shapes), alignment ? alignment : opforge::ModelLayout::kDefaultAlignment)};
  });
}

int opforge_model_layout_preset(const char* name, int64_t alignment, opforge_model_layout** out) {
  if (!name || !out) return last_error = "opforge_model_layout_preset: NULL argument", 1;
  *out = nullptr;
  return guarded([&] {
    *out = new opforge_model_layout{opforge::model_preset(
        name, alignment ? alignment : opforge::ModelLayout::kDefaultAlignment)};
  });
}

void opforge_model_layout_free(opforge_model_layout* layout) {
  delete layout;
}

const char* opforge_model_preset_name(size_t i) {
  const auto& presets = opforge::model_presets();
  return i < presets.size() ? presets[i].name.c_str() : nullptr;
}

size_t opforge_model_layout_tensors(const opforge_model_layout* layout) {
  return layout ? layout->layout.size() : 0;
}

int64_t opforge_model_layout_total_elements(const opforge_model_layout* layout) {
  return layout ? layout->layout.total_elements() : 0;
}

const int64_t* opforge_model_layout_offsets(const opforge_model_layout* layout) {
  return layout ? layout->layout.offsets().data() : nullptr;
}

const int64_t* opforge_model_layout_elements(const opforge_model_layout* layout) {
  return layout ? layout->layout.element_counts().data() : nullptr;
}

const char* opforge_model_layout_name(const opforge_model_layout* layout, size_t i) {
  return layout && i < layout->layout.size() ? layout->layout.tensor(i).name.c_str() : nullptr;
}

int opforge_call_model(opforge_kernel* k, const opforge_model_layout* layout,
                       const opforge_tensor* flat, size_t n_flat, const opforge_scalar* scalars,
                       size_t n_scalars) {
  if (!layout) return last_error = "opforge_call_model: layout is NULL", 1;
  return call_views(
      "opforge_call_model", k, flat, n_flat, scalars, n_scalars,
      [&](opforge::Kernel& kernel, const opforge::TensorView* tv, const opforge::ScalarView* sv) {
        opforge::call_model(kernel, layout->layout, tv, n_flat, sv, n_scalars);
      });
}

void opforge_set_scalar_checks(int enabled) {
  opforge::set_scalar_checks(enabled != 0);
}

int opforge_set_dump_dir(const char* dir) {
  return guarded([&] { opforge::set_dump_dir(dir ? dir : ""); });
}

const char* opforge_dump_dir(void) {
  static thread_local std::string dir;
  dir = opforge::dump_dir();
  return dir.c_str();
}

int opforge_set_num_threads(opforge_registry* reg, int n) {
  if (!reg) return last_error = "opforge_set_num_threads: registry is NULL", 1;
  return guarded([&] { reg->reg->set_num_threads(n); });
}

namespace {
// The FP8 DType of a C ABI dtype code; fails naming `fn` for anything else.
opforge::registry::DType fp8_dtype(const char* fn, int dtype) {
  if (dtype != OPFORGE_F8E4M3 && dtype != OPFORGE_F8E5M2) {
    throw opforge::Error(std::string(fn) + ": dtype code " + std::to_string(dtype) +
                         " is not an FP8 dtype (OPFORGE_F8E4M3 = 8, OPFORGE_F8E5M2 = 9)");
  }
  return to_dtype(dtype);
}
}  // namespace

int opforge_fp8_encode(const float* x, size_t n, float scale, int dtype, uint8_t* bits) {
  if (n && (!x || !bits)) return last_error = "opforge_fp8_encode: NULL array", 1;
  return guarded([&] {
    const auto t = fp8_dtype("opforge_fp8_encode", dtype);
    if (!(scale > 0) || !std::isfinite(scale)) {
      throw opforge::Error("opforge_fp8_encode: scale must be positive and finite, got " +
                           std::to_string(scale));
    }
    for (size_t i = 0; i < n; ++i) {
      // A finite x whose product overflows fp32 is a finite value past FP8's largest: it
      // saturates as the others do (inf would become E4M3's NaN or E5M2's inf).
      float y = x[i] * scale;
      if (std::isinf(y) && std::isfinite(x[i])) y = std::copysign(FLT_MAX, y);
      bits[i] = opforge::registry::fp8_from_float(y, t);
    }
  });
}

int opforge_fp8_decode(const uint8_t* bits, size_t n, int dtype, float* x) {
  if (n && (!x || !bits)) return last_error = "opforge_fp8_decode: NULL array", 1;
  return guarded([&] {
    const auto t = fp8_dtype("opforge_fp8_decode", dtype);
    for (size_t i = 0; i < n; ++i) x[i] = opforge::registry::fp8_to_float(bits[i], t);
  });
}

}  // extern "C"
