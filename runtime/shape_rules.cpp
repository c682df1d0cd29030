#include "runtime/shape_rules.h"

#include <cmath>
#include <mutex>

#include "registry/format/shape_expr.h"

namespace opforge {

using registry::Descriptor;
using registry::Input;
using registry::ShapeExpr;

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t k = 0; k < s.size(); ++k) t += (k ? ", " : "") + std::to_string(s[k]);
  return t + "]";
}

namespace {

std::string dims_text(const std::vector<std::string>& dims) {
  std::string t = "[";
  for (size_t k = 0; k < dims.size(); ++k) t += (k ? ", " : "") + dims[k];
  return t + "]";
}

bool optional_dim(const std::vector<std::string>& dims, size_t k) {
  return k == 0 && !dims[0].empty() && dims[0].back() == '?';
}

std::string dim_name(const std::vector<std::string>& dims, size_t k) {
  return optional_dim(dims, k) ? dims[0].substr(0, dims[0].size() - 1) : dims[k];
}

// "KH = 5 (weight [8, 4, 5, 5]), stride_h = 2" for the names an expression reads.
std::string values_text(const ShapeExpr& e, const BoundShapes& b) {
  std::string t;
  for (const auto& n : e.names()) {
    auto it = b.env.find(n);
    if (it == b.env.end()) continue;
    t += (t.empty() ? "" : ", ") + n + " = " + std::to_string(it->second);
    auto o = b.origin.find(n);
    if (o != b.origin.end()) t += " (" + o->second + ")";
  }
  return t;
}

// Parsed once per process: every NN call evaluates its descriptor's expressions, and the
// texts come from a few loaded descriptors (a parse would cost more than a small call).
const ShapeExpr& parsed(const std::string& text) {
  static std::mutex m;
  static std::map<std::string, ShapeExpr> cache;
  std::lock_guard<std::mutex> lock(m);
  auto it = cache.find(text);
  if (it == cache.end()) it = cache.emplace(text, ShapeExpr::parse(text)).first;
  return it->second;
}

std::optional<int64_t> eval(const Descriptor& d, const std::string& text, const BoundShapes& b) {
  try {
    return parsed(text).evaluate(b.env);
  } catch (const registry::ShapeExprError& e) {
    throw Error("op '" + d.op + "': " + e.what());
  }
}

}  // namespace

BoundShapes bind_shapes(const Descriptor& d, const std::map<std::string, const TensorView*>& inputs,
                        const std::map<std::string, double>& scalars) {
  auto fail = [&](const std::string& msg) { return Error("op '" + d.op + "': " + msg); };
  BoundShapes b;
  for (const auto& a : d.attrs) {
    if (a.type == registry::Attr::Type::integer) b.env[a.name] = std::stoll(a.value);
    if (a.type == registry::Attr::Type::boolean) b.env[a.name] = a.value == "true";
  }
  for (const Input& in : d.inputs) {
    if (in.role != Input::Role::scalar) continue;
    if (in.dtype != registry::DType::i32 && in.dtype != registry::DType::i64) continue;
    auto it = scalars.find(in.name);
    if (it == scalars.end()) throw fail("missing scalar argument '" + in.name + "'");
    const double v = it->second;
    if (!(std::trunc(v) == v && std::fabs(v) < 2147483648.0))
      throw fail("scalar '" + in.name + "' must be a 32-bit integer, got " + std::to_string(v));
    b.env[in.name] = static_cast<int64_t>(v);
  }
  // Required dims first, then optional ones: a tensor without the leading "B?" dim broadcasts
  // over the extent another tensor gives it.
  for (int pass = 0; pass < 2; ++pass) {
    for (const Input& in : d.inputs) {
      if (in.role == Input::Role::scalar) continue;
      auto it = inputs.find(in.name);
      if (it == inputs.end()) throw fail("missing tensor argument '" + in.name + "'");
      const TensorView& t = *it->second;
      const std::vector<int64_t> shape(t.shape, t.shape + t.rank);
      const int rank = static_cast<int>(in.dims.size());
      const bool has_optional = rank > 0 && optional_dim(in.dims, 0);
      const bool omitted = has_optional && t.rank == rank - 1;
      if (t.rank != rank && !omitted) {
        throw fail("argument '" + in.name + "' has shape " + shape_text(shape) + " (rank " +
                   std::to_string(t.rank) + "), expected rank " + std::to_string(rank) +
                   (has_optional ? " or " + std::to_string(rank - 1) : "") + ": " +
                   dims_text(in.dims));
      }
      for (size_t k = omitted ? 1 : 0; k < in.dims.size(); ++k) {
        if (optional_dim(in.dims, k) != (pass == 1)) continue;
        const std::string name = dim_name(in.dims, k);
        const int64_t extent = shape[k - (omitted ? 1 : 0)];
        if (pass == 1) b.optional_present[name] = true;
        auto [pos, fresh] = b.env.emplace(name, extent);
        if (fresh) {
          b.origin[name] = in.name + " " + shape_text(shape);
        } else if (pos->second != extent) {
          throw fail("argument '" + in.name + "' has shape " + shape_text(shape) + " " +
                     dims_text(in.dims) + ": its " + name + " is " + std::to_string(extent) +
                     ", but " + name + " = " + std::to_string(pos->second) + " from " +
                     (b.origin.count(name) ? b.origin[name] : "the scalars/attrs"));
        }
      }
    }
  }
  // Optional dims nobody gave are 1.
  for (const Input& in : d.inputs) {
    if (!in.dims.empty() && optional_dim(in.dims, 0)) b.env.emplace(dim_name(in.dims, 0), 1);
  }
  for (const auto& c : d.shape.checks) {
    auto v = eval(d, c.condition, b);
    if (!v || *v == 0) {
      throw fail(c.message + " (`" + c.condition +
                 "` does not hold: " + values_text(parsed(c.condition), b) + ")");
    }
  }
  for (const auto& o : d.outputs) {
    std::vector<int64_t> shape;
    for (size_t k = 0; k < o.dims.size(); ++k) {
      std::string e = o.dims[k];
      if (optional_dim(o.dims, k)) {
        e.pop_back();
        if (!b.optional_present.count(e)) continue;  // no input had it: neither does the output
      }
      auto v = eval(d, e, b);
      if (!v)
        throw fail("output '" + o.name + "' dim " + std::to_string(k) + " (" + e +
                   ") reads a value the call does not give");
      if (*v < 0) {
        throw fail("output '" + o.name + "' would have dim " + std::to_string(k) + " = " +
                   std::to_string(*v) + " (" + e + " with " + values_text(parsed(e), b) + ")");
      }
      shape.push_back(*v);
    }
    b.output_shapes.push_back(shape);
  }
  return b;
}

std::string why_not_applicable(const Descriptor& d, const BoundShapes& b) {
  if (d.algorithm.applies_when.empty()) return "";
  auto v = eval(d, d.algorithm.applies_when, b);
  if (v && *v != 0) return "";
  return "algorithm '" + d.algorithm.name + "' applies only when " + d.algorithm.applies_when +
         "; here " + values_text(parsed(d.algorithm.applies_when), b);
}

}  // namespace opforge
