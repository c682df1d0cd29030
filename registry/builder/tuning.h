// Machine tuning files (`opforge tune` writes them, `opforge build` applies them): the
// elementwise recipe's params (dsl/elementwise_schedule.h) measured best on one machine, per
// op family and ISA. A family is the ops that move the same kinds of tensors per element
// (generators::tuning_family_name: "s3_g1" for fp32 Adam, RMSProp, AdaMax; "s3_g1_q8" for
// 8-bit-state Adam). A file is keyed by a fingerprint of the machine (CPU model,
// the ISAs it runs, logical CPUs, cache sizes) and lives beside the registry, in
// <registry>/tuning/<fingerprint>.json; a machine without one builds with the defaults.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace opforge::builder {

// What a tuning is valid for. Read from /proc/cpuinfo, sysconf and CPUID (never the
// $OPFORGE_CPU_FEATURES mask: the file describes the real machine).
struct Machine {
  std::string cpu_model;          // "AMD EPYC (family 26 model 2)"
  std::vector<std::string> isas;  // the kernel ISAs (generators::isas()) this CPU runs
  int logical_cpus = 0;
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // 0 where sysconf does not say

  // "cpu=...;isas=avx2,avx512;cpus=2;l1d=49152;l2=1048576;l3=33554432": what is hashed.
  std::string canonical() const;
  // 16 hex digits of the SHA-256 of canonical(): the tuning file's name.
  std::string fingerprint() const;
};

Machine this_machine();

// One size bucket's same-run timing that chose the params (medians, microseconds).
struct TunedBucket {
  std::string variant;  // the family member timed
  int64_t n = 0;
  std::string regime;  // "awake" or "idle" (opforge bench --regime)
  int threads = 0;     // the kernels' thread count (files before it: the file's `threads`)
  double default_us = 0, tuned_us = 0, bandwidth_us = 0;
};

// The params of one family on one ISA, and the evidence.
struct TunedFamily {
  std::map<std::string, int64_t> params;  // only those that differ from the defaults
  // The members timed: the slowest and the fastest against their bandwidth kernels (the
  // params must suit both: a thread-pool dispatch that pays for FTRL's pow costs Adam 2x).
  std::vector<std::string> measured_variants;
  std::vector<TunedBucket> buckets;
};

struct Tuning {
  Machine machine;
  std::string created;  // UTC, ISO 8601
  int threads = 0;      // the largest thread count it was timed at (each bucket names its own)
  // family -> ISA -> params
  std::map<std::string, std::map<std::string, TunedFamily>> families;

  // The params for `family` on `isa`, or nullptr when the file has none.
  const TunedFamily* find(const std::string& family, const std::string& isa) const;
};

// Format "opforge-tuning/1". Throws std::runtime_error naming `origin` and the field.
Tuning parse_tuning(const std::string& text, const std::string& origin);
std::string tuning_json(const Tuning& t);

// <registry_dir>/tuning/<fingerprint>.json
std::string tuning_path(const std::string& registry_dir, const Machine& m);

// Reads a tuning file and checks it was made on this machine (std::runtime_error naming the
// file and both fingerprints otherwise). Applies the param ranges of the recipe on read:
// a value out of range is an error naming the family, ISA and param.
Tuning read_tuning(const std::string& path, const Machine& here);
// The registry's tuning file for this machine, when there is one.
std::optional<Tuning> find_tuning(const std::string& registry_dir, const Machine& here);
// Temp file and rename: a reader never sees half a file.
void write_tuning(const std::string& path, const Tuning& t);

}  // namespace opforge::builder
