// inspect and diff: the schedule summary names the loop kinds and widths the recipe makes,
// the case a size takes, the raw views; --set previews compile into the cache and leave the
// registry byte-identical; diff shows what a param change does to the loop nests.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace opforge::testing {
namespace {

using json = nlohmann::json;

const std::string kAdamAvx2 = "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx2";

std::vector<std::string> with_cache(std::vector<std::string> args) {
  return concat(args, {"--cache-dir", test_cache_dir()});
}

// Every file of the registry with its bytes: a preview must not change any of them.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = slurp(e.path());
  }
  return files;
}

TEST_CASE("inspect: the summary names loop kinds, vector widths and the specializations") {
  const Result r = opforge_reg(with_cache({"inspect", "apply_adam", "--isa", "avx2"}));
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, "variant   " + kAdamAvx2));
  CHECK(contains(r.out, "recipe    elementwise:"));
  CHECK(contains(r.out, "vector=8"));
  CHECK(contains(r.out, "needs cpu features: sse4.1 avx avx2 fma f16c"));
  CHECK(contains(r.out, "func updated(i): Tuple(float32, float32, float32), output, compute root"));
  // Parallel chunks for large N, serial below serial_below; AVX2 is 8 fp32 lanes.
  CHECK(contains(r.out, "case 1: if (updated.0.extent.0 >= 16384)"));
  CHECK(contains(r.out, "case 2: otherwise"));
  CHECK(contains(r.out, "parallel   i.io1"));
  CHECK(contains(r.out, "vectorized i.ii1.v0  (8 lanes)"));
  CHECK(contains(r.out, "tail GuardWithIf"));
  CHECK_FALSE(contains(r.out, "ShiftInwards"));
  CHECK(contains(r.out, "N = 1000 ->  updated: case 2"));
  CHECK(contains(r.out, "N = 10000000 ->  updated: case 1"));

  const Result avx512 = opforge_reg(with_cache({"inspect", "apply_adam", "--isa", "avx512"}));
  REQUIRE_MESSAGE(avx512.rc == 0, avx512.all());
  CHECK(contains(avx512.out, "(16 lanes)"));
  CHECK(contains(avx512.out, "avx512f"));
}

TEST_CASE("inspect --n: the case taken and the run-time chunk size") {
  const Result big = opforge_reg(with_cache({"inspect", kAdamAvx2, "--n", "1e7"}));
  REQUIRE_MESSAGE(big.rc == 0, big.all());
  CHECK(contains(big.out, "N = 10000000 takes case 1"));
  CHECK(contains(big.out, ">= 16384)   <== taken"));
  // 8 tasks of whole 8-lane vectors: ceil(1e7 / 64) * 8.
  CHECK(contains(big.out, "(= 1250000)"));
  const Result small = opforge_reg(with_cache({"inspect", kAdamAvx2, "--n", "100", "--json"}));
  REQUIRE_MESSAGE(small.rc == 0, small.all());
  const json j = json::parse(small.out);
  CHECK(j.at("case_taken").at("updated") == 2);
  CHECK(j.at("descriptor").at("variant") == kAdamAvx2);
  CHECK(j.at("schedule").at("format") == "opforge.schedule/1");
}

TEST_CASE("inspect: a reduction's rfactor stages (apply_lamb)") {
  const Result r = opforge_reg(with_cache({"inspect", "apply_lamb", "--isa", "avx512"}));
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, "[reduction]"));
  CHECK(contains(r.out, "vectorized lane  (16 lanes)"));
  CHECK(contains(r.out, "compute root"));
}

TEST_CASE("inspect: stmt, asm, LLVM IR, header, loop nest and html views") {
  const std::vector<std::string> base = with_cache({"inspect", "apply_adam", "--isa", "avx2"});
  const Result stmt = opforge_reg(concat(base, {"--stmt"}));
  CHECK_MESSAGE(stmt.rc == 0, stmt.err);
  CHECK(contains(stmt.out, "parallel"));
  const Result as = opforge_reg(concat(base, {"--asm"}));
  CHECK_MESSAGE(as.rc == 0, as.err);
  CHECK(contains(as.out, "ymm"));  // AVX2 vectors
  const Result ll = opforge_reg(concat(base, {"--llvm"}));
  CHECK_MESSAGE(ll.rc == 0, ll.err);
  CHECK(contains(ll.out, "define "));
  CHECK(contains(ll.out, "<8 x float>"));
  const Result h = opforge_reg(concat(base, {"--header"}));
  CHECK(contains(h.out, kAdamAvx2 + "("));
  const Result nest = opforge_reg(concat(base, {"--loop-nest"}));
  CHECK(contains(nest.out, "produce updated"));

  TempDir dir;
  const std::string html = dir / "adam.html";
  const Result w = opforge_reg(concat(base, {"--html", html}));
  CHECK_MESSAGE(w.rc == 0, w.err);
  REQUIRE(fs::exists(html));
  const std::string text = slurp(html);
  CHECK(contains(text, "<head>"));  // Halide 14's stmt_html has no <html> element
  CHECK(contains(text, "<body"));
}

