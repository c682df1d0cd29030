// Shared by the descriptor format tests: a complete Adam descriptor (make_adam), field-by-field
// comparison, and the rejection helpers (the error of parsing an edited Adam JSON).
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "opforge/descriptor.h"

namespace opforge::registry::testing {

using json = nlohmann::json;

inline const char* const kOrigin = "ops/apply_adam.json";
inline const char* const kKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

inline Input input(const std::string& name, Input::Role role, int rank) {
  Input in;
  in.name = name;
  in.role = role;
  in.dtype = DType::f32;
  in.rank = rank;
  in.description = "the " + name + " argument";
  return in;
}

inline Output output(const std::string& name, const std::string& kernel_arg) {
  Output out;
  out.name = name;
  out.kernel_arg = kernel_arg;
  out.aliases = name;
  out.dtype = DType::f32;
  out.rank = -1;
  return out;
}

inline KernelArg arg(const std::string& name, KernelArg::Kind kind, int dims) {
  KernelArg a;
  a.name = name;
  a.kind = kind;
  a.dtype = DType::f32;
  a.dims = dims;
  return a;
}

// Input indices: 0 var, 1 m, 2 v, 3 beta1_power, 4 beta2_power, 5 lr, 6 beta1, 7 beta2,
// 8 epsilon, 9 grad. Kernel args: the inputs in that order, then updated.0/1/2.
inline Descriptor make_adam() {
  using R = Input::Role;
  using K = KernelArg::Kind;
  Descriptor d;
  d.op = "apply_adam";
  d.op_version = 1;
  d.variant = "apply_adam_f32_avx2_nesterov1";
  d.summary = "Adam update, in place";
  d.formula = "lr_t = lr*sqrt(1-beta2_power)/(1-beta1_power); m += (grad-m)*(1-beta1); ...";
  d.reference = "TensorFlow ApplyAdam (tensorflow/core/kernels/training_ops.cc)";
  d.kind = "optimizer";
  d.inputs = {input("var", R::state, -1),         input("m", R::state, -1),
              input("v", R::state, -1),           input("beta1_power", R::scalar, 0),
              input("beta2_power", R::scalar, 0), input("lr", R::scalar, 0),
              input("beta1", R::scalar, 0),       input("beta2", R::scalar, 0),
              input("epsilon", R::scalar, 0),     input("grad", R::gradient, -1)};
  d.outputs = {output("var", "updated.0"), output("m", "updated.1"), output("v", "updated.2")};
  Attr nesterov;
  nesterov.name = "use_nesterov";
  nesterov.type = Attr::Type::boolean;
  nesterov.default_value = "false";
  nesterov.value = "true";
  nesterov.description = "Nesterov momentum";
  d.attrs = {nesterov};
  d.shape.elementwise = true;
  d.shape.same_shape = {"var", "m", "v", "grad"};
  d.shape.max_elements = 2147483647;
  d.shape.splittable = true;
  d.kernel.file = "kernels/apply_adam_f32_avx2_nesterov1.so";
  d.kernel.entry = "apply_adam_f32_avx2_nesterov1";
  for (const Input& in : d.inputs) {
    bool scalar = in.role == R::scalar;
    d.kernel.args.push_back(
        arg(in.name, scalar ? K::input_scalar : K::input_buffer, scalar ? 0 : 1));
  }
  for (const char* out : {"updated.0", "updated.1", "updated.2"}) {
    d.kernel.args.push_back(arg(out, K::output_buffer, 1));
  }
  d.target.isa = "avx2";
  d.target.halide_target = "x86-64-linux-avx-avx2-f16c-fma-sse41";
  d.target.cpu_features = {"sse4.1", "avx2", "fma", "f16c"};
  d.target.priority = 20;
  d.schedule.recipe = "elementwise";
  d.schedule.params = {{"vector_width", "8"}, {"parallel_split", "65536"}};
  d.schedule.summary = "vectorize 8, parallel over 65536-element chunks";
  d.tolerance.rtol = 1e-5;  // not exact in binary: the round trip must keep every bit
  d.tolerance.atol = 0.1 + 0.2;
  d.traffic.bytes_read_per_element = 16;
  d.traffic.bytes_written_per_element = 12;
  d.cache_key = kKey;
  d.halide_version = "14.0.0";
  d.bandwidth_op = "bandwidth_rmw";
  return d;
}

inline void check_same(const Input& a, const Input& b) {
  CHECK(a.name == b.name);
  CHECK(a.role == b.role);
  CHECK(a.dtype == b.dtype);
  CHECK(a.rank == b.rank);
  CHECK(a.description == b.description);
}

inline void check_same(const Output& a, const Output& b) {
  CHECK(a.name == b.name);
  CHECK(a.kernel_arg == b.kernel_arg);
  CHECK(a.aliases == b.aliases);
  CHECK(a.dtype == b.dtype);
  CHECK(a.rank == b.rank);
}

inline void check_same(const Attr& a, const Attr& b) {
  CHECK(a.name == b.name);
  CHECK(a.type == b.type);
  CHECK(a.default_value == b.default_value);
  CHECK(a.value == b.value);
  CHECK(a.description == b.description);
  CHECK(a.choices == b.choices);
}

inline void check_same(const KernelArg& a, const KernelArg& b) {
  CHECK(a.name == b.name);
  CHECK(a.kind == b.kind);
  CHECK(a.dtype == b.dtype);
  CHECK(a.dims == b.dims);
}

template <typename T>
inline void check_same(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) check_same(a[i], b[i]);
}

