// Machine tuning files: the fingerprint, the file format's checks, and what a tuning does to
// the plan (only its families' variants on its ISAs change params, key and descriptor).
#include <doctest/doctest.h>

#include <filesystem>
#include <map>

#include "builder_test_util.h"
#include "generators/ops.h"
#include "opforge/descriptor.h"
#include "registry/builder/registry_builder.h"
#include "registry/builder/tuning.h"

namespace opforge::builder {
namespace {

const HalideIdentity kHalide{"/usr/lib/libHalide.so", "14.0.0", std::string(64, 'a')};

Machine sample_machine() {
  Machine m;
  m.cpu_model = "AMD EPYC (family 25 model 1)";
  m.isas = {"avx2"};
  m.logical_cpus = 2;
  m.l1d_bytes = 32768;
  m.l2_bytes = 524288;
  m.l3_bytes = 33554432;
  return m;
}

Tuning sample_tuning() {
  Tuning t;
  t.machine = sample_machine();
  t.created = "2026-12-03T11:00:00Z";
  t.threads = 2;
  TunedFamily f;
  f.params = {{"tasks", 2}, {"serial_below", 65536}, {"tasks@316228", 4}};
  f.measured_variants = {"apply_ftrl__multiply_linear_by_lr_1__f32__avx2"};
  f.buckets = {
      {"apply_ftrl__multiply_linear_by_lr_1__f32__avx2", 10000, "idle", 1, 12.5, 10.0, 3.0}};
  t.families["s3_g1"]["avx2"] = f;
  return t;
}

// The text of a tuning with one edit applied to its JSON.
std::string edited(const std::string& from, const std::string& to) {
  std::string text = tuning_json(sample_tuning());
  const size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  return text.replace(at, from.size(), to);
}

TEST_CASE("machine fingerprint: canonical text, and any field changes it") {
  const Machine m = sample_machine();
  CHECK(m.canonical() ==
        "cpu=AMD EPYC (family 25 model 1);isas=avx2;cpus=2;l1d=32768;l2=524288;l3=33554432");
  CHECK(m.fingerprint().size() == 16);
  CHECK(m.fingerprint() == sample_machine().fingerprint());
  std::vector<Machine> others(6, m);
  others[0].cpu_model = "AMD EPYC (family 26 model 2)";
  others[1].isas = {"avx2", "avx512"};
  others[2].logical_cpus = 4;
  others[3].l1d_bytes = 49152;
  others[4].l2_bytes = 1048576;
  others[5].l3_bytes = 0;
  for (const auto& o : others) CHECK(o.fingerprint() != m.fingerprint());
  // This host: a model name and at least the baseline ISA of every x86-64 CI machine.
  const Machine here = this_machine();
  CHECK(!here.cpu_model.empty());
  CHECK(here.logical_cpus >= 1);
  CHECK(std::count(here.isas.begin(), here.isas.end(), "avx2") == 1);
}

TEST_CASE("tuning file: round trip, and each malformed part named") {
  const Tuning t = sample_tuning();
  const Tuning back = parse_tuning(tuning_json(t), "t.json");
  CHECK(back.machine.canonical() == t.machine.canonical());
  CHECK(back.created == t.created);
  CHECK(back.threads == 2);
  const TunedFamily* f = back.find("s3_g1", "avx2");
  REQUIRE(f);
  CHECK(f->params == t.families.at("s3_g1").at("avx2").params);
  CHECK(f->measured_variants == t.families.at("s3_g1").at("avx2").measured_variants);
  REQUIRE(f->buckets.size() == 1);
  CHECK(f->buckets[0].variant == "apply_ftrl__multiply_linear_by_lr_1__f32__avx2");
  CHECK(f->buckets[0].regime == "idle");
  CHECK(f->buckets[0].threads == 1);
  CHECK(f->buckets[0].tuned_us == 10.0);
  CHECK(back.find("s3_g1", "avx512") == nullptr);
  // Files written before buckets named their thread count: the file's count.
  const Tuning old = parse_tuning(edited("\"threads\": 1,", ""), "t.json");
  CHECK(old.find("s3_g1", "avx2")->buckets.at(0).threads == 2);
  CHECK(back.find("s2_g1", "avx2") == nullptr);

  auto fails = [](const std::string& text, const std::string& what) {
    CAPTURE(what);
    CHECK_THROWS_WITH_AS(parse_tuning(text, "t.json"),
                         doctest::Contains(("t.json: " + what).c_str()), std::runtime_error);
  };
  fails("{", "(file): not JSON");
  fails(edited("opforge-tuning/1", "opforge-tuning/9"), "format");
  fails(edited("\"logical_cpus\": 2", "\"logical_cpus\": 3"), "fingerprint: does not match");
  fails(edited("\"tasks\": 2", "\"tasks\": 0"),
        "families.s3_g1.avx2.params.tasks: 0 is outside [1, 1024]");
  fails(edited("\"tasks\": 2", "\"tiles\": 2"),
        "families.s3_g1.avx2.params: unknown schedule param 'tiles'");
  fails(edited("\"tasks\": 2", "\"tasks\": \"2\""), "families.s3_g1.avx2.params.tasks");
  fails(edited("\"tasks@316228\": 4", "\"tasks@316228\": 4096"),
        "families.s3_g1.avx2.params.tasks@316228: 4096 is outside [1, 1024]");
  fails(edited("\"tasks@316228\": 4", "\"divide@316228\": 1"),
        "families.s3_g1.avx2.params.divide@316228: schedule param 'divide@316228': only vector");
  fails(edited("\"tasks@316228\": 4", "\"tasks@3e5\": 4"),
        "families.s3_g1.avx2.params.tasks@3e5: schedule param 'tasks@3e5': the bucket's N");
  fails(edited("\"regime\": \"idle\",", ""), "families.s3_g1.avx2.buckets: missing field 'regime'");
  fails(edited("\"threads\": 1,", "\"threads\": 0,"),
        "families.s3_g1.avx2.buckets.threads: expected a count >= 1");
}

TEST_CASE("tuning file: another machine's is refused naming both, a missing one is none") {
  testing::TempDir tmp;
  const std::string dir = tmp.path.string(), path = dir + "/tuning/x.json";
  write_tuning(path, sample_tuning());
  Machine here = sample_machine();
  CHECK(read_tuning(path, here).families.size() == 1);
  here.logical_cpus = 8;
  CHECK_THROWS_WITH_AS(
      read_tuning(path, here),
      doctest::Contains(("tuned on another machine (" + sample_machine().fingerprint()).c_str()),
      std::runtime_error);
  CHECK_THROWS_WITH_AS(read_tuning(path, here), doctest::Contains(here.fingerprint().c_str()),
                       std::runtime_error);
  CHECK_FALSE(find_tuning(dir, here).has_value());  // no <fingerprint>.json there
  write_tuning(tuning_path(dir, sample_machine()), sample_tuning());
  CHECK(find_tuning(dir, sample_machine()).has_value());
}

TEST_CASE("tuning families: what the elementwise recipe schedules, by what it moves") {
  std::map<std::string, std::string> family;  // variant -> family
  for (const auto& row : generators::op_table()) {
    const dsl::ResolvedOp op = row.resolve();
    family[op.variant_id("avx2")] = tuning_family(op);
  }
  CHECK(family.at("apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx2") == "s3_g1");
  CHECK(family.at("apply_adam__use_nesterov_0__epsilon_mode_tf__q8s__avx2") == "s3_g1_q8");
  CHECK(family.at("apply_adam__use_nesterov_0__epsilon_mode_tf__bf16m__avx2") == "s3_g1_narrow");
  CHECK(family.at("apply_gradient_descent__f32__avx2") == "s1_g1");
  CHECK(family.at("apply_momentum__use_nesterov_0__f32__avx2") == "s2_g1");
  for (const auto& [id, f] : family) {
    CAPTURE(id);
    if (id.rfind("sparse_", 0) == 0 || id.rfind("bandwidth_", 0) == 0 ||
        id.rfind("multi_tensor_", 0) == 0) {
      CHECK(f.empty());
    }
  }
}

TEST_CASE("plan with a tuning: its family's variants on its ISA only, a new key, the descriptor") {
  const Tuning t = sample_tuning();
  const std::vector<std::string> only = {"apply_adam"};
  const auto plain = plan_variants(generators::op_table(), only, kHalide);
  const auto tuned = plan_variants(generators::op_table(), only, kHalide, &t);
  REQUIRE(plain.size() == tuned.size());
  int changed = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const PlannedVariant &a = plain[i], &b = tuned[i];
    CAPTURE(b.id);
    REQUIRE(a.id == b.id);
    const bool in_family = tuning_family(b.op) == "s3_g1" && b.isa.name == "avx2";
    const registry::Descriptor d = make_descriptor(b, kHalide.version);
    if (in_family) {
      ++changed;
      CHECK(b.pipeline.schedule_params.at("tasks") == 2);
      CHECK(b.pipeline.schedule_params.at("serial_below") == 65536);
      CHECK(b.pipeline.schedule_params.at("tasks@316228") == 4);  // a size bucket
      CHECK(d.schedule.params.at("tasks@316228") == "4");
      CHECK(d.schedule.summary.find("N >= 316228: tasks 4") != std::string::npos);
      CHECK(a.pipeline.schedule_params.at("tasks") == 8);  // the recipe default
      CHECK(a.key.hex_digest() != b.key.hex_digest());
      CHECK(d.schedule.tuning_machine == t.machine.fingerprint());
      CHECK(d.schedule.tuning_family == "s3_g1");
      const registry::Descriptor back = registry::descriptor_from_json(to_json(d), b.id);
      CHECK(back.schedule.tuning_machine == d.schedule.tuning_machine);
      CHECK(back.schedule.tuning_family == "s3_g1");
    } else {
      CHECK(a.pipeline.schedule_params == b.pipeline.schedule_params);
      CHECK(a.key.hex_digest() == b.key.hex_digest());
      CHECK(d.schedule.tuning_machine.empty());
      CHECK(to_json(d).find("\"tuning\"") == std::string::npos);
    }
  }
  CHECK(changed >= 2);  // plain and nesterov Adam at least
}

}  // namespace
}  // namespace opforge::builder
