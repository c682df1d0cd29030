// libFuzzer target for the .npy reader (runtime/npy.cpp).
//
// Every input is parsed as the bytes of a .npy file. An NpyError is the expected way to reject
// bad input; any other exception (it escapes, and libFuzzer reports it) or crash is a bug. An
// accepted array must survive the writer: serialize() then parse() gives the same descr, shape
// and data, and serializing that again gives the same bytes; the target aborts otherwise.
//
// Built with clang++-14 -fsanitize=fuzzer,address,undefined by tests/CMakeLists.txt when clang
// and libFuzzer are installed; seed corpus: tests/runtime/corpus/npy/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "opforge/npy.hpp"

namespace npy = opforge::npy;

namespace {

[[noreturn]] void fail(const char* what, const npy::Array& a) {
  std::fprintf(stderr, "%s (descr %s, %zu dims, %zu data bytes)\n", what, a.descr.c_str(),
               a.shape.size(), a.data.size());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);

  npy::Array a;
  try {
    a = npy::parse(bytes, "fuzz.npy");
  } catch (const npy::NpyError&) {
    return 0;  // rejected with a message: fine
  }

  if (static_cast<int64_t>(a.data.size()) != a.elements() * a.item_size()) {
    fail("accepted array's data size is not elements * item size", a);
  }
  std::string written;
  npy::Array back;
  try {
    written = npy::serialize(a);
    back = npy::parse(written, "serialized.npy");
  } catch (const npy::NpyError& e) {
    std::fprintf(stderr, "accepted array does not survive serialize/parse: %s\n", e.what());
    fail("round trip failed", a);
  }
  if (back.descr != a.descr || back.shape != a.shape || back.data != a.data) {
    fail("serialize/parse changed the array", a);
  }
  if (npy::serialize(back) != written) fail("serialize is not a fixed point", a);
  return 0;
}
