#include "registry/cli/check/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "opforge/fp8.h"
#include "opforge/npy.hpp"
#include "registry/cli/check/golden_check.h"
#include "registry/cli/check/nn_problem.h"
#include "registry/cli/commands.h"
#include "registry/format/bounded_read.h"

namespace opforge::cli::check {

namespace fs = std::filesystem;

namespace {

// A dumped tensor: its dtype (call.json's) and raw elements (the .npy's).
struct Dumped {
  registry::DType dtype;
  npy::Array array;
};

std::map<std::string, Dumped> read_tensors(const fs::path& dir, const nlohmann::json& list) {
  std::map<std::string, Dumped> out;
  for (const auto& t : list) {
    const std::string name = t.at("name"), file = t.at("file");
    const auto dtype = registry::parse_dtype(t.at("dtype").get<std::string>());
    if (!dtype) throw Error((dir / file).string() + ": unknown dtype " + t.at("dtype").dump());
    if (file.find('/') != std::string::npos)
      throw Error("call.json names a file outside its call: " + file);
    npy::Array a = npy::read((dir / file).string());
    if (a.item_size() != registry::dtype_bytes(*dtype))
      throw Error((dir / file).string() + ": '" + a.descr + "' does not hold " +
                  registry::dtype_name(*dtype));
    out[name] = {*dtype, std::move(a)};
  }
  return out;
}

template <typename T>
std::vector<T> elements_of(const npy::Array& a) {
  std::vector<T> v(static_cast<size_t>(a.elements()));
  std::copy(a.data.begin(), a.data.end(), reinterpret_cast<uint8_t*>(v.data()));
  return v;
}

// The golden's inputs from the dumped inputs (as check's make_inputs draws them: narrow and
// FP8 tensors widened, 8-bit states decoded with their absmaxes before the call) and the
// kernel's results from the dumped outputs, keyed like the states they update.
CheckData call_data(const registry::Descriptor& d, const nlohmann::json& call,
                    const std::map<std::string, Dumped>& in,
                    const std::map<std::string, Dumped>& out) {
  CheckData c;
  builder::GoldenData& g = c.golden;
  auto input = [&](const std::string& name) -> const Dumped& {
    auto it = in.find(name);
    if (it == in.end()) throw Error("the dump has no input '" + name + "'");
    return it->second;
  };
  for (const auto& i : d.inputs) {
    if (i.role == registry::Input::Role::scalar) {
      if (!call.at("scalars").contains(i.name))
        throw Error("the dump has no scalar '" + i.name + "'");
      const double v = call.at("scalars").at(i.name).get<double>();
      g.scalars[i.name] = i.dtype == registry::DType::f32 ? double(float(v)) : v;
      continue;
    }
    if (!in.count(i.name)) continue;  // an optional tensor the call did not pass
    const Dumped& t = input(i.name);
    if (i.name == d.shape.segments) {  // multi-tensor: the chunk table the kernel read
      g.segments = elements_of<int32_t>(t.array);
      continue;
    }
    if (!d.shape.elementwise && i.name == d.shape.indices) {
      auto& v = g.indices[i.name];
      if (t.dtype == registry::DType::i64) {
        v = elements_of<int64_t>(t.array);
      } else {
        for (int32_t x : elements_of<int32_t>(t.array)) v.push_back(x);
      }
      g.count = static_cast<int64_t>(v.size());
      continue;
    }
    if (i.role == registry::Input::Role::block_scale) continue;  // decodes the 8-bit states
    auto& golden = g.tensors[i.name];
    if (!i.quant_map.empty()) {
      golden = decoded_states(i.quant_map, elements_of<uint8_t>(t.array),
                              elements_of<float>(input(i.name + "_absmax").array), d.shape.block);
    } else if (narrow(t.dtype)) {
      for (uint16_t x : elements_of<uint16_t>(t.array)) golden.push_back(widen(t.dtype, x));
    } else if (t.dtype == registry::DType::f8e4m3 || t.dtype == registry::DType::f8e5m2) {
      for (uint8_t x : elements_of<uint8_t>(t.array))
        golden.push_back(registry::fp8_to_float(x, t.dtype));
    } else if (t.dtype == registry::DType::f32) {
      for (float x : elements_of<float>(t.array)) golden.push_back(x);
    } else {
      throw Error("input '" + i.name + "' is " + registry::dtype_name(t.dtype) +
                  ", which the golden does not read");
    }
    if (!d.shape.same_shape.empty() && i.name == d.shape.same_shape.front()) {
      const auto& shape = t.array.shape;
      g.n = t.array.elements();
      if (!d.shape.elementwise) {
        g.rows = shape.empty() ? 0 : shape.front();
        g.cols = g.rows > 0 ? g.n / g.rows : 0;
      }
    }
  }
  // What the kernel left in each updated tensor, by the name of the input it overwrote.
  for (const auto& o : d.outputs) {
    auto it = out.find(o.name);
    if (it == out.end()) throw Error("the dump has no output '" + o.name + "'");
    const Dumped& t = it->second;
    const std::string& key = o.aliases.empty() ? o.name : o.aliases;
    if (narrow(t.dtype)) {
      c.half[key] = elements_of<uint16_t>(t.array);
    } else if (t.dtype == registry::DType::f32) {
      c.f32[key] = elements_of<float>(t.array);
    } else {
      c.bytes[key] = elements_of<uint8_t>(t.array);
    }
  }
  return c;
}

// An NN call: its op's fp64 reference on the dumped inputs (bf16 widened, bools 0/1, int32
// words as doubles), the dumped outputs judged with the reference's tolerance for the call's
// shapes (else the descriptor's).
nlohmann::json replay_nn(const registry::Descriptor& d, const nlohmann::json& call,
                         const std::map<std::string, Dumped>& in,
                         const std::map<std::string, Dumped>& out) {
  const nn_golden::NnReference* ref = nn_golden::find_nn_reference(d.op);
  if (!ref) throw Error("op '" + d.op + "' has no fp64 reference");
  auto as_doubles = [](const Dumped& t) {
    std::vector<double> v;
    switch (t.dtype) {
      case registry::DType::f32:
        for (float x : elements_of<float>(t.array)) v.push_back(x);
        break;
      case registry::DType::bf16:
        for (uint16_t x : elements_of<uint16_t>(t.array)) v.push_back(widen(t.dtype, x));
        break;
      case registry::DType::b8:
        for (uint8_t x : elements_of<uint8_t>(t.array)) v.push_back(x ? 1 : 0);
        break;
      case registry::DType::i32:
        for (int32_t x : elements_of<int32_t>(t.array)) v.push_back(x);
        break;
      default:
        throw Error(std::string("a ") + registry::dtype_name(t.dtype) +
                    " tensor, which the NN references do not read");
    }
    return v;
  };
  nn_golden::NnProblem p;
  nn_golden::NnTensors in64, got;
  // The draw range a reference's tolerance may depend on (attention's logit size, 1-bit
  // codes' scale): that of the dumped float inputs.
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& [name, t] : in) {
    p.shapes[name] = t.array.shape;
    in64[name] = as_doubles(t);
    if (t.dtype != registry::DType::f32 && t.dtype != registry::DType::bf16) continue;
    for (double x : in64[name]) {
      if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
    }
  }
  if (lo <= hi) p.lo = lo, p.hi = hi;
  for (const auto& [name, v] : call.at("scalars").items()) p.scalars[name] = v.get<double>();
  for (const auto& [k, v] : d.attr_values()) p.attrs[k] = v;
  for (const auto& [name, t] : out) got[name] = as_doubles(t);
  nn_golden::NnProblemCheck c;
  nn_golden::judge_outputs(d, *ref, p, in64, got, c);
  nlohmann::json states = nlohmann::json::object();
  for (const auto& [name, e] : c.outputs) states[name] = errors_json(e);
  return {{"op", d.op},       {"variant", d.variant}, {"rtol", c.rtol},      {"atol", c.atol},
          {"states", states}, {"worst", c.worst},     {"ok", c.worst <= 1.0}};
}

// One line per output: "var: max abs 1.2e-07, rel 2.4e-07, 2 ulp" (and what exceeds).
std::string errors_line(const nlohmann::json& states) {
  std::string s;
  for (const auto& [name, e] : states.items()) {
    char b[256];
    std::snprintf(b, sizeof b, "%s%s: max abs %.3g, rel %.3g, %lld ulp", s.empty() ? "" : "; ",
                  name.c_str(), e["max_abs_error"].get<double>(), e["max_rel_error"].get<double>(),
                  e["max_ulp"].get<long long>());
    s += b;
    if (e["exceeding"] != 0) {
      std::snprintf(b, sizeof b, " (%lld of %lld past the bound)", e["exceeding"].get<long long>(),
                    e["elements"].get<long long>());
      s += b;
    }
  }
  return s;
}

}  // namespace

