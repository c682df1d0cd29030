#include "runtime/call_dump.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "opforge/npy.hpp"
#include "registry/format/atomic_write.h"

namespace opforge {

namespace fs = std::filesystem;

namespace {

struct DumpState {
  std::mutex mu;  // guards dir and next
  std::string dir;
  int64_t next = 0;
  std::atomic<bool> on{false};
};

// The entries' numbers in `dir` ("000012-..."): the next call continues after the largest.
int64_t next_index(const std::string& dir) {
  int64_t next = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 7 || name[6] != '-') continue;
    const std::string digits = name.substr(0, 6);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    next = std::max<int64_t>(next, std::stoll(digits) + 1);
  }
  return next;
}

void set_dir_locked(DumpState& s, const std::string& dir) {
  if (dir.empty()) {
    s.on = false;
    s.dir.clear();
    return;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw Error("dump directory '" + dir + "': cannot create it" +
                (ec ? ": " + ec.message() : std::string()));
  s.dir = dir;
  s.next = next_index(dir);
  s.on = true;
}

DumpState& state() {
  static DumpState* s = [] {
    auto* st = new DumpState;  // never destroyed: calls may run during exit
    if (const char* env = std::getenv("OPFORGE_DUMP_DIR"); env && *env) set_dir_locked(*st, env);
    return st;
  }();
  return *s;
}

// .npy descr for a dtype's raw elements (bf16 and FP8 as their bits).
const char* descr_of(registry::DType t) {
  using registry::DType;
  switch (t) {
    case DType::f16:
      return "<f2";
    case DType::bf16:
      return "<u2";
    case DType::f32:
      return "<f4";
    case DType::f64:
      return "<f8";
    case DType::i32:
      return "<i4";
    case DType::i64:
      return "<i8";
    case DType::b8:
      return "|b1";
    case DType::u8:
    case DType::f8e4m3:
    case DType::f8e5m2:
      return "|u1";
  }
  return "|u1";
}

std::string utc_now() {
  char b[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

}  // namespace

void set_dump_dir(const std::string& dir) {
  DumpState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  set_dir_locked(s, dir);
}

std::string dump_dir() {
  DumpState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.on ? s.dir : std::string();
}

namespace dump {

namespace {

nlohmann::ordered_json write_tensor(const fs::path& dir, const std::string& file,
                                    const std::string& name, const TensorView& t) {
  npy::Array a;
  a.descr = descr_of(t.dtype);
  a.shape.assign(t.shape, t.shape + t.rank);
  const auto* p = static_cast<const uint8_t*>(t.data);
  a.data.assign(p, p + a.elements() * a.item_size());
  try {
    npy::write_atomic((dir / file).string(), a);
  } catch (const std::exception& e) {
    throw Error(std::string("dump: ") + e.what());
  }
  return {
      {"name", name}, {"file", file}, {"dtype", registry::dtype_name(t.dtype)}, {"shape", a.shape}};
}

}  // namespace

bool on() {
  return state().on.load(std::memory_order_relaxed);
}

std::unique_ptr<CallRecord> begin(const registry::Descriptor& d,
                                  const std::vector<const registry::Input*>& tensor_slots,
                                  size_t n_in, const TensorView* const* t_at,
                                  const std::vector<const registry::Input*>& scalar_slots,
                                  const double* s_at) {
  DumpState& s = state();
  if (!s.on.load(std::memory_order_relaxed)) return nullptr;
  auto r = std::make_unique<CallRecord>();
  int64_t index;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.on) return nullptr;
    index = s.next++;
    char num[16];
    std::snprintf(num, sizeof num, "%06lld-", static_cast<long long>(index));
    r->dir = fs::path(s.dir) / (num + d.variant);
  }
  std::error_code ec;
  fs::create_directories(r->dir, ec);
  if (ec) throw Error("dump: cannot create " + r->dir.string() + ": " + ec.message());
  r->d = &d;
  r->call["format"] = "opforge-dump/1";
  r->call["index"] = index;
  r->call["op"] = d.op;
  r->call["variant"] = d.variant;
  r->call["started"] = utc_now();
  nlohmann::ordered_json scalars = nlohmann::ordered_json::object();
  for (size_t k = 0; k < scalar_slots.size(); ++k) scalars[scalar_slots[k]->name] = s_at[k];
  r->call["scalars"] = scalars;
  nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
  for (size_t k = 0; k < n_in; ++k) {
    if (!t_at[k]) continue;  // an optional tensor not given
    const std::string& name = tensor_slots[k]->name;
    inputs.push_back(write_tensor(r->dir, "in." + name + ".npy", name, *t_at[k]));
  }
  r->call["inputs"] = inputs;
  // Outputs: an in-place one is the state it aliases, an NN one its own slot.
  for (const auto& out : d.outputs) {
    const std::string& slot_name = out.aliases.empty() ? out.name : out.aliases;
    for (size_t k = 0; k < tensor_slots.size(); ++k) {
      if (tensor_slots[k]->name == slot_name && t_at[k]) {
        r->outputs.emplace_back(out.name, t_at[k]);
        break;
      }
    }
  }
  return r;
}

void finish(CallRecord& r) {
  nlohmann::ordered_json outputs = nlohmann::ordered_json::array();
  for (const auto& [name, view] : r.outputs)
    outputs.push_back(write_tensor(r.dir, "out." + name + ".npy", name, *view));
  r.call["outputs"] = outputs;
  r.call["descriptor"] = nlohmann::ordered_json::parse(registry::to_json(*r.d));
  try {
    registry::write_file_atomic((r.dir / "call.json").string(), r.call.dump(2) + "\n");
  } catch (const std::exception& e) {
    throw Error(std::string("dump: ") + e.what());
  }
}

}  // namespace dump
}  // namespace opforge