TEST_CASE("inspect --set: a preview compiles into the cache, the registry stays byte-identical") {
  const auto before = snapshot(test_registry_dir());
  const Result r = opforge_reg(with_cache(
      {"inspect", kAdamAvx2, "--set", "vector=4", "--set", "chunk=4096", "--n", "100000"}));
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, "source    preview (cache only, not in the registry;"));
  CHECK(contains(r.out, "changed   chunk=4096 vector=4"));
  CHECK(contains(r.out, "by 4096, tail GuardWithIf"));
  CHECK(contains(r.out, "(4 lanes)"));
  CHECK(before == snapshot(test_registry_dir()));
  // The same preview again is a cache hit.
  const Result again = opforge_reg(
      with_cache({"inspect", kAdamAvx2, "--set", "vector=4", "--set", "chunk=4096", "--stmt"}));
  CHECK_MESSAGE(again.rc == 0, again.err);
  CHECK(contains(again.out, "parallel"));
  // The registered variant still describes itself as before.
  const Result reg = opforge_reg(with_cache({"inspect", kAdamAvx2}));
  CHECK(contains(reg.out, "(8 lanes)"));
  CHECK(contains(reg.out, "source    registry"));
}

TEST_CASE("inspect --set name@N: a size bucket is one more case, taken from N up") {
  const std::vector<std::string> set = {"inspect", kAdamAvx2, "--set", "tasks@300000=2"};
  const Result big = opforge_reg(with_cache(concat(set, {"--n", "1e6"})));
  REQUIRE_MESSAGE(big.rc == 0, big.all());
  CHECK(contains(big.out, "changed   tasks@300000=2"));
  CHECK(contains(big.out, "N >= 300000: tasks 2"));
  CHECK(contains(big.out, ">= 300000)   <== taken"));
  CHECK(contains(big.out, "(= 500000)"));  // 2 tasks of whole 8-lane vectors
  const Result mid = opforge_reg(with_cache(concat(set, {"--n", "1e5"})));
  REQUIRE_MESSAGE(mid.rc == 0, mid.all());
  CHECK(contains(mid.out, ">= 16384)   <== taken"));
  CHECK(contains(mid.out, "(= 12504)"));  // 8 tasks: ceil(1e5 / 64) * 8
  // A plain --set drops the registered buckets of that param; a bad bucket names itself.
  const Result bad = opforge_reg(with_cache({"inspect", kAdamAvx2, "--set", "divide@1000=1"}));
  CHECK(bad.rc != 0);
  CHECK(contains(bad.err, "'divide@1000': only vector, unroll, tasks and chunk"));
  const Result sparse =
      opforge_reg(with_cache({"inspect", "sparse_apply_adagrad", "--set", "tasks@1000=2"}));
  CHECK(sparse.rc != 0);
  CHECK(contains(sparse.err, "apply to dense elementwise ops only"));
}

// An inspect run that must succeed: its output.
std::string inspected(const std::vector<std::string>& args) {
  const Result r = opforge_reg(with_cache(args));
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  return r.out;
}

TEST_CASE("inspect: 8-bit kernels prefetch grad and var from 2^21 elements; fp32 ones refuse it") {
  const std::vector<std::string> q8s = {"inspect",     "apply_adam", "--attr",
                                        "storage=q8s", "--isa",      "avx2"};
  CHECK(contains(inspected(q8s),
                 "inputs wider than a byte prefetched 512 elements ahead from N = 2097152"));
  const std::string stmt = inspected(concat(q8s, {"--stmt"}));
  CHECK(contains(stmt, "opforge_prefetch_t0(grad, "));
  CHECK(contains(stmt, "opforge_prefetch_t0(var, "));
  CHECK_FALSE(contains(stmt, "opforge_prefetch_t0(m, "));  // the codes: no gain measured
  CHECK_FALSE(contains(inspected(concat(q8s, {"--set", "prefetch=0"})), "prefetched"));
  const Result f32 = opforge_reg(with_cache({"inspect", kAdamAvx2, "--set", "prefetch=64"}));
  CHECK(f32.rc != 0);
  CHECK(contains(f32.err, "prefetch applies to 8-bit-state ops only"));
}

