// report --html: the page is produced, covers every op, and every link and anchor in it
// resolves; measurements draw a plot; it never overwrites what is not an earlier report.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "cli_util.h"
#include "host_isa.h"

namespace opforge::testing {
namespace {

std::vector<std::string> attribute_values(const std::string& html, const std::string& attr) {
  std::vector<std::string> out;
  const std::regex re(attr + "=\"([^\"]*)\"");
  for (std::sregex_iterator it(html.begin(), html.end(), re), end; it != end; ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

std::vector<std::string> report_args(const std::string& dir, std::vector<std::string> more) {
  return concat({"report", "--html", dir, "--cache-dir", test_cache_dir()}, more);
}

TEST_CASE("report --html: every op has a section, every link and anchor resolves") {
  TempDir tmp;
  const std::string dir = tmp / "report";
  const Result r = opforge_reg(report_args(dir, {"--no-bench"}));
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  CHECK(contains(r.out, "wrote " + dir + "/index.html"));
  const std::string html = slurp(fs::path(dir) / "index.html");
  CHECK(html.rfind("<!doctype html>", 0) == 0);
  CHECK(contains(html, "</html>"));
  CHECK_FALSE(contains(html, "<script"));  // self-contained and static

  const Result list = opforge_reg({"list", "--json"});
  REQUIRE(list.rc == 0);
  std::set<std::string> ids;
  for (const auto& id : attribute_values(html, "id")) ids.insert(id);
  for (const auto& v : nlohmann::json::parse(list.out)) {
    const std::string variant = v.at("variant");
    CAPTURE(variant);
    CHECK(ids.count(variant) == 1);  // a row per variant
    const std::string op = v.at("op");
    if (op.rfind("bandwidth_", 0) != 0) CHECK(ids.count("op-" + op) == 1);
  }
  size_t files = 0, anchors = 0;
  for (const auto& href : attribute_values(html, "href")) {
    CAPTURE(href);
    if (href[0] == '#') {
      CHECK(ids.count(href.substr(1)) == 1);
      ++anchors;
    } else {
      CHECK(href.find("..") == std::string::npos);
      CHECK(fs::is_regular_file(fs::path(dir) / href));
      ++files;
    }
  }
  CHECK(anchors > 10);
  CHECK(files > 100);  // stmt_html, asm and schedule of every variant
  CHECK(contains(slurp(fs::path(dir) / "kernels" /
                       "apply_adam__use_nesterov_0__epsilon_mode_tf__f32__avx2.schedule.txt"),
                 "(8 lanes)"));
  CHECK(contains(html, "not measured (--no-bench)"));
}

TEST_CASE("report: measured ops get a GB/s plot against the bandwidth kernel") {
  TempDir tmp;
  const std::string dir = tmp / "r";
  const Result r =
      opforge_reg(report_args(dir, {"--only", "apply_gradient_descent", "--sizes", "1000,20000",
                                    "--budget-ms", "1", "--scalar", "alpha=0.25"}));
  REQUIRE_MESSAGE(r.rc == 0, r.all());
  const std::string html = slurp(fs::path(dir) / "index.html");
  CHECK(contains(html, "<svg"));
  // The op and the bandwidth kernel, and on AVX-512 the op's Adams2019 twin (same loop).
  const bool twin = contains(html, "apply_gradient_descent__f32__avx512__auto runs in the same");
  CHECK(attribute_values(html, "points").size() == (twin ? 3u : 2u));
  CHECK(contains(html, "Adams2019 % of bandwidth") == twin);
  // The twin runs where the runtime sees its features (OPFORGE_CPU_FEATURES applies).
  CHECK(twin == runs_here(Registry::open(test_registry_dir())
                              ->descriptor("apply_gradient_descent__f32__avx512__auto")));
  CHECK(contains(html, "<td class=\"num\">1000</td>"));
  CHECK(contains(html, "<td class=\"num\">20000</td>"));
  CHECK(contains(html, "bandwidth_s1_g1__"));
  // What was measured: the scalars, and the specialization they and the largest N select.
  CHECK(contains(html, "scalars: alpha=0.25"));
  CHECK(contains(html, "at N = 20000 updated runs case"));
}

TEST_CASE("report: replaces an earlier report, refuses any other directory") {
  TempDir tmp;
  const std::string dir = tmp / "r";
  REQUIRE(opforge_reg(report_args(dir, {"--only", "apply_momentum", "--no-bench"})).rc == 0);
  const Result again = opforge_reg(report_args(dir, {"--only", "apply_adam", "--no-bench"}));
  REQUIRE_MESSAGE(again.rc == 0, again.all());
  const std::string html = slurp(fs::path(dir) / "index.html");
  CHECK(contains(html, "op-apply_adam"));
  CHECK_FALSE(contains(html, "op-apply_momentum"));

  const std::string other = tmp / "notes";
  fs::create_directories(other);
  std::ofstream(fs::path(other) / "mine.txt") << "keep me";
  const Result refused = opforge_reg(report_args(other, {"--no-bench"}));
  CHECK(refused.rc != 0);
  CHECK(contains(refused.err, "is not an opforge report"));
  CHECK(slurp(fs::path(other) / "mine.txt") == "keep me");
  // Nothing half-written is left next to it.
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(tmp.path())) entries += e.exists();
  CHECK(entries == 2);

  const Result bad = opforge_reg(report_args(tmp / "x", {"--sizes", "10,abc"}));
  CHECK(bad.rc != 0);
  CHECK(contains(bad.err, "'abc'"));
  const Result scalar =
      opforge_reg(report_args(tmp / "z", {"--only", "apply_adam", "--scalar", "alpha=1"}));
  CHECK(scalar.rc != 0);
  CHECK(contains(scalar.err, "--scalar alpha: no reported op has a scalar of that name"));
  const Result unknown = opforge_reg(report_args(tmp / "y", {"--only", "apply_adamm"}));
  CHECK(unknown.rc != 0);
  CHECK(contains(unknown.err, "apply_adam"));
  CHECK_FALSE(fs::exists(tmp / "y"));
}

}  // namespace
}  // namespace opforge::testing
