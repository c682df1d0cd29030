// OPFORGE_CPU_FEATURES through the CLI: the mask hides CPU features from variant selection (an
// AVX-512 host then runs as an AVX2 one), `list` shows what the runtime sees, a malformed mask
// is an error naming the bad item, and what needs no execution (inspect, diff) works whatever
// the mask hides.
#include <doctest/doctest.h>

#include <algorithm>

#include "cli_util.h"
#include "host_isa.h"

namespace opforge::testing {
namespace {

const std::map<std::string, std::string> kAvx2 = {{"OPFORGE_CPU_FEATURES", "avx2"}};
const std::string kAdam512 = "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx512";
const std::string kAdam2 = "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx2";

std::vector<std::string> with_cache(std::vector<std::string> args) {
  return concat(args, {"--cache-dir", test_cache_dir()});
}

// Whether the CPU itself (no mask) has every feature of the avx512 variants.
bool host_has_avx512() {
  const auto d = Registry::open(test_registry_dir())->descriptor(kAdam512);
  const std::vector<std::string>& host = cpu_features().host;
  return std::all_of(
      d.target.cpu_features.begin(), d.target.cpu_features.end(),
      [&](const std::string& f) { return std::find(host.begin(), host.end(), f) != host.end(); });
}

// The "host: ..." line of `opforge list`.
std::string host_line(const Result& r) {
  const size_t at = r.out.find("\nhost: ");
  if (at == std::string::npos) return "";
  return r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
}

TEST_CASE("OPFORGE_CPU_FEATURES=avx2: avx512 variants do not run, the avx2 ones are selected") {
  TempDir dir;
  const AdamInputs in({1000}, 7);
  const std::vector<std::string> inputs = concat(in.write(dir), scalar_args(adam_scalars()));
  const Result forced = opforge_reg(
      concat({"run", "apply_adam", "--isa", "avx512", "--out", dir / "forced"}, inputs), kAvx2);
  CHECK(forced.rc == 1);
  CHECK(contains(forced.err, "ISA avx512 needs CPU feature avx512"));
  // On an AVX-512 host it is the mask, and the message says so.
  if (host_has_avx512()) CHECK(contains(forced.err, "(hidden by OPFORGE_CPU_FEATURES=avx2)"));

  const Result best =
      opforge_reg(concat({"run", "apply_adam", "--out", dir / "best"}, inputs), kAvx2);
  REQUIRE_MESSAGE(best.rc == 0, best.all());
  CHECK(contains(best.out, "(" + kAdam2 + ")"));

  const Result twin = opforge_reg(
      concat({"run", "apply_adam", "--variant", kAdam512 + "__auto", "--out", dir / "twin"},
             inputs),
      kAvx2);
  CHECK(twin.rc == 1);
  CHECK(contains(twin.err, "(ISA avx512) needs CPU feature avx512"));

  const Result none = opforge_reg(concat({"run", "apply_adam", "--out", dir / "none"}, inputs),
                                  {{"OPFORGE_CPU_FEATURES", "none"}});
  CHECK(none.rc == 1);
  CHECK(contains(none.err, "no variant runs on this CPU (OPFORGE_CPU_FEATURES=none)"));
}

TEST_CASE("list: the host line says which CPU features the runtime sees and what a mask hides") {
  const Result plain = opforge_reg({"list"}, {{"OPFORGE_CPU_FEATURES", ""}});
  REQUIRE_MESSAGE(plain.rc == 0, plain.all());
  const std::string unmasked = host_line(plain);
  CHECK(contains(unmasked, ", CPU features: "));
  CHECK(contains(unmasked, " avx2"));
  CHECK_FALSE(contains(unmasked, "masked by"));

  const Result masked = opforge_reg({"list"}, kAvx2);
  REQUIRE_MESSAGE(masked.rc == 0, masked.all());
  const std::string line = host_line(masked);
  CAPTURE(line);
  const size_t mark = line.find(", masked by OPFORGE_CPU_FEATURES=avx2");
  REQUIRE(mark != std::string::npos);
  const std::string seen = line.substr(0, mark);
  CHECK(contains(seen, " avx2"));
  CHECK(contains(seen, " fma"));
  CHECK_FALSE(contains(seen, "avx512"));
  if (host_has_avx512()) CHECK(contains(line.substr(mark), "(hides avx512f"));

  const Result removal = opforge_reg({"list"}, {{"OPFORGE_CPU_FEATURES", "-fma"}});
  REQUIRE_MESSAGE(removal.rc == 0, removal.all());
  const std::string no_fma = host_line(removal);
  CHECK_FALSE(contains(no_fma.substr(0, no_fma.find(", masked by")), " fma"));
  CHECK(contains(no_fma, "masked by OPFORGE_CPU_FEATURES=-fma (hides fma)"));
}

TEST_CASE("a malformed OPFORGE_CPU_FEATURES is an error naming the bad item") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"avx3", "unknown CPU feature or level 'avx3' (did you mean 'avx2'?)"},
      {"avx2,,fma", "empty item"},
      {"-avx512", "'-avx512': 'avx512' is not a CPU feature"},
      {"avx2,sse5", "'sse5'"}};
  TempDir dir;
  for (const auto& [mask, why] : cases) {
    CAPTURE(mask);
    for (const std::vector<std::string>& cmd :
         {std::vector<std::string>{"list"},
          {"run", "apply_adam", "--isa", "avx2", "--out", dir / "o"}}) {
      const Result r = opforge_reg(cmd, {{"OPFORGE_CPU_FEATURES", mask}});
      CHECK(r.rc == 1);
      CHECK(r.out.empty());  // nothing printed before the error
      CHECK(one_line(r.err));
      CHECK(contains(r.err, "OPFORGE_CPU_FEATURES='" + mask + "': "));
      CHECK(contains(r.err, why));
    }
  }
}

TEST_CASE("inspect and diff read any ISA's cache entry, whatever the mask hides") {
  for (const std::string mask : {"avx2", "none"}) {
    CAPTURE(mask);
    const std::map<std::string, std::string> env = {{"OPFORGE_CPU_FEATURES", mask}};
    const Result forced =
        opforge_reg(with_cache({"inspect", "apply_adam", "--isa", "avx512"}), env);
    REQUIRE_MESSAGE(forced.rc == 0, forced.all());
    CHECK(contains(forced.out, "variant   " + kAdam512));
    CHECK(contains(forced.out, "(16 lanes)"));
    const Result diff = opforge_reg(with_cache({"diff", kAdam512, kAdam2}), env);
    CHECK_MESSAGE(diff.rc == 0, diff.all());
    CHECK(contains(diff.out, "isa: avx512 -> avx2"));
  }
  // Without --isa: what select() runs here, and with nothing runnable the best of all.
  const Result avx2 = opforge_reg(with_cache({"inspect", "apply_adam"}), kAvx2);
  REQUIRE_MESSAGE(avx2.rc == 0, avx2.all());
  CHECK(contains(avx2.out, "variant   " + kAdam2));
  const Result none =
      opforge_reg(with_cache({"inspect", "apply_adam"}), {{"OPFORGE_CPU_FEATURES", "none"}});
  REQUIRE_MESSAGE(none.rc == 0, none.all());
  CHECK(contains(none.out, "variant   " + kAdam512));
}

}  // namespace
}  // namespace opforge::testing