inline void check_same(const Descriptor& a, const Descriptor& b) {
  CHECK(a.op == b.op);
  CHECK(a.op_version == b.op_version);
  CHECK(a.variant == b.variant);
  CHECK(a.summary == b.summary);
  CHECK(a.formula == b.formula);
  CHECK(a.reference == b.reference);
  CHECK(a.kind == b.kind);
  check_same(a.inputs, b.inputs);
  check_same(a.outputs, b.outputs);
  check_same(a.attrs, b.attrs);
  CHECK(a.shape.elementwise == b.shape.elementwise);
  CHECK(a.shape.same_shape == b.shape.same_shape);
  CHECK(a.shape.max_elements == b.shape.max_elements);
  CHECK(a.shape.splittable == b.shape.splittable);
  CHECK(a.shape.indices == b.shape.indices);
  CHECK(a.shape.row_slices == b.shape.row_slices);
  CHECK(a.kernel.file == b.kernel.file);
  CHECK(a.kernel.entry == b.kernel.entry);
  check_same(a.kernel.args, b.kernel.args);
  CHECK(a.target.isa == b.target.isa);
  CHECK(a.target.halide_target == b.target.halide_target);
  CHECK(a.target.cpu_features == b.target.cpu_features);
  CHECK(a.target.priority == b.target.priority);
  CHECK(a.schedule.recipe == b.schedule.recipe);
  CHECK(a.schedule.params == b.schedule.params);
  CHECK(a.schedule.summary == b.schedule.summary);
  CHECK(a.tolerance.rtol == b.tolerance.rtol);  // exact, bit for bit
  CHECK(a.tolerance.atol == b.tolerance.atol);
  CHECK(a.traffic.bytes_read_per_element == b.traffic.bytes_read_per_element);
  CHECK(a.traffic.bytes_written_per_element == b.traffic.bytes_written_per_element);
  CHECK(a.cache_key == b.cache_key);
  CHECK(a.halide_version == b.halide_version);
  CHECK(a.bandwidth_op == b.bandwidth_op);
}

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "<no FormatError thrown>";
}

// The Adam descriptor's JSON, changed by `edit`, then parsed: the error message.
inline std::string reject(const std::function<void(json&)>& edit) {
  json j = json::parse(to_json(make_adam()));
  edit(j);
  std::string text = j.dump(2);
  return error_of([&] { descriptor_from_json(text, kOrigin); });
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// "ops/apply_adam.json: /inputs/2/dtype: ..." and the message names `detail`.
inline void check_rejected(const std::string& msg, const std::string& pointer,
                           const std::string& detail) {
  CHECK_MESSAGE(contains(msg, std::string(kOrigin) + ": " + pointer + ": "), msg);
  CHECK_MESSAGE(contains(msg, detail), msg);
}

// Index of the kernel arg named `name` in the Adam JSON.
inline size_t arg_index(const json& j, const std::string& name) {
  for (size_t i = 0; i < j["kernel"]["args"].size(); ++i) {
    if (j["kernel"]["args"][i]["name"] == name) return i;
  }
  FAIL("no kernel arg " << name);
  return 0;
}

}  // namespace opforge::registry::testing
