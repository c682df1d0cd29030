#include "dsl/kernel_pipeline.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <sstream>

#include "dsl/nn_pipeline.h"
#include "dsl/optimizer_pipeline.h"

namespace opforge::dsl {

namespace {

// Prints Exprs canonically: floats in hex (every bit counts), and let-bound names (Halide's
// CSE numbers them from a process-wide counter) renamed L0, L1, ... in order of binding.
class ExactPrinter : public Halide::Internal::IRPrinter {
 public:
  using IRPrinter::IRPrinter;

 protected:
  void visit(const Halide::Internal::FloatImm* op) override {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", op->value);
    stream << "(" << op->type << ")" << buf;
  }
  void visit(const Halide::Internal::Let* op) override {
    const std::string canon = "L" + std::to_string(lets_++);
    stream << "(let " << canon << " = ";
    print(op->value);
    auto saved = renamed_.find(op->name) == renamed_.end()
                     ? std::nullopt
                     : std::optional<std::string>(renamed_[op->name]);
    renamed_[op->name] = canon;
    stream << " in ";
    print(op->body);
    stream << ")";
    if (saved) {
      renamed_[op->name] = *saved;
    } else {
      renamed_.erase(op->name);
    }
  }
  void visit(const Halide::Internal::Variable* op) override {
    auto it = renamed_.find(op->name);
    stream << (it == renamed_.end() ? op->name : it->second);
  }

 private:
  int lets_ = 0;
  std::map<std::string, std::string> renamed_;
};

// Halide makes names unique per process (ImageParam "var" gets a wrapper Func "var_im", then
// "var_im$1" in the next pipeline): the suffix says nothing about the computation, so it is
// dropped, and the per-Function blocks are sorted so their order does not depend on it.
std::string without_unique_suffixes(const std::string& s) {
  std::string out;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '$' && k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k + 1]))) {
      while (k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k + 1]))) ++k;
      continue;
    }
    out += s[k];
  }
  return out;
}

}  // namespace

std::string algorithm_text(const std::vector<Halide::Func>& outs) {
  std::map<std::string, Halide::Internal::Function> funcs;
  for (const Halide::Func& out : outs) {
    for (const auto& [name, f] : Halide::Internal::find_transitive_calls(out.function()))
      funcs.emplace(name, f);
  }
  std::vector<std::string> blocks;
  for (const auto& [name, f] : funcs) {
    std::ostringstream s;
    ExactPrinter p(s);
    s << "func " << name << "(";
    for (const auto& a : f.args()) s << a << ",";
    s << ") =";
    for (const auto& v : f.values()) {
      s << " ";
      p.print(v);
    }
    for (const auto& u : f.updates()) {
      s << "\nupdate (";
      for (const auto& a : u.args()) p.print(a), s << ",";
      s << ") where ";
      p.print(u.predicate());
      for (const auto& rv : u.schedule().rvars()) {
        s << " rvar " << rv.var << "[";
        p.print(rv.min);
        s << ", ";
        p.print(rv.extent);
        s << "]";
      }
      s << " =";
      for (const auto& v : u.values()) {
        s << " ";
        p.print(v);
      }
    }
    blocks.push_back(without_unique_suffixes(s.str()) + "\n");
  }
  std::sort(blocks.begin(), blocks.end());
  std::string text;
  for (const auto& b : blocks) text += b;
  return text;
}

std::string algorithm_text(const Halide::Func& out) {
  return algorithm_text(std::vector<Halide::Func>{out});
}

Halide::Type halide_type(registry::DType t) {
  switch (t) {
    case registry::DType::f16:
      return Halide::Float(16);
    case registry::DType::bf16:
      return Halide::BFloat(16);
    case registry::DType::f32:
      return Halide::Float(32);
    case registry::DType::f64:
      return Halide::Float(64);
    case registry::DType::i32:
      return Halide::Int(32);
    case registry::DType::i64:
      return Halide::Int(64);
    case registry::DType::b8:
      return Halide::UInt(8);  // a byte per element (torch.bool); kernels test != 0
    case registry::DType::u8:
      return Halide::UInt(8);  // codes of 8-bit optimizer states (dsl/quant8.h)
    case registry::DType::f8e4m3:
    case registry::DType::f8e5m2:
      return Halide::UInt(8);  // FP8 bits, decoded on the integer bits (dsl/fp8.h)
  }
  return Halide::Float(32);
}

KernelPipeline build_pipeline(const ResolvedOp& op, const std::map<std::string, int64_t>& schedule,
                              const Halide::Target& target, bool scheduled) {
  if (op.nn()) {
    if (!scheduled)
      throw std::invalid_argument("op '" + op.name() +
                                  "': an NN op schedules itself (no unscheduled form)");
    return build_nn_pipeline(op, target, schedule);
  }
  return build_optimizer_pipeline(op, schedule, target, scheduled);
}

}  // namespace opforge::dsl
