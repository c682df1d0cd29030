// opforge profile FILE.json: times one step of optimizer op calls (say, one training step of a
// model's optimizer) and prints, per op type (or per call with --by-call), the time per step,
// its share of the step, GB/s and the % of the same-traffic bandwidth kernel, sorted by time,
// like msprof's op summary.
//
// The file:
//   {
//     "name": "transformer-small adam step",        optional; default: the file name
//     "comment": "...",                             optional, ignored
//     "calls": [                                    required, at least one call
//       {"op": "apply_adam",                        required: an op of the registry
//        "n": 589824,                               dense ops: elements per tensor
//        "attrs": {"use_nesterov": "false"},        optional: selects the variant (strings,
//                                                   booleans or integers)
//        "scalars": {"lr": 0.001},                  optional: scalar arguments; the others are
//                                                   0.5 (1 for integer scalars), as in bench
//        "repeat": 12,                              optional (default 1): times the call appears
//                                                   in the step (12 layers)
//        "label": "h.attn.c_attn.weight",           optional (default "calls[I]"), unique
//        "comment": "..."},                         optional, ignored
//       {"op": "sparse_adam", "rows": 50257, "cols": 768, "indices": 4096, "label": "wte"}
//     ]
//   }
// Sparse ops (descriptor shape not elementwise) take "rows" and "cols" (the states are
// [rows, cols]) and "indices" (gradient rows per call at seeded random indices, default rows)
// instead of "n". Any other key is an error naming the file, the call and the key.
//
// Every instance of every call (each repeat too: they are distinct tensors in a real model, and
// caches see them so) gets its own tensors, allocated and filled once. One warm-up step runs,
// then --steps steps (default: about 1 s of op time, at least 5), each op step followed by a
// step of the same-traffic bandwidth kernels on the same buffers (sparse ops: on dense tensors
// of the touched rows' size), in this process: the host is shared and noisy, so only same-run
// ratios mean anything. A call's time is the median across steps of its time per step (all
// its repeats); an op's row and the step are sums of those, so the rows add up to the step
// (JSON's total.median_step_us is the median of whole measured steps, for comparison).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "opforge/runtime.hpp"
#include "opforge/suggest.hpp"
#include "registry/cli/bench/bench_workload.h"
#include "registry/cli/commands.h"

namespace opforge::cli {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;  // output: keys in a readable, stable order

// One call of the file, as written.
struct CallSpec {
  size_t index = 0;
  std::string where;  // "FILE: calls[I] (label)" for error messages
  std::string op, label;
  std::map<std::string, std::string> attrs;
  std::map<std::string, double> scalars;
  int64_t n = 0, rows = 0, cols = 0, indices = 0, repeat = 1;
  bool has_n = false, has_rows = false, has_cols = false, has_indices = false;
};

struct ProfileSpec {
  std::string name;
  std::vector<CallSpec> calls;
};

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(where + ": " + what);
}

void check_keys(const json& obj, const std::vector<std::string>& known, const std::string& where) {
  for (const auto& [key, value] : obj.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    fail(where, "unknown key '" + key + "'" + did_you_mean(key, known) + " (known: " + list + ")");
  }
}

// A JSON number that is a positive integer (1e6 is accepted).
int64_t positive_int(const json& v, const std::string& key, const std::string& where) {
  double d = 0;
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i <= 0) fail(where, "'" + key + "' must be positive, got " + v.dump());
    return i;
  }
  if (v.is_number_float()) d = v.get<double>();
  if (!v.is_number() || d != std::floor(d) || d > 9.0e18) {
    fail(where, "'" + key + "' must be a positive integer, got " + v.dump());
  }
  if (d <= 0) fail(where, "'" + key + "' must be positive, got " + v.dump());
  return static_cast<int64_t>(d);
}

