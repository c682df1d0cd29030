// libFuzzer target for the registry's descriptor and index readers (registry/format/).
//
// Every input is read both as an op descriptor and as an index, as the runtime reads
// ops/<variant>.json and index.json (descriptor_from_json and index_from_json run every check,
// descriptor_checks.cpp included). A FormatError is the expected way to reject bad input; any
// other exception (it escapes, and libFuzzer reports it) or crash is a bug. What is accepted
// must round-trip: to_json, read back, gives the same JSON. The shape expressions of an
// accepted NN descriptor are evaluated as a call would, every name bound to small extents; a
// ShapeExprError there is expected (the runtime reports it), anything else is a bug.
//
// Built with clang++-14 -fsanitize=fuzzer,address,undefined by tests/CMakeLists.txt when clang
// and libFuzzer are installed; seed corpus: tests/registry/format/corpus/descriptor/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "opforge/descriptor.h"
#include "registry/format/shape_expr.h"

namespace reg = opforge::registry;

namespace {

template <typename T, typename Read>
void check_round_trip(const T& first, Read read, const char* what) {
  const std::string text = reg::to_json(first);
  std::string again;
  try {
    again = reg::to_json(read(text, "written.json"));
  } catch (const reg::FormatError& e) {
    std::fprintf(stderr, "written %s does not read back: %s\n--- written ---\n%s\n", what, e.what(),
                 text.c_str());
    std::abort();
  }
  if (again != text) {
    std::fprintf(stderr, "%s JSON is not a fixed point\n--- first ---\n%s\n--- second ---\n%s\n",
                 what, text.c_str(), again.c_str());
    std::abort();
  }
}

void evaluate(const std::string& text, int64_t extent) {
  if (text.empty()) return;
  const reg::ShapeExpr e = reg::ShapeExpr::parse(text);  // the reader checked it parses
  std::map<std::string, int64_t> env;
  for (const auto& name : e.names()) env[name] = extent;
  try {
    e.evaluate(env);
  } catch (const reg::ShapeExprError&) {
  }
}

void evaluate_nn(const reg::Descriptor& d) {
  if (!d.shape.named_dims) return;
  for (int64_t extent : {1, 3, 1 << 20}) {
    for (const auto& out : d.outputs) {
      for (std::string dim : out.dims) {
        if (!dim.empty() && dim.back() == '?') dim.pop_back();
        evaluate(dim, extent);
      }
    }
    for (const auto& c : d.shape.checks) evaluate(c.condition, extent);
    evaluate(d.algorithm.applies_when, extent);
    evaluate(d.cost.flops, extent);
    evaluate(d.cost.bytes, extent);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  try {
    const reg::Descriptor d = reg::descriptor_from_json(text, "fuzz.json");
    check_round_trip(d, reg::descriptor_from_json, "descriptor");
    evaluate_nn(d);
  } catch (const reg::FormatError&) {
    // rejected with a message: fine
  }
  try {
    const reg::Index idx = reg::index_from_json(text, "index.json");
    check_round_trip(idx, reg::index_from_json, "index");
  } catch (const reg::FormatError&) {
  }
  return 0;
}
