// opforge run OP --in NAME=FILE.npy ... --scalar NAME=VALUE ... [--attr NAME=VALUE] --out DIR
// An in-place output is written in its input's .npy dtype (bf16: '<V2' or '<u2' as given).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>

#include "opforge/npy.hpp"
#include "opforge/runtime.hpp"
#include "registry/cli/commands.h"
#include "registry/cli/user_rules.h"

namespace opforge::cli {

namespace {

// bf16 tensors come in two .npy conventions: ml_dtypes.bfloat16 arrays saved with np.save
// ('<V2', numpy's '|V2' too), or raw bits as uint16 ('<u2') named by --dtype NAME=bf16.
constexpr const char* kRawBits = "<u2";
constexpr const char* kMlDtypes = "<V2";

// `raw`: the dtype --dtype NAME=... gave the file's bits (bf16 in '<u2', FP8 in '|u1'), if any.
registry::DType dtype_of(const npy::Array& arr, const std::string& name, const std::string& file,
                         std::optional<registry::DType> raw) {
  if (raw && *raw != registry::DType::bf16) {  // FP8 bits: numpy has no FP8 dtype
    if (arr.descr != "|u1") {
      throw UsageError("--dtype " + name + "=" + registry::dtype_name(*raw) + ": " + file +
                       " holds '" + arr.descr + "', not FP8 bits as uint8 ('|u1')");
    }
    return *raw;
  }
  if (raw) {
    if (arr.descr != kRawBits) {
      throw UsageError("--dtype " + name + "=bf16: " + file + " holds '" + arr.descr +
                       "', not raw bf16 bits ('<u2')");
    }
    return registry::DType::bf16;
  }
  if (arr.descr == "<f4") return registry::DType::f32;
  if (arr.descr == "<f8") return registry::DType::f64;
  if (arr.descr == "<f2") return registry::DType::f16;
  if (arr.descr == "<i4") return registry::DType::i32;
  if (arr.descr == "<i8") return registry::DType::i64;
  if (arr.descr == "|b1") return registry::DType::b8;
  if (arr.descr == "|u1") return registry::DType::u8;
  if (arr.descr == "<V2" || arr.descr == "|V2") return registry::DType::bf16;
  if (arr.descr == kRawBits) {
    throw UsageError("--in " + name + ": " + file +
                     " holds uint16 ('<u2'); if those are bf16 bits, add --dtype " + name +
                     "=bf16");
  }
  throw std::runtime_error(file + ": dtype " + arr.descr + " is not an opforge tensor dtype");
}

// `bf16_descr`: the convention fresh bf16 outputs are written in.
std::string descr_of(registry::DType t, const std::string& output, const std::string& bf16_descr) {
  switch (t) {
    case registry::DType::f32:
      return "<f4";
    case registry::DType::f64:
      return "<f8";
    case registry::DType::f16:
      return "<f2";
    case registry::DType::bf16:
      return bf16_descr;
    case registry::DType::i32:
      return "<i4";
    case registry::DType::i64:
      return "<i8";
    case registry::DType::b8:
      return "|b1";
    case registry::DType::u8:
      return "|u1";
    default:
      throw std::runtime_error("output '" + output + "' has dtype " + registry::dtype_name(t) +
                               ", which .npy cannot hold");
  }
}

// --dtype NAME=bf16|e4m3|e5m2 for each NAME given with --in.
std::map<std::string, registry::DType> raw_dtypes(const Args& a,
                                                  const std::map<std::string, std::string>& in) {
  std::map<std::string, registry::DType> out;
  for (const auto& s : a.all("dtype")) {
    auto [name, dtype] = split_assignment(s, "dtype");
    registry::DType t;
    if (dtype == "bf16" || dtype == "bfloat16") {
      t = registry::DType::bf16;
    } else if (dtype == "e4m3" || dtype == "float8_e4m3fn") {
      t = registry::DType::f8e4m3;
    } else if (dtype == "e5m2" || dtype == "float8_e5m2") {
      t = registry::DType::f8e5m2;
    } else {
      throw UsageError("--dtype " + s +
                       ": bf16 (raw bf16 bits in a '<u2' file), e4m3 or e5m2 (FP8 bits in a "
                       "'|u1' file)");
    }
    if (!in.count(name)) throw UsageError("--dtype " + name + ": no --in " + name + "=FILE.npy");
    if (!out.emplace(name, t).second) throw UsageError("--dtype " + name + " given twice");
  }
  return out;
}

// A uint8 file for an argument some variant takes as FP8 bits and none as uint8 (8-bit
// codes): numpy has no FP8 dtype, so name the option that reads it (as for bf16 bits in a
// '<u2' file).
void check_fp8_files(const Registry& reg, const std::string& op,
                     const std::vector<Tensor>& tensors) {
  for (const auto& t : tensors) {
    if (t.dtype != registry::DType::u8) continue;
    bool fp8 = false, u8 = false;
    for (const auto& d : reg.variants(op)) {
      const registry::Input* in = d.find_input(t.name);
      if (!in) continue;
      fp8 = fp8 || in->dtype == registry::DType::f8e4m3 || in->dtype == registry::DType::f8e5m2;
      u8 = u8 || in->dtype == registry::DType::u8;
    }
    if (fp8 && !u8) {
      throw UsageError("--in " + t.name + ": a uint8 ('|u1') file; if those are FP8 bits, add " +
                       "--dtype " + t.name + "=e4m3 or --dtype " + t.name + "=e5m2");
    }
  }
}

// Without --attr storage: the one storage (bf16m, bf16s, ...) whose variants take every
// --in tensor in its dtype, so bf16 files pick the bf16 variant; else none (the default).
std::map<std::string, std::string> with_storage(std::map<std::string, std::string> attrs,
                                                const Registry& reg, const std::string& op,
                                                const std::vector<Tensor>& tensors) {
  if (attrs.count("storage")) return attrs;
  check_fp8_files(reg, op, tensors);
  std::set<std::string> tags;
  for (const auto& d : reg.variants(op)) {
    if (d.shape.named_dims || d.find_attr("storage")) return attrs;
    bool fits = true;
    for (const auto& t : tensors) {
      const registry::Input* in = d.find_input(t.name);
      fits = fits && in && in->dtype == t.dtype;
    }
    if (fits) tags.insert(storage_tag(d));
  }
  if (tags.size() == 1 && *tags.begin() != "f32") attrs["storage"] = *tags.begin();
  return attrs;
}

}  // namespace

int cmd_run(const Args& a) {
  apply_unchecked_scalars(a);
  if (!a.has("out")) throw UsageError("--out DIR is required");
  checked_dir("--out", a.get("out"));
  const std::string op = a.positional.at(0);
  build_rule_op_if_missing(a, op);
  auto reg = Registry::open(registry_dir(a));
  if (a.has("threads"))
    reg->set_num_threads(static_cast<int>(a.get_int("threads", 0, 1, kMaxThreads)));

  // Read every input before anything runs or is written.
  std::map<std::string, npy::Array> arrays;
  std::map<std::string, std::string> files;
  for (const auto& s : a.all("in")) {
    auto [name, file] = split_assignment(s, "in");
    if (files.count(name)) throw UsageError("--in " + name + " given twice");
    files[name] = file;
  }
  const std::map<std::string, registry::DType> raw = raw_dtypes(a, files);
  for (const auto& [name, file] : files) arrays[name] = npy::read(file);
  std::vector<Tensor> tensors;
  // Fresh bf16 outputs follow the inputs' convention: raw bits when those came raw.
  std::string bf16_descr = kMlDtypes;
  for (auto& [name, arr] : arrays) {
    tensors.push_back({name, arr.data.data(),
                       dtype_of(arr, name, files[name],
                                raw.count(name) ? std::optional(raw.at(name)) : std::nullopt),
                       arr.shape});
    if (raw.count(name) && raw.at(name) == registry::DType::bf16) bf16_descr = kRawBits;
  }
  const std::map<std::string, double> scalars = scalar_options(a);
  // NN ops pick their algorithm by the inputs' shapes (--attr algorithm=NAME forces one).
  Kernel& k = a.has("variant") ? op_kernel(*reg, a, op)
                               : reg->select(op, with_storage(attr_options(a), *reg, op, tensors),
                                             tensors, scalars, a.get("isa"));
  const registry::Descriptor& d = k.descriptor();
  // NN ops write fresh outputs: allocated here with the shapes the descriptor's rule gives.
  std::map<std::string, npy::Array> outputs;
  if (d.shape.named_dims) {
    const auto shapes = k.output_shapes(tensors, scalars);
    for (size_t j = 0; j < d.outputs.size(); ++j) {
      if (arrays.count(d.outputs[j].name))
        throw UsageError("--in " + d.outputs[j].name + ": that is an output of " + op);
      npy::Array& out = outputs[d.outputs[j].name];
      out.descr = descr_of(d.outputs[j].dtype, d.outputs[j].name, bf16_descr);
      out.shape = shapes[j];
      out.data.assign(out.elements() * out.item_size(), 0);
    }
    for (const auto& o : d.outputs) {
      npy::Array& arr = outputs.at(o.name);
      tensors.push_back({o.name, arr.data.data(), o.dtype, arr.shape});
    }
  }
  // --dump: this call's inputs, scalars and outputs for `opforge check --replay DIR`.
  if (a.has("dump")) set_dump_dir(checked_dir("--dump", a.get("dump")));
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

Command run_command() {
  return {{"run",
           "OP",
           "Run an op on .npy inputs and write every updated state to DIR/NAME.npy",
           {registry_option(),
            rules_option(),
            cache_option(),
            {"in", "NAME=FILE.npy",
             "a tensor argument (C order; bf16 as ml_dtypes saves it, descr '<V2')", true},
            {"dtype", "NAME=bf16|e4m3|e5m2",
             "the --in file NAME holds raw bf16 bits as uint16 ('<u2'; its outputs, and fresh bf16 "
             "outputs, are written the same way, default '<V2'), or OCP FP8 bits as uint8 ('|u1')",
             true},
            {"scalar", "NAME=VALUE", "a run-time scalar argument", true},
            attr_option(),
            isa_option(),
            variant_option(),
            {"out", "DIR", "where outputs go (created if missing)"},
            {"dump", "DIR",
             "also record the call (inputs, scalars, outputs, descriptor) under DIR for "
             "`opforge check --replay DIR` (several runs append)"},
            {"threads", "N", "Halide thread pool size (default: all cores)"},
            unchecked_scalars_option()}},
          cmd_run};
}

}  // namespace opforge::cli