ProfileSpec read_profile(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, std::string("cannot open: ") + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::parse_error& e) {
    fail(file, "not valid JSON (at byte " + std::to_string(e.byte) + "): " + e.what());
  }
  if (!j.is_object()) fail(file, "expected an object {\"name\": ..., \"calls\": [...]}");
  check_keys(j, {"name", "comment", "calls"}, file);
  ProfileSpec p;
  p.name = std::filesystem::path(file).stem().string();
  if (j.contains("name")) {
    if (!j["name"].is_string()) fail(file, "'name' must be a string");
    p.name = j["name"].get<std::string>();
  }
  if (!j.contains("calls")) fail(file, "missing 'calls' (a list of op calls)");
  const json& calls = j["calls"];
  if (!calls.is_array() || calls.empty()) fail(file, "'calls' must be a non-empty list");
  std::map<std::string, size_t> labels;
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    CallSpec s;
    s.index = i;
    s.where = file + ": calls[" + std::to_string(i) + "]";
    if (!c.is_object()) fail(s.where, "expected an object {\"op\": ..., \"n\": ...}");
    if (c.contains("label")) {
      if (!c["label"].is_string() || c["label"].get<std::string>().empty()) {
        fail(s.where, "'label' must be a non-empty string");
      }
      s.label = c["label"].get<std::string>();
      s.where += " (" + s.label + ")";
    } else {
      s.label = "calls[" + std::to_string(i) + "]";
    }
    check_keys(
        c, {"op", "n", "rows", "cols", "indices", "attrs", "scalars", "repeat", "label", "comment"},
        s.where);
    if (auto [it, fresh] = labels.emplace(s.label, i); !fresh) {
      fail(s.where,
           "label '" + s.label + "' already names calls[" + std::to_string(it->second) + "]");
    }
    if (!c.contains("op")) fail(s.where, "missing 'op'");
    if (!c["op"].is_string()) fail(s.where, "'op' must be a string");
    s.op = c["op"].get<std::string>();
    auto count = [&](const char* key, int64_t& out, bool& has) {
      if (!c.contains(key)) return;
      out = positive_int(c[key], key, s.where);
      has = true;
    };
    bool has_repeat = false;
    count("n", s.n, s.has_n);
    count("rows", s.rows, s.has_rows);
    count("cols", s.cols, s.has_cols);
    count("indices", s.indices, s.has_indices);
    count("repeat", s.repeat, has_repeat);
    if (c.contains("attrs")) {
      if (!c["attrs"].is_object()) fail(s.where, "'attrs' must be an object {\"NAME\": VALUE}");
      for (const auto& [name, v] : c["attrs"].items()) {
        if (v.is_string()) {
          s.attrs[name] = v.get<std::string>();
        } else if (v.is_boolean()) {
          s.attrs[name] = v.get<bool>() ? "true" : "false";
        } else if (v.is_number_integer()) {
          s.attrs[name] = std::to_string(v.get<int64_t>());
        } else {
          fail(s.where,
               "attr '" + name + "' must be a string, boolean or integer, got " + v.dump());
        }
      }
    }
    if (c.contains("scalars")) {
      if (!c["scalars"].is_object()) {
        fail(s.where, "'scalars' must be an object {\"NAME\": NUMBER}");
      }
      for (const auto& [name, v] : c["scalars"].items()) {
        if (!v.is_number())
          fail(s.where, "scalar '" + name + "' must be a number, got " + v.dump());
        s.scalars[name] = v.get<double>();
      }
    }
    p.calls.push_back(std::move(s));
  }
  return p;
}

// One instance of a call (one of its repeats): its own tensors, and the bandwidth kernel's.
struct Instance {
  std::unique_ptr<Workload> dense;
  std::unique_ptr<SparseWorkload> sparse;
  std::unique_ptr<Workload> bw_own;  // when the bandwidth kernel cannot share the op's buffers
  ArgViews bw;
};

// A call resolved against the registry.
struct Call {
  const CallSpec* spec;
  Kernel* op;
  Kernel* bw;              // nullptr: no bandwidth kernel with this traffic in the registry
  int64_t elements;        // per call: n, or indices * cols for sparse ops
  double bytes, bw_bytes;  // per call
  std::vector<std::unique_ptr<Instance>> instances;
};

void own_buffers(const registry::Descriptor& bw, int64_t n, Instance& inst) {
  inst.bw_own = std::make_unique<Workload>(bw, n, std::map<std::string, double>{});
  inst.bw = ArgViews{inst.bw_own->tensors, inst.bw_own->scalars};
}

int64_t tensor_count(const registry::Descriptor& d) {
  return std::count_if(d.inputs.begin(), d.inputs.end(), [](const registry::Input& in) {
    return in.role != registry::Input::Role::scalar;
  });
}

