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

std::string descr_of(registry::DType t, const std::string& output) {
  switch (t) {
    case registry::DType::f32:
      return "<f4";
    case registry::DType::f64:
      return "<f8";
    case registry::DType::f16:
      return "<f2";
    case registry::DType::i32:
      return "<i4";
    case registry::DType::i64:
      return "<i8";
    default:
      throw std::runtime_error("output '" + output + "' has dtype " + registry::dtype_name(t) +
                               ", which .npy cannot hold");
  }
}

}  // namespace

int cmd_run(const Args& a) {
  if (!a.has("out")) throw UsageError("--out DIR is required");
  auto reg = Registry::open(registry_dir(a));
  const std::string op = a.positional.at(0);
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
  const std::map<std::string, double> scalars = scalar_options(a);
  // NN ops pick their algorithm by the inputs' shapes (--attr algorithm=NAME forces one).
  Kernel& k = a.has("variant") ? op_kernel(*reg, a, op)
                               : reg->select(op, attr_options(a), tensors, scalars, a.get("isa"));
  const registry::Descriptor& d = k.descriptor();
  // NN ops write fresh outputs: allocated here with the shapes the descriptor's rule gives.
  std::map<std::string, npy::Array> outputs;
  if (d.shape.named_dims) {
    const auto shapes = k.output_shapes(tensors, scalars);
    for (size_t j = 0; j < d.outputs.size(); ++j) {
      if (arrays.count(d.outputs[j].name))
        throw UsageError("--in " + d.outputs[j].name + ": that is an output of " + op);
      npy::Array& out = outputs[d.outputs[j].name];
      out.descr = descr_of(d.outputs[j].dtype, d.outputs[j].name);
      out.shape = shapes[j];
      out.data.assign(out.elements() * out.item_size(), 0);
    }
    for (auto& [name, arr] : outputs)
      tensors.push_back({name, arr.data.data(), dtype_of(arr, name), arr.shape});
  }
  k.call(tensors, scalars);  // validates every argument first; in-place ops update the arrays

  // Every input was validated and the kernel has run before the first write; each output
  // file is written to a temp file and renamed, so none is ever half-written.
  const std::filesystem::path out = a.get("out");
  std::filesystem::create_directories(out);
  for (const auto& o : d.outputs) {
    npy::write_atomic((out / (o.name + ".npy")).string(),
                      d.shape.named_dims ? outputs.at(o.name) : arrays.at(o.aliases));
  }
  std::printf("%s (%s): wrote", d.op.c_str(), d.variant.c_str());
  for (const auto& o : d.outputs) std::printf(" %s", (out / (o.name + ".npy")).c_str());
  std::printf("\n");
  return 0;
}

}  // namespace opforge::cli