int replay(const Args& a) {
  if (!a.positional.empty() || a.has("all"))
    throw UsageError("--replay DIR checks the dumped calls: name no OP, no --all");
  const fs::path dir = a.get("replay");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError("--replay " + dir.string() + ": not a directory");
  std::vector<fs::path> calls;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.size() > 7 && name[6] == '-' &&
        name.substr(0, 6).find_first_not_of("0123456789") == std::string::npos)
      calls.push_back(e.path());
  }
  std::sort(calls.begin(), calls.end());
  if (calls.empty()) throw UsageError("--replay " + dir.string() + ": no dumped calls in it");

  const bool json = a.has("json");
  nlohmann::json rows = nlohmann::json::array();
  int ok = 0, failed = 0, skipped = 0;
  std::string first_bad;
  std::map<std::string, std::vector<std::unique_ptr<dsl::OptimizerDecl>>> keep;
  std::map<std::string, std::vector<const dsl::OptimizerDecl*>> decls;
  auto row = [&](const std::string& status, const std::string& entry, const std::string& what,
                 nlohmann::json report) {
    ++(status == "ok" ? ok : status == "skipped" ? skipped : failed);
    report["status"] = status;
    report["entry"] = entry;
    report["detail"] = what;
    rows.push_back(report);
    if (!json) std::printf("%-7s %s  %s\n", status.c_str(), entry.c_str(), what.c_str());
    if (status == "FAILED" && first_bad.empty()) first_bad = entry + ": " + what;
  };
  auto judged = [&](const std::string& entry, const nlohmann::json& report) {
    row(report["ok"].get<bool>() ? "ok" : "FAILED", entry, errors_line(report["states"]), report);
  };
  for (const fs::path& call_dir : calls) {
    const std::string entry = call_dir.filename().string();
    const fs::path call_file = call_dir / "call.json";
    if (!fs::exists(call_file, ec)) {
      row("skipped", entry, "no call.json: the call did not finish (or is still running)", {});
      continue;
    }
    try {
      const nlohmann::json call = nlohmann::json::parse(
          registry::read_regular_file(call_file.string(), registry::kJsonLimits));
      if (call.value("format", "") != "opforge-dump/1")
        throw Error(call_file.string() + ": not an opforge-dump/1 call");
      const registry::Descriptor d =
          registry::descriptor_from_json(call.at("descriptor").dump(), call_file.string());
      if (const std::string why = not_checked(d); !why.empty()) {
        row("skipped", entry, d.op + ": " + why, {{"op", d.op}, {"variant", d.variant}});
        continue;
      }
      const auto in = read_tensors(call_dir, call.at("inputs"));
      const auto out = read_tensors(call_dir, call.at("outputs"));
      if (d.shape.named_dims) {
        judged(entry, replay_nn(d, call, in, out));
        continue;
      }
      if (!decls.count(d.op)) decls[d.op] = declarations_of(d.op, rule_files(a, d), keep[d.op], {});
      CheckData c = call_data(d, call, in, out);
      judged(entry, judge(decls.at(d.op), d, c, nullptr));
    } catch (const std::exception& e) {
      row("FAILED", entry, std::string("cannot replay: ") + e.what(), {});
    }
  }
  if (json) {
    std::cout << nlohmann::json{{"calls", rows},
                                {"ok", ok},
                                {"failed", failed},
                                {"skipped", skipped},
                                {"first_failed", first_bad}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("%zu calls: %d ok, %d failed, %d skipped\n", calls.size(), ok, failed, skipped);
    if (!first_bad.empty()) std::printf("first call past its bound: %s\n", first_bad.c_str());
  }
  return failed ? 1 : 0;
}

}  // namespace opforge::cli::check