// Resolves every call (variant, bandwidth kernel, shapes) before allocating anything.
std::vector<Call> resolve(Registry& reg, const ProfileSpec& p, const std::string& isa,
                          double& alloc_bytes) {
  std::vector<Call> calls;
  alloc_bytes = 0;
  for (const CallSpec& s : p.calls) {
    Call c{&s, nullptr, nullptr, 0, 0, 0, {}};
    try {
      c.op = &reg.select(s.op, s.attrs, isa);
    } catch (const Error& e) {
      fail(s.where, e.what());
    }
    const registry::Descriptor& d = c.op->descriptor();
    // The workload below is the optimizers' (dense or sparse); NN ops take shapes (bench).
    if (d.kind != "optimizer") {
      fail(s.where, s.op + " is " + (d.kind == "nn" ? "an NN op" : "a " + d.kind + " kernel") +
                        ": profile replays optimizer calls (time NN ops with `opforge bench " +
                        s.op + " --shape ...`)");
    }
    for (const auto& [name, v] : s.scalars) {
      const registry::Input* in = d.find_input(name);
      if (!in || in->role != registry::Input::Role::scalar) {
        std::vector<std::string> known;
        for (const auto& x : d.inputs) {
          if (x.role == registry::Input::Role::scalar) known.push_back(x.name);
        }
        fail(s.where, "scalar '" + name + "': " + s.op + " has no such scalar argument" +
                          did_you_mean(name, known));
      }
    }
    const int64_t max = d.shape.max_elements;
    if (d.shape.elementwise) {
      if (s.has_rows || s.has_cols || s.has_indices) {
        fail(s.where,
             s.op + " is a dense op: give 'n' (elements per tensor), not rows/cols/indices");
      }
      if (!s.has_n) fail(s.where, "missing 'n' (elements per tensor of " + s.op + ")");
      if (s.n > max && !c.op->splittable()) {
        fail(s.where, "'n' " + std::to_string(s.n) + " is over the kernels' " +
                          std::to_string(max) + " elements per call, and " + s.op +
                          " is not splittable (whole-tensor reductions)");
      }
      c.elements = s.n;
    } else {
      if (s.has_n) {
        fail(s.where,
             s.op + " is a sparse op: give 'rows', 'cols' and optionally 'indices', not 'n'");
      }
      if (!s.has_rows) {
        fail(s.where, "missing 'rows' (rows of the states of sparse op " + s.op + ")");
      }
      if (!s.has_cols) {
        fail(s.where, "missing 'cols' (columns of the states of sparse op " + s.op + ")");
      }
      const int64_t count = s.has_indices ? s.indices : s.rows;
      if (s.rows > max / s.cols || count > max / s.cols) {
        fail(s.where, "rows x cols and indices x cols must be at most " + std::to_string(max));
      }
      c.elements = count * s.cols;
    }
    c.bytes = static_cast<double>(c.elements) * bytes_per_element(d);
    c.bw = bandwidth_kernel(reg, d);
    double per_instance = 0;
    if (d.shape.elementwise) {
      per_instance = static_cast<double>(tensor_count(d)) * s.n * 4;
    } else {
      const int64_t count = s.has_indices ? s.indices : s.rows;
      for (const auto& in : d.inputs) {
        if (in.role == registry::Input::Role::state) per_instance += 4.0 * s.rows * s.cols;
        if (in.role == registry::Input::Role::gradient ||
            in.role == registry::Input::Role::tensor) {
          per_instance += in.name == d.shape.indices ? 12.0 * count : 4.0 * count * s.cols;
        }
      }
      if (c.bw) per_instance += 4.0 * tensor_count(c.bw->descriptor()) * c.elements;
    }
    if (c.bw) c.bw_bytes = static_cast<double>(c.elements) * bytes_per_element(c.bw->descriptor());
    alloc_bytes += per_instance * static_cast<double>(s.repeat);
    calls.push_back(std::move(c));
  }
  return calls;
}

