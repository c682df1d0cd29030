// opforge run OP --in NAME=FILE.npy ... --scalar NAME=VALUE ... [--attr NAME=VALUE] --out DIR
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "opforge/runtime.hpp"
#include "registry/cli/commands.h"
#include "runtime/npy.h"

namespace opforge::cli {

namespace {

registry::DType dtype_of(const npy::Array& arr, const std::string& file) {
  if (arr.descr == "<f4") return registry::DType::f32;
  if (arr.descr == "<f8") return registry::DType::f64;
  if (arr.descr == "<f2") return registry::DType::f16;
  if (arr.descr == "<i4") return registry::DType::i32;
  if (arr.descr == "<i8") return registry::DType::i64;
  throw std::runtime_error(file + ": dtype " + arr.descr + " is not an opforge tensor dtype");
}

}  // namespace

int cmd_run(const Args& a) {
  if (!a.has("out")) throw UsageError("--out DIR is required");
  auto reg = Registry::open(registry_dir(a));
  Kernel& k = op_kernel(*reg, a, a.positional.at(0));
  if (a.has("threads")) reg->set_num_threads(static_cast<int>(a.get_int("threads", 0)));

  // Read every input before anything runs or is written.
  std::map<std::string, npy::Array> arrays;
  std::map<std::string, std::string> files;
  for (const auto& s : a.all("in")) {
    auto [name, file] = split_assignment(s, "in");
    if (arrays.count(name)) throw UsageError("--in " + name + " given twice");
    arrays[name] = npy::read(file);
    files[name] = file;
  }
  std::vector<Tensor> tensors;
  for (auto& [name, arr] : arrays) {
    tensors.push_back({name, arr.data.data(), dtype_of(arr, files[name]), arr.shape});
  }
  k.call(tensors,
         scalar_options(a));  // validates every argument first; updates the arrays in place

  // Every input was validated and the kernel has run before the first write; each output
  // file is written to a temp file and renamed, so none is ever half-written.
  const std::filesystem::path out = a.get("out");
  std::filesystem::create_directories(out);
  const registry::Descriptor& d = k.descriptor();
  for (const auto& o : d.outputs) {
    npy::write_atomic((out / (o.name + ".npy")).string(), arrays.at(o.aliases));
  }
  std::printf("%s (%s): wrote", d.op.c_str(), d.variant.c_str());
  for (const auto& o : d.outputs) std::printf(" %s", (out / (o.name + ".npy")).c_str());
  std::printf("\n");
  return 0;
}

}  // namespace opforge::cli