TEST_CASE("inspect: the norms' and softmax's output pass prefetches the next row's inputs") {
  const std::vector<std::string> add = {"inspect", "add_layer_norm", "--isa", "avx2"};
  const std::string on = inspected(add);
  CHECK(contains(on, "prefetch_rows=1"));
  CHECK(contains(on, "the output pass prefetches the input rows 1 ahead"));
  const std::string stmt = inspected(concat(add, {"--stmt"}));
  CHECK(contains(stmt, "opforge_prefetch_t0(x, "));
  CHECK(contains(stmt, "opforge_prefetch_t0(residual, "));
  CHECK_FALSE(
      contains(inspected(concat(add, {"--set", "prefetch_rows=0"})), "prefetches the input rows"));
  // The fp32 rms forms keep it off (measured: no gain), their bf16 forms on.
  const std::vector<std::string> rms = {"inspect", "rms_norm", "--isa", "avx2"};
  CHECK(contains(inspected(rms), "prefetch_rows=0"));
  CHECK(contains(inspected(concat(rms, {"--attr", "dtype=bfloat16"})), "prefetch_rows=1"));
  CHECK(contains(inspected({"inspect", "softmax", "--isa", "avx2"}),
                 "the output pass prefetches the input rows 1 ahead"));
  // softmax's own prefetch_output is not the norms'.
  const Result norm =
      opforge_reg(with_cache({"inspect", "layer_norm", "--set", "prefetch_output=1"}));
  CHECK(norm.rc != 0);
  CHECK(contains(norm.err, "op 'layer_norm' has no schedule param 'prefetch_output'"));
}

TEST_CASE("inspect --set double_buffer=1: the async producers, their folded slots and levels") {
  const Result r = opforge_reg(with_cache(
      {"inspect", kAdamAvx2, "--set", "double_buffer=1", "--set", "db_grain=500", "--n", "1e6"}));
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  // Each input tensor staged: computed per block, stored per range, two slots of 504
  // (500 rounded up to whole 8-lane vectors).
  for (const char* t : {"var", "m", "v", "grad"}) {
    CAPTURE(t);
    CHECK(contains(r.out, std::string("func ") + t +
                              "_im_in_updated(_0): float32, compute updated.db_block, store "
                              "updated.db_range, async (producer runs as its own task: double "
                              "buffering)"));
  }
  CHECK(contains(r.out, "storage folded over _0 by 1008"));
  CHECK(contains(r.out, "parallel   i.db_range"));
  CHECK(contains(r.out, "double-buffered input tensors (2 slots of 500 elements per range"));
  // The row recipe of an NN op: x staged per slot of 4 rows, stored per task's block of rows.
  const Result rows = opforge_reg(with_cache(
      {"inspect", "softmax", "--isa", "avx2", "--set", "double_buffer=1", "--set", "db_rows=4"}));
  REQUIRE_MESSAGE(rows.rc == 0, rows.all());
  CHECK(contains(rows.out, "changed   db_rows=4 double_buffer=1"));
  CHECK(contains(rows.out, "compute y.rb, store y.ro, async"));
  CHECK(contains(rows.out, "storage folded over _1 by 8"));
  CHECK(contains(rows.out, "double-buffered input rows (2 slots of 4 rows, async)"));
  // diff: the preview against the registered schedule.
  const Result d = opforge_reg(
      with_cache({"diff", "softmax__f32__avx2", "--set", "double_buffer=1", "--set", "db_rows=4"}));
  CHECK_MESSAGE(d.rc == 0, d.all());
  CHECK(contains(d.out, "param double_buffer: 0 -> 1"));
  CHECK(contains(d.out,
                 "+func x_im_global_wrapper(_0, _1): float32, compute y.rb, store y.ro, "
                 "async"));
  CHECK(contains(d.out, "+  fold _1 by 8"));
  // NN ops without the knob, or a value out of range, name what is wrong.
  const Result conv =
      opforge_reg(with_cache({"inspect", "matmul", "--isa", "avx2", "--set", "db_rows=4"}));
  CHECK(conv.rc != 0);
  CHECK(contains(conv.err, "has no schedule param 'db_rows' (its params: double_buffer, kc,"));
  const Result lanes =
      opforge_reg(with_cache({"inspect", "softmax", "--isa", "avx2", "--set", "lanes=12"}));
  CHECK(lanes.rc != 0);
  CHECK(contains(lanes.err, "'lanes' = 12 is not a multiple of vector = 8"));
}