void allocate(Call& c) {
  const CallSpec& s = *c.spec;
  const registry::Descriptor& d = c.op->descriptor();
  for (int64_t r = 0; r < s.repeat; ++r) {
    auto inst = std::make_unique<Instance>();
    if (d.shape.elementwise) {
      inst->dense = std::make_unique<Workload>(d, s.n, s.scalars);
      if (c.bw && !share_buffers(c.bw->descriptor(), *inst->dense, d, inst->bw)) {
        inst->bw = ArgViews{};
        own_buffers(c.bw->descriptor(), s.n, *inst);
      }
    } else {
      const int64_t count = s.has_indices ? s.indices : s.rows;
      inst->sparse = std::make_unique<SparseWorkload>(d, s.rows, s.cols, count, s.scalars);
      if (c.bw) own_buffers(c.bw->descriptor(), c.elements, *inst);
    }
    c.instances.push_back(std::move(inst));
  }
}

// Per-call seconds of one step (every instance of the call, summed).
void op_step(std::vector<Call>& calls, std::vector<double>& t) {
  for (size_t i = 0; i < calls.size(); ++i) {
    double sum = 0;
    for (auto& inst : calls[i].instances) {
      sum += inst->dense ? time_call(*calls[i].op, *inst->dense)
                         : time_call(*calls[i].op, *inst->sparse);
    }
    t[i] = sum;
  }
}

void bw_step(std::vector<Call>& calls, std::vector<double>& t) {
  for (size_t i = 0; i < calls.size(); ++i) {
    double sum = 0;
    if (calls[i].bw) {
      for (auto& inst : calls[i].instances) sum += time_call(*calls[i].bw, inst->bw);
    }
    t[i] = sum;
  }
}

// One row of the summary: a set of calls (all calls of an op, or one call). Times add up: a
// row's time is the sum of its calls' medians (each the median across steps of that call's
// time per step, all its repeats included), so rows sum to the step.
ojson summarize(const std::vector<Call>& calls, const std::vector<size_t>& members,
                const std::vector<double>& med_op, const std::vector<double>& med_bw,
                double step_s) {
  int64_t count = 0, elements = 0;
  double bytes = 0, bw_bytes = 0, op_s = 0, bw_s = 0;
  bool all_bw = true;
  for (size_t i : members) {
    const Call& c = calls[i];
    count += c.spec->repeat;
    elements += c.elements * c.spec->repeat;
    bytes += c.bytes * static_cast<double>(c.spec->repeat);
    bw_bytes += c.bw_bytes * static_cast<double>(c.spec->repeat);
    op_s += med_op[i];
    bw_s += med_bw[i];
    all_bw = all_bw && c.bw;
  }
  const double m_op = std::max(1e-12, op_s), m_bw = std::max(1e-12, bw_s);
  ojson r = {{"calls", count},
             {"elements", elements},
             {"us", m_op * 1e6},
             {"pct_of_step", 100.0 * m_op / step_s},
             {"avg_us", m_op * 1e6 / static_cast<double>(count)},
             {"bytes", bytes},
             {"gbps", bytes / m_op / 1e9},
             {"bandwidth_us", nullptr},
             {"bandwidth_gbps", nullptr},
             {"pct_of_bandwidth", nullptr}};
  if (all_bw) {
    r["bandwidth_us"] = m_bw * 1e6;
    r["bandwidth_gbps"] = bw_bytes / m_bw / 1e9;
    r["pct_of_bandwidth"] = 100.0 * (bytes / m_op) / (bw_bytes / m_bw);
  }
  return r;
}

void sort_rows(ojson& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const ojson& a, const ojson& b) {
    return a["us"].get<double>() > b["us"].get<double>();
  });
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string opt_fmt(const char* f, const ojson& v) {
  return v.is_null() ? "-" : fmt(f, v.get<double>());
}

std::string shape_text(const ojson& c) {
  if (c.contains("n")) return std::to_string(c["n"].get<int64_t>());
  return std::to_string(c["rows"].get<int64_t>()) + "x" + std::to_string(c["cols"].get<int64_t>()) +
         " @" + std::to_string(c["indices"].get<int64_t>());
}

// Left-aligned text columns first, then right-aligned numbers, widths from the content.
void print_table(const std::vector<std::string>& head, size_t text_cols,
                 const std::vector<std::vector<std::string>>& rows, size_t total_from) {
  std::vector<size_t> w(head.size());
  for (size_t k = 0; k < head.size(); ++k) {
    w[k] = head[k].size();
    for (const auto& r : rows) w[k] = std::max(w[k], r[k].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t k = 0; k < r.size(); ++k) {
      const std::string pad(w[k] - r[k].size(), ' ');
      s += (k ? "  " : "") + (k < text_cols ? r[k] + pad : pad + r[k]);
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::printf("%s\n", s.c_str());
  };
  line(head);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == total_from) {
      size_t len = 0;
      for (size_t x : w) len += x + 2;
      std::printf("%s\n", std::string(len - 2, '-').c_str());
    }
    line(rows[i]);
  }
}

