// Autoscheduled variants: the checked-in Adams2019 schedule files regenerate byte for byte
// (whatever HL_* the caller has set), are the ones compiled in, rewrite every unsafe tail,
// and their text is part of the variant's cache key.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "generators/auto_schedules.h"
#include "generators/ops.h"
#include "generators/pipeline_func.h"
#include "registry/builder/autoscheduler.h"
#include "registry/builder/kernel_compiler.h"
#include "registry/builder/registry_builder.h"

namespace opforge::builder {
namespace {

const HalideIdentity kHalide{"/usr/lib/libHalide.so", "14.0.0", std::string(64, 'a')};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in, path << ": cannot open (run `opforge autoschedule` and check it in)");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kSchedulesDir = std::string(OPFORGE_SOURCE_DIR) + "/generators/schedules";

TEST_CASE("regenerating every schedule file gives the checked-in bytes, compiled in as is") {
  const auto variants = autoscheduled_variants(generators::op_table());
  REQUIRE(variants.size() >= 4);
  // A caller's HL_* settings must not leak into the schedule.
  setenv("HL_BEAM_SIZE", "1", 1);
  setenv("HL_NUM_PASSES", "1", 1);
  setenv("HL_RANDOM_DROPOUT", "50", 1);
  setenv("HL_SEED", "12345", 1);
  for (const auto& v : variants) {
    CAPTURE(v.variant);
    const std::string text = generate_schedule_file(v);
    CHECK(text == slurp(schedule_file_path(kSchedulesDir, v.variant)));
    CHECK(generate_schedule_file(v) == text);  // twice in one process
    const generators::AutoSchedule* built_in = generators::find_auto_schedule(v.variant);
    REQUIRE_MESSAGE(built_in, "not compiled in: rebuild after `opforge autoschedule`");
    CHECK(built_in->source == text);
    // Every split tail is safe in place.
    CHECK(text.find("TailStrategy::ShiftInwards") == std::string::npos);
    CHECK(text.find("TailStrategy::RoundUp") == std::string::npos);
    // Funcs by name, never by their index in the pipeline.
    CHECK(text.find("get_func(") == std::string::npos);
    CHECK(text.find("pipeline_func(pipeline, \"updated\")") != std::string::npos);
    CHECK(text.find("apply_schedule_" + v.variant + "(") != std::string::npos);
    CHECK(text.find(generators::autoschedule_settings().machine_params_text()) !=
          std::string::npos);
  }
  for (const char* k : {"HL_BEAM_SIZE", "HL_NUM_PASSES", "HL_RANDOM_DROPOUT", "HL_SEED"}) {
    unsetenv(k);
  }
}

TEST_CASE("every compiled-in schedule belongs to an autoscheduled variant of the op table") {
  std::set<std::string> flagged;
  for (const auto& v : autoscheduled_variants(generators::op_table())) flagged.insert(v.variant);
  for (const auto& s : generators::auto_schedules()) {
    CAPTURE(s.variant);
    CHECK(flagged.count(s.variant));
    CHECK(generators::is_auto_variant_id(s.variant));
  }
  CHECK_THROWS_WITH_AS(autoscheduled_variants(generators::op_table(), {"apply_adagrad"}),
                       doctest::Contains("no autoscheduled variant"), std::runtime_error);
}

TEST_CASE("the CLI's view of the compiled-in schedules is the generators' own") {
  REQUIRE(!generators::auto_schedules().empty());
  for (const auto& s : generators::auto_schedules()) {
    CAPTURE(s.variant);
    const std::optional<std::string> source = compiled_schedule_source(s.variant);
    REQUIRE(source.has_value());
    CHECK(*source == s.source);
  }
  CHECK_FALSE(compiled_schedule_source("apply_adam__f32__avx2").has_value());
  CHECK_FALSE(compiled_schedule_source("no_such__auto").has_value());
  CHECK(auto_variant_id("apply_adam__f32__avx2") ==
        generators::auto_variant_id("apply_adam__f32__avx2"));
  // What `opforge autoschedule` prints first: every pinned setting.
  const auto& settings = generators::autoschedule_settings();
  const std::string text = autoschedule_settings_text();
  CHECK(text.rfind(settings.autoscheduler + " (" + settings.plugin + ")", 0) == 0);
  CHECK(text.find("machine params " + settings.machine_params_text()) != std::string::npos);
  CHECK(text.find(settings.env_text()) != std::string::npos);
}

TEST_CASE("guard_tails rewrites ShiftInwards and RoundUp to GuardWithIf, and counts them") {
  TailRewrites n;
  const std::string out = guard_tails(
      "updated\n"
      "    .split(i, i, ii, 8, TailStrategy::ShiftInwards)\n"
      "    .split(ii, ii, iii, 4, TailStrategy::RoundUp)\n"
      "    .vectorize(iii);\n"
      "other\n"
      "    .split(j, j, ji, 2, TailStrategy::GuardWithIf)\n"
      "    .split(k, k, ki, 2, TailStrategy::ShiftInwards);\n",
      &n);
  CHECK(n.shift_inwards == 2);
  CHECK(n.round_up == 1);
  CHECK(out ==
        "updated\n"
        "    .split(i, i, ii, 8, TailStrategy::GuardWithIf)\n"
        "    .split(ii, ii, iii, 4, TailStrategy::GuardWithIf)\n"
        "    .vectorize(iii);\n"
        "other\n"
        "    .split(j, j, ji, 2, TailStrategy::GuardWithIf)\n"
        "    .split(k, k, ki, 2, TailStrategy::GuardWithIf);\n");
}

// The same rewrite on the Funcs' own schedules (a rule twin's, scheduled in process): every
// split of every stage, updates included; renames and fusions are no splits.
TEST_CASE("guard_split_tails guards every split tail of every stage, and counts them") {
  using Halide::TailStrategy;
  Halide::Func producer("producer"), f("f");
  Halide::Var x("x"), xo("xo"), xi("xi"), xio("xio"), xii("xii"), y("y"), yo("yo"), yi("yi"),
      z("z"), zo("zo"), zi("zi");
  producer(x) = x * 2;
  f(x) = producer(x) + 1;
  f(x) += 1;
  producer.compute_root().split(x, xo, xi, 8, TailStrategy::GuardWithIf);
  f.split(x, xo, xi, 16, TailStrategy::ShiftInwards).split(xi, xio, xii, 4);  // Auto: ShiftInwards
  f.update()
      .split(x, y, yi, 8, TailStrategy::RoundUp)
      .split(yi, yo, z, 2, TailStrategy::GuardWithIf)
      .rename(z, zo);
  const TailRewrites n = guard_split_tails(Halide::Pipeline(f));
  // Halide 14 resolves Auto in split() itself (a pure definition's to ShiftInwards).
  CHECK(n.shift_inwards == 2);
  CHECK(n.round_up == 1);
  CHECK(n.automatic == 0);
  int splits = 0;
  for (const Halide::Internal::Function& fn : {f.function(), producer.function()}) {
    std::vector<Halide::Internal::Definition> stages = {fn.definition()};
    for (const auto& u : fn.updates()) stages.push_back(u);
    for (const auto& d : stages) {
      for (const auto& sp : d.schedule().splits()) {
        if (!sp.is_split()) continue;
        ++splits;
        CHECK(sp.tail == TailStrategy::GuardWithIf);
      }
    }
  }
  CHECK(splits == 5);
  const TailRewrites again = guard_split_tails(Halide::Pipeline(f));
  CHECK(again.shift_inwards + again.round_up + again.automatic == 0);
  (void)zi;
}

// A rule's twin runs Adams2019 in process (autoschedule_in_place). For the op table's
// autoscheduled variants that gives what their checked-in schedule files give: the same loop
// nest, and as many tails rewritten as each file's header says.
TEST_CASE("autoschedule_in_place schedules as the checked-in files do, every tail guarded") {
  const auto variants = autoscheduled_variants(generators::op_table());
  REQUIRE(variants.size() >= 4);
  auto loop_nest = [](Halide::Pipeline p) {
    return with_cerr_captured([&] { p.print_loop_nest(); });
  };
  for (const auto& v : variants) {
    CAPTURE(v.variant);
    const Halide::Target t =
        Halide::Target(v.isa.halide_target).with_feature(Halide::Target::NoRuntime);
    dsl::KernelPipeline mine = dsl::build_pipeline(v.op, {}, t, /*scheduled=*/false);
    const std::string unscheduled = loop_nest(mine.pipeline);
    const TailRewrites n = autoschedule_in_place(mine.pipeline, t);
    const std::string nest = loop_nest(mine.pipeline);
    CHECK(nest != unscheduled);
    CHECK(nest.find("parallel") != std::string::npos);
    CHECK(nest.find("vectorized") != std::string::npos);
    CHECK(nest == loop_nest(generators::auto_scheduled_pipeline(v.op, t, v.variant).pipeline));
    const std::string file = slurp(schedule_file_path(kSchedulesDir, v.variant));
    const std::string said = "// opforge rewrote " + std::to_string(n.shift_inwards) +
                             " ShiftInwards and " + std::to_string(n.round_up) + " RoundUp";
    CHECK(file.find(said) != std::string::npos);
    const TailRewrites again = guard_split_tails(mine.pipeline);
    CHECK(again.shift_inwards + again.round_up + again.automatic == 0);
  }
}

TEST_CASE("funcs_by_name names the Func each pipeline.get_func(N) meant") {
  Halide::Var i("i");
  Halide::Func a{Halide::Internal::Function("first_stage")};
  Halide::Func b{Halide::Internal::Function("second_stage")};
  a(i) = i;
  b(i) = a(i) + 1;
  Halide::Pipeline p(b);
  std::string text;
  for (size_t k = 0; k < 2; ++k) {
    text += "Func f" + std::to_string(k) + " = pipeline.get_func(" + std::to_string(k) + ");\n";
  }
  const std::string out = funcs_by_name(text, p);
  CHECK(out.find("get_func") == std::string::npos);
  for (size_t k = 0; k < 2; ++k) {
    const std::string name = p.get_func(k).name();
    CHECK(out.find("Func f" + std::to_string(k) +
                   " = ::opforge::generators::pipeline_func(pipeline, \"" + name + "\");") !=
          std::string::npos);
    CHECK(generators::pipeline_func(p, name).name() == name);
  }
  CHECK_THROWS_WITH_AS(generators::pipeline_func(p, "third_stage"),
                       doctest::Contains("no Func 'third_stage'"), std::runtime_error);
  // A Func Halide made unique ("f$1") cannot be found by name in another process.
  Halide::Func c("dup"), d("dup");
  c(i) = i;
  d(i) = c(i);
  CHECK_THROWS_WITH_AS(
      funcs_by_name("pipeline.get_func(0) pipeline.get_func(1)", Halide::Pipeline(d)),
      doctest::Contains("no exact name"), std::runtime_error);
}

TEST_CASE("the key of an autoscheduled variant covers the schedule file's text") {
  const auto& adam = generators::apply_adam();
  const dsl::ResolvedOp op = dsl::resolve(adam);
  const Halide::Target t = Halide::Target(generators::isa("avx512").halide_target)
                               .with_feature(Halide::Target::NoRuntime);
  const std::string hand = op.variant_id("avx512");
  const std::string id = generators::auto_variant_id(hand);
  const generators::AutoSchedule* s = generators::find_auto_schedule(id);
  REQUIRE(s);
  auto key = [&](const std::string& text) {
    return auto_kernel_key(kHalide, t, id, generators::auto_scheduled_pipeline(op, t, id), text)
        .hex_digest();
  };
  const std::string base = key(s->source);
  CHECK(key(s->source) == base);  // built again: same key
  CHECK(key(s->source + "\n") != base);
  std::string edited = s->source;
  edited.replace(edited.find("131072"), 6, "65536");
  CHECK(key(edited) != base);
  // Not the hand variant's key, and it names what it hashes.
  CHECK(kernel_key(kHalide, t, id, dsl::build_pipeline(op, {}, t)).hex_digest() != base);
  const auto parts =
      auto_kernel_key(kHalide, t, id, generators::auto_scheduled_pipeline(op, t, id), s->source)
          .parts();
  std::set<std::string> names;
  for (const auto& [name, value] : parts) names.insert(name);
  CHECK(names.count("autoscheduler"));
  CHECK(names.count("autoschedule_settings"));
  CHECK(names.count("schedule_file_sha256"));
}

TEST_CASE("planning adds the __auto twin below its hand variant, and names a missing file") {
  const auto plan = plan_variants(generators::op_table(), {"apply_adam"}, kHalide);
  const PlannedVariant *hand = nullptr, *twin = nullptr;
  for (const auto& v : plan) {
    if (v.id == "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx512") hand = &v;
    if (v.id == "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx512__auto") twin = &v;
  }
  REQUIRE(hand);
  REQUIRE(twin);
  CHECK(twin->pipeline.schedule_recipe == generators::kAutoRecipe);
  CHECK(twin->pipeline.algorithm == hand->pipeline.algorithm);  // the same computation
  CHECK(twin->isa.priority < hand->isa.priority);
  for (const auto& v : plan) {
    if (v.isa.name == "avx2") CHECK(twin->isa.priority < v.isa.priority);
  }
  CHECK(twin->key.hex_digest() != hand->key.hex_digest());
  const registry::Descriptor d = make_descriptor(*twin, "14.0.0");
  CHECK(d.schedule.recipe == "adams2019");
  CHECK(d.schedule.summary.find("Adams2019") != std::string::npos);
  CHECK(d.attr_values() == make_descriptor(*hand, "14.0.0").attr_values());

  // A flagged row whose schedule file is not compiled in.
  const auto& gd = generators::apply_gradient_descent();
  const Halide::Target t =
      Halide::Target(generators::isa("avx2").halide_target).with_feature(Halide::Target::NoRuntime);
  std::vector<generators::VariantSpec> rows = {{&gd, {}, {"avx2"}, {}, {"avx2"}}};
  CHECK_THROWS_WITH_AS(plan_variants(rows, {}, kHalide),
                       doctest::Contains("opforge autoschedule apply_gradient_descent"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(generators::auto_scheduled_pipeline(dsl::resolve(gd), t, "no_such__auto"),
                       doctest::Contains("generators/schedules/no_such__auto.schedule.h"),
                       std::runtime_error);
  // A row narrowed to ISAs without twins (a preview) plans no twin.
  rows = {{&gd, {}, {"avx2"}, {}, {"avx512"}}};
  const auto narrowed = plan_variants(rows, {}, kHalide);
  REQUIRE(narrowed.size() == 1);
  CHECK(narrowed[0].id == "apply_gradient_descent__f32__avx2");
}

}  // namespace
}  // namespace opforge::builder
