#include "registry/builder/tuning.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "dsl/elementwise_schedule.h"
#include "generators/isa.h"
#include "registry/cache/atomic_file.h"
#include "registry/cache/compile_cache.h"

namespace opforge::builder {

namespace {

constexpr const char* kFormat = "opforge-tuning/1";

// "model name" with the family and model numbers: a VM may report a generic name.
std::string read_cpu_model() {
  std::string model = "unknown CPU", family, number;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon + 2 > line.size()) continue;
    const std::string value = line.substr(colon + 2), key = line.substr(0, line.find('\t'));
    if (key == "model name") model = value;
    if (key == "cpu family") family = value;
    if (key == "model") number = value;
    if (line.empty() || key == "flags") break;  // the first processor's block is enough
  }
  if (!family.empty() && !number.empty()) model += " (family " + family + " model " + number + ")";
  return model;
}

// glibc's sysconf reads the cache sizes from CPUID (sysfs has no cache/ in some VMs); 0 when
// it does not know.
int64_t cache_bytes(int name) {
  const long v = sysconf(name);
  return v > 0 ? v : 0;
}

bool cpu_has(const std::string& f) {
  __builtin_cpu_init();
  if (f == "sse4.1") return __builtin_cpu_supports("sse4.1");
  if (f == "avx") return __builtin_cpu_supports("avx");
  if (f == "avx2") return __builtin_cpu_supports("avx2");
  if (f == "fma") return __builtin_cpu_supports("fma");
  if (f == "f16c") return __builtin_cpu_supports("f16c");
  if (f == "avx512f") return __builtin_cpu_supports("avx512f");
  if (f == "avx512cd") return __builtin_cpu_supports("avx512cd");
  if (f == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (f == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (f == "avx512dq") return __builtin_cpu_supports("avx512dq");
  return false;  // a feature this list does not know: the ISA is not counted as runnable
}

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& origin, const std::string& where,
                       const std::string& what) {
  throw std::runtime_error(origin + ": " + where + ": " + what);
}

const json& field(const json& o, const std::string& key, const std::string& origin,
                  const std::string& where) {
  if (!o.is_object()) fail(origin, where, "expected an object");
  auto it = o.find(key);
  if (it == o.end()) fail(origin, where, "missing field '" + key + "'");
  return *it;
}

std::string str(const json& o, const std::string& key, const std::string& origin,
                const std::string& where) {
  const json& v = field(o, key, origin, where);
  if (!v.is_string()) fail(origin, where + "." + key, "expected a string");
  return v.get<std::string>();
}

int64_t integer(const json& o, const std::string& key, const std::string& origin,
                const std::string& where) {
  const json& v = field(o, key, origin, where);
  if (!v.is_number_integer()) fail(origin, where + "." + key, "expected an integer");
  return v.get<int64_t>();
}

double number(const json& o, const std::string& key, const std::string& origin,
              const std::string& where) {
  const json& v = field(o, key, origin, where);
  if (!v.is_number()) fail(origin, where + "." + key, "expected a number");
  return v.get<double>();
}

// A tuned param must be one the recipe declares, inside its range.
void check_param(const std::string& key, int64_t value, const std::string& origin,
                 const std::string& where) {
  std::string name = key;
  try {
    if (const auto bucket = dsl::ElementwiseSchedule::split_bucket_key(key)) name = bucket->first;
  } catch (const std::invalid_argument& e) {
    fail(origin, where + "." + key, e.what());
  }
  for (const auto& d : dsl::ElementwiseSchedule::params()) {
    if (d.name != name) continue;
    if (value < d.min || value > d.max) {
      fail(origin, where + "." + key,
           std::to_string(value) + " is outside [" + std::to_string(d.min) + ", " +
               std::to_string(d.max) + "]");
    }
    return;
  }
  fail(origin, where, "unknown schedule param '" + key + "'");
}

}  // namespace

std::string Machine::canonical() const {
  std::string isa_list;
  for (const auto& i : isas) isa_list += (isa_list.empty() ? "" : ",") + i;
  return "cpu=" + cpu_model + ";isas=" + isa_list + ";cpus=" + std::to_string(logical_cpus) +
         ";l1d=" + std::to_string(l1d_bytes) + ";l2=" + std::to_string(l2_bytes) +
         ";l3=" + std::to_string(l3_bytes);
}

std::string Machine::fingerprint() const {
  return cache::sha256_hex(canonical()).substr(0, 16);
}

Machine this_machine() {
  Machine m;
  m.cpu_model = read_cpu_model();
  for (const auto& isa : generators::isas()) {
    bool all = true;
    for (const auto& f : isa.cpu_features) all = all && cpu_has(f);
    if (all) m.isas.push_back(isa.name);
  }
  std::sort(m.isas.begin(), m.isas.end());
  m.logical_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  m.l1d_bytes = cache_bytes(_SC_LEVEL1_DCACHE_SIZE);
  m.l2_bytes = cache_bytes(_SC_LEVEL2_CACHE_SIZE);
  m.l3_bytes = cache_bytes(_SC_LEVEL3_CACHE_SIZE);
  return m;
}

const TunedFamily* Tuning::find(const std::string& family, const std::string& isa) const {
  auto f = families.find(family);
  if (f == families.end()) return nullptr;
  auto i = f->second.find(isa);
  return i == f->second.end() ? nullptr : &i->second;
}