void print_text(const ojson& j, bool by_call) {
  const ojson& t = j["total"];
  std::printf("%s  (%s)\n", j["name"].get<std::string>().c_str(),
              j["file"].get<std::string>().c_str());
  std::string isas;
  for (const auto& i : j["isa"]) isas += (isas.empty() ? "" : "+") + i.get<std::string>();
  std::printf(
      "%lld kernel calls/step, %.4g M elements, %.3g GB moved/step; %s, %d threads; medians of "
      "%lld steps after 1 warm-up, op and bandwidth-kernel steps interleaved\n\n",
      t["calls"].get<long long>(), t["elements"].get<double>() / 1e6,
      t["bytes"].get<double>() / 1e9, isas.c_str(), j["threads"].get<int>(),
      j["steps"].get<long long>());
  std::vector<std::string> head = {"op",          "calls", "total us", "% step",
                                   "avg us/call", "GB/s",  "bw GB/s",  "% of bw"};
  size_t text_cols = 1;
  if (by_call) {
    head.insert(head.begin(), "label");
    head.insert(head.begin() + 2, "shape");
    text_cols = 3;
  }
  std::vector<std::vector<std::string>> rows;
  auto numbers = [](const ojson& r) {
    return std::vector<std::string>{
        std::to_string(r["calls"].get<int64_t>()),   fmt("%.1f", r["us"].get<double>()),
        fmt("%.1f", r["pct_of_step"].get<double>()), fmt("%.2f", r["avg_us"].get<double>()),
        fmt("%.2f", r["gbps"].get<double>()),        opt_fmt("%.2f", r["bandwidth_gbps"]),
        opt_fmt("%.1f", r["pct_of_bandwidth"])};
  };
  for (const auto& r : j[by_call ? "calls" : "ops"]) {
    std::vector<std::string> row =
        by_call ? std::vector<std::string>{r["label"].get<std::string>(),
                                           r["op"].get<std::string>(), shape_text(r)}
                : std::vector<std::string>{r["op"].get<std::string>()};
    for (auto& x : numbers(r)) row.push_back(x);
    rows.push_back(row);
  }
  std::vector<std::string> total = {"step"};
  if (by_call) total.insert(total.end(), {"", ""});
  for (auto& x : numbers(t)) total.push_back(x);
  total[text_cols + 3] = "";  // avg us/call means nothing over different ops
  const size_t total_from = rows.size();
  rows.push_back(total);
  print_table(head, text_cols, rows, total_from);
  bool partial = false;
  for (const auto& r : j["calls"]) partial = partial || r["pct_of_bandwidth"].is_null();
  if (partial) {
    std::printf(
        "\n(-: the registry has no bandwidth kernel with that op's traffic; the step's %% of "
        "bandwidth is left out)\n");
  }
}

}  // namespace