TEST_CASE("inspect --set: bad params name themselves") {
  const Result unknown = opforge_reg(with_cache({"inspect", kAdamAvx2, "--set", "vectr=4"}));
  CHECK(unknown.rc != 0);
  CHECK(contains(unknown.err, "unknown schedule param 'vectr'"));
  const Result range = opforge_reg(with_cache({"inspect", kAdamAvx2, "--set", "unroll=99"}));
  CHECK(range.rc != 0);
  CHECK(contains(range.err, "'unroll' = 99 is outside [1, 8]"));
  const Result bad = opforge_reg(with_cache({"inspect", kAdamAvx2, "--set", "vector=abc"}));
  CHECK(bad.rc != 0);
  CHECK(contains(bad.err, "--set vector=abc"));
}

TEST_CASE("inspect --variant and --schedule: an autoscheduled twin and its .schedule.h") {
  const std::string twin = "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx512__auto";
  const Result r = opforge_reg(with_cache({"inspect", "apply_adam", "--variant", twin}));
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, "variant   " + twin));
  CHECK(contains(r.out, "recipe    adams2019:"));
  CHECK(contains(r.out, "parallel"));
  CHECK_FALSE(contains(r.out, "tail ShiftInwards"));  // rewritten: the kernels run in place
  CHECK(contains(r.out, "tail GuardWithIf"));
  const Result h = opforge_reg(with_cache({"inspect", twin, "--schedule"}));
  REQUIRE_MESSAGE(h.rc == 0, h.all());
  CHECK(contains(h.out, "inline void apply_schedule_" + twin));
  CHECK(contains(h.out, "HL_SEED=0"));
  const Result hand = opforge_reg(with_cache({"inspect", kAdamAvx2, "--schedule"}));
  CHECK(hand.rc != 0);
  CHECK(contains(hand.err, "not autoscheduled"));
  const Result other = opforge_reg(with_cache({"inspect", "apply_momentum", "--variant", twin}));
  CHECK(other.rc != 0);
  CHECK(contains(other.err, "is a variant of apply_adam, not of apply_momentum"));
  const Result typo = opforge_reg(with_cache({"inspect", "apply_adam", "--variant", "nope"}));
  CHECK(typo.rc != 0);
  CHECK(contains(typo.err, "has no variant 'nope'"));
}

TEST_CASE("inspect: a cache without the entry says how to recreate it") {
  TempDir empty;
  const Result r =
      opforge_reg({"inspect", "apply_adam", "--isa", "avx2", "--cache-dir", empty.path().string()});
  CHECK(r.rc == 1);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, "opforge build"));
}

TEST_CASE("diff: two ISAs, and a variant against its preview") {
  const std::string avx512 = "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx512";
  const Result isas = opforge_reg(with_cache({"diff", avx512, kAdamAvx2}));
  REQUIRE_MESSAGE(isas.rc == 0, isas.all());
  CHECK(contains(isas.out, "--- " + avx512 + " (registry)"));
  CHECK(contains(isas.out, "param vector: 16 -> 8"));
  CHECK(contains(isas.out, "isa: avx512 -> avx2"));
  CHECK(contains(isas.out, "-        vectorized i.ii1.v0  (16 lanes)"));
  CHECK(contains(isas.out, "+        vectorized i.ii1.v0  (8 lanes)"));

  const Result unroll = opforge_reg(with_cache({"diff", kAdamAvx2, "--set", "unroll=2"}));
  REQUIRE_MESSAGE(unroll.rc == 0, unroll.all());
  CHECK(contains(unroll.out, "+++ " + kAdamAvx2 + " with unroll=2 (preview)"));
  CHECK(contains(unroll.out, "param unroll: 1 -> 2"));
  CHECK(contains(unroll.out, "unrolled"));

  const Result same = opforge_reg(with_cache({"diff", kAdamAvx2, kAdamAvx2}));
  CHECK(contains(same.out, "loop nests: identical"));
  CHECK(contains(same.out, "(no difference)"));

  const Result one = opforge_reg(with_cache({"diff", kAdamAvx2}));
  CHECK(one.rc != 0);
  CHECK(contains(one.err, "--set"));
}

}  // namespace
}  // namespace opforge::testing