std::string tuning_json(const Tuning& t) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["fingerprint"] = t.machine.fingerprint();
  j["machine"] = {{"cpu_model", t.machine.cpu_model},       {"isas", t.machine.isas},
                  {"logical_cpus", t.machine.logical_cpus}, {"l1d_bytes", t.machine.l1d_bytes},
                  {"l2_bytes", t.machine.l2_bytes},         {"l3_bytes", t.machine.l3_bytes}};
  j["created"] = t.created;
  j["threads"] = t.threads;
  j["families"] = nlohmann::ordered_json::object();
  for (const auto& [family, by_isa] : t.families) {
    for (const auto& [isa, f] : by_isa) {
      nlohmann::ordered_json e;
      e["params"] = nlohmann::ordered_json::object();
      for (const auto& [k, v] : f.params) e["params"][k] = v;
      e["measured_variants"] = f.measured_variants;
      e["buckets"] = nlohmann::ordered_json::array();
      for (const auto& b : f.buckets) {
        e["buckets"].push_back({{"variant", b.variant},
                                {"n", b.n},
                                {"regime", b.regime},
                                {"threads", b.threads},
                                {"default_us", b.default_us},
                                {"tuned_us", b.tuned_us},
                                {"bandwidth_us", b.bandwidth_us}});
      }
      j["families"][family][isa] = e;
    }
  }
  return j.dump(2) + "\n";
}

Tuning parse_tuning(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(origin, "(file)", std::string("not JSON: ") + e.what());
  }
  if (str(j, "format", origin, "(top)") != kFormat) {
    fail(origin, "format", "expected \"" + std::string(kFormat) + "\"");
  }
  Tuning t;
  const json& m = field(j, "machine", origin, "(top)");
  t.machine.cpu_model = str(m, "cpu_model", origin, "machine");
  const json& isas = field(m, "isas", origin, "machine");
  if (!isas.is_array()) fail(origin, "machine.isas", "expected an array of strings");
  for (const auto& i : isas) {
    if (!i.is_string()) fail(origin, "machine.isas", "expected an array of strings");
    t.machine.isas.push_back(i.get<std::string>());
  }
  t.machine.logical_cpus = static_cast<int>(integer(m, "logical_cpus", origin, "machine"));
  t.machine.l1d_bytes = integer(m, "l1d_bytes", origin, "machine");
  t.machine.l2_bytes = integer(m, "l2_bytes", origin, "machine");
  t.machine.l3_bytes = integer(m, "l3_bytes", origin, "machine");
  // The recorded fingerprint must be the machine's: a hand-edited machine block is caught.
  if (str(j, "fingerprint", origin, "(top)") != t.machine.fingerprint()) {
    fail(origin, "fingerprint", "does not match the machine block (edited by hand?)");
  }
  t.created = str(j, "created", origin, "(top)");
  t.threads = static_cast<int>(integer(j, "threads", origin, "(top)"));
  const json& fams = field(j, "families", origin, "(top)");
  if (!fams.is_object()) fail(origin, "families", "expected an object");
  for (const auto& [family, by_isa] : fams.items()) {
    if (!by_isa.is_object()) fail(origin, "families." + family, "expected an object");
    for (const auto& [isa, e] : by_isa.items()) {
      const std::string where = "families." + family + "." + isa;
      TunedFamily f;
      const json& params = field(e, "params", origin, where);
      if (!params.is_object()) fail(origin, where + ".params", "expected an object");
      for (const auto& [k, v] : params.items()) {
        if (!v.is_number_integer()) fail(origin, where + ".params." + k, "expected an integer");
        check_param(k, v.get<int64_t>(), origin, where + ".params");
        f.params[k] = v.get<int64_t>();
      }
      const json& measured = field(e, "measured_variants", origin, where);
      if (!measured.is_array()) fail(origin, where + ".measured_variants", "expected an array");
      for (const auto& v : measured) {
        if (!v.is_string()) fail(origin, where + ".measured_variants", "expected strings");
        f.measured_variants.push_back(v.get<std::string>());
      }
      const json& buckets = field(e, "buckets", origin, where);
      if (!buckets.is_array()) fail(origin, where + ".buckets", "expected an array");
      for (const auto& b : buckets) {
        const std::string bw = where + ".buckets";
        TunedBucket tb;
        tb.variant = str(b, "variant", origin, bw);
        tb.n = integer(b, "n", origin, bw);
        tb.regime = str(b, "regime", origin, bw);
        // Files written before per-bucket thread counts were timed at the file's count.
        tb.threads =
            b.contains("threads") ? static_cast<int>(integer(b, "threads", origin, bw)) : t.threads;
        if (tb.threads < 1) fail(origin, bw + ".threads", "expected a count >= 1");
        tb.default_us = number(b, "default_us", origin, bw);
        tb.tuned_us = number(b, "tuned_us", origin, bw);
        tb.bandwidth_us = number(b, "bandwidth_us", origin, bw);
        f.buckets.push_back(tb);
      }
      t.families[family][isa] = std::move(f);
    }
  }
  return t;
}

std::string tuning_path(const std::string& registry_dir, const Machine& m) {
  return registry_dir + "/tuning/" + m.fingerprint() + ".json";
}

Tuning read_tuning(const std::string& path, const Machine& here) {
  Tuning t = parse_tuning(cache::read_file(path), path);
  if (t.machine.fingerprint() != here.fingerprint()) {
    throw std::runtime_error(path + ": tuned on another machine (" + t.machine.fingerprint() +
                             ": " + t.machine.canonical() + "); this one is " + here.fingerprint() +
                             ": " + here.canonical() + " (run `opforge tune` here)");
  }
  return t;
}

std::optional<Tuning> find_tuning(const std::string& registry_dir, const Machine& here) {
  const std::string path = tuning_path(registry_dir, here);
  std::ifstream probe(path);
  if (!probe) return std::nullopt;
  return read_tuning(path, here);
}

void write_tuning(const std::string& path, const Tuning& t) {
  cache::write_file_atomic(path, tuning_json(t));
}

}  // namespace opforge::builder