int cmd_profile(const Args& a) {
  const std::string file = a.positional.at(0);
  const int threads = static_cast<int>(a.get_int("threads", 2, 1, kMaxThreads));
  if (threads < 1) throw UsageError("--threads must be positive");
  if (a.has("steps") && a.get_int("steps", 1, 1, 100000000) < 1)
    throw UsageError("--steps must be positive");
  const ProfileSpec spec = read_profile(file);

  auto reg = Registry::open(registry_dir(a));
  double alloc_bytes = 0;
  std::vector<Call> calls = resolve(*reg, spec, a.get("isa"), alloc_bytes);
  const double phys = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  if (phys > 0 && alloc_bytes > 0.8 * phys) {
    throw Error(file + ": the step's tensors take " + fmt("%.3g", alloc_bytes / 1e9) +
                " GB, more than 80% of this machine's " + fmt("%.3g", phys / 1e9) + " GB");
  }
  for (Call& c : calls) allocate(c);

  reg->set_num_threads(threads);
  std::vector<double> t_op(calls.size()), t_bw(calls.size());
  op_step(calls, t_op);  // warm-up: wakes the pool, faults in code and data
  bw_step(calls, t_bw);
  // --steps, or until about 1 s of op time (at least 5 steps).
  const int64_t fixed = a.has("steps") ? a.get_int("steps", 5, 1, 100000000) : 0;
  std::vector<std::vector<double>> op_t, bw_t;
  double op_time = 0;
  while (fixed ? static_cast<int64_t>(op_t.size()) < fixed
               : op_t.size() < 5 || (op_time < 1.0 && op_t.size() < 100000)) {
    op_step(calls, t_op);
    bw_step(calls, t_bw);
    op_t.push_back(t_op);
    bw_t.push_back(t_bw);
    for (double x : t_op) op_time += x;
  }
  const int64_t steps = static_cast<int64_t>(op_t.size());

  std::vector<double> med_op(calls.size()), med_bw(calls.size()), column, step_totals(steps, 0.0);
  for (size_t i = 0; i < calls.size(); ++i) {
    column.clear();
    for (const auto& s : op_t) column.push_back(s[i]);
    med_op[i] = median(column);
    column.clear();
    for (const auto& s : bw_t) column.push_back(s[i]);
    med_bw[i] = median(column);
    for (int64_t k = 0; k < steps; ++k) step_totals[k] += op_t[k][i];
  }
  double step_s = 0;
  for (double x : med_op) step_s += x;
  step_s = std::max(1e-12, step_s);

  std::vector<size_t> everything(calls.size());
  std::map<std::string, std::vector<size_t>> by_op;
  ojson call_rows = ojson::array(), op_rows = ojson::array();
  std::set<std::string> isas;
  for (size_t i = 0; i < calls.size(); ++i) {
    everything[i] = i;
    const Call& c = calls[i];
    const registry::Descriptor& d = c.op->descriptor();
    by_op[d.op].push_back(i);
    isas.insert(d.target.isa);
    ojson r = {{"index", c.spec->index},
               {"label", c.spec->label},
               {"op", d.op},
               {"variant", d.variant},
               {"repeat", c.spec->repeat}};
    if (d.shape.elementwise) {
      r["n"] = c.spec->n;
    } else {
      r["rows"] = c.spec->rows;
      r["cols"] = c.spec->cols;
      r["indices"] = c.spec->has_indices ? c.spec->indices : c.spec->rows;
    }
    r["bandwidth_kernel"] = c.bw ? ojson(c.bw->descriptor().variant) : ojson(nullptr);
    r.update(summarize(calls, {i}, med_op, med_bw, step_s));
    call_rows.push_back(r);
  }
  for (const auto& [op, members] : by_op) {
    std::set<std::string> variants;
    for (size_t i : members) variants.insert(calls[i].op->descriptor().variant);
    ojson r = {{"op", op}, {"variants", variants}};
    r.update(summarize(calls, members, med_op, med_bw, step_s));
    op_rows.push_back(r);
  }
  sort_rows(op_rows);
  sort_rows(call_rows);
  ojson total = summarize(calls, everything, med_op, med_bw, step_s);
  total["median_step_us"] = median(step_totals) * 1e6;  // whole steps, for comparison
  const ojson out = {{"name", spec.name},
                     {"host", ojson::parse(host_json().dump())},
                     {"file", file},
                     {"registry", reg->dir()},
                     {"isa", isas},
                     {"threads", threads},
                     {"steps", steps},
                     {"warmup_steps", 1},
                     {"alloc_bytes", alloc_bytes},
                     {"ops", op_rows},
                     {"calls", call_rows},
                     {"total", total}};
  if (a.has("json")) {
    std::cout << out.dump(2) << "\n";
  } else {
    print_text(out, a.has("by-call"));
  }
  return 0;
}

Command profile_command() {
  return {{"profile",
           "FILE.json",
           "Time a step of op calls (a JSON list of ops and shapes): per-op time, GB/s and % of "
           "the same-traffic bandwidth kernel, sorted",
           {registry_option(),
            isa_option(),
            {"steps", "K", "timed steps (default: about 1 s of op time, at least 5)"},
            {"threads", "N", "Halide thread pool size (default 2)"},
            {"by-call", "", "one row per call (label) instead of per op"},
            json_option()}},
          cmd_profile};
}

}  // namespace opforge::cli
