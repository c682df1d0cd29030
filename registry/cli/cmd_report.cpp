// opforge report --html DIR: one static page for the whole op library. Per op: its
// declaration (formula, arguments, attrs, tolerance), every variant with its schedule summary
// and links to Halide's stmt_html, the assembly and the schedule description (copied out of
// the compile cache), and a plot of GB/s against N next to the same-traffic bandwidth kernel,
// measured in this process, interleaved. No scripts, fonts or network: it opens from disk.
//
// The page is written into a temporary sibling directory and renamed into place, so DIR is
// either the old report or the new one; an existing DIR that is not an opforge report (no
// marker file) is never overwritten.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "registry/builder/autoscheduler.h"
#include "registry/cache/atomic_file.h"
#include "registry/cache/compile_cache.h"
#include "registry/cli/bench/bench_workload.h"
#include "registry/cli/commands.h"
#include "registry/cli/report_html.h"
#include "registry/format/schedule_view.h"

namespace opforge::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kMarker = ".opforge-report";

std::string fmt(const char* f, double v);

struct Point {
  int64_t n;
  double op_gbs, bw_gbs;
  double auto_gbs = 0;  // the op's autoscheduled twin, when it has one
};

struct VariantPage {
  registry::Descriptor d;
  std::map<std::string, std::string> links;  // label -> relative path
  std::string schedule_text;                 // empty when the cache entry is missing
  nlohmann::json schedule_json;
};

struct OpPage {
  std::string op;
  std::vector<VariantPage> variants;
  std::string measured_variant, bandwidth_variant, twin_variant, note;
  std::string conditions;  // the scalars measured with, and the cases they select
  std::vector<Point> points;
};

// The scalars a measurement uses (--scalar where the op has it, else bench's defaults), and
// which specialization each multi-case stage of the kernel takes with them at N: a fast path
// (e.g. FTRL's lr_power == -0.5) changes what a GB/s figure means.
std::string measured_conditions(const registry::Descriptor& d, const VariantPage* page,
                                const std::map<std::string, double>& scalars, int64_t n) {
  registry::ScheduleEnv env;
  env.n = n;
  std::string text = "scalars:";
  for (const auto& in : d.inputs) {
    if (in.role != registry::Input::Role::scalar) continue;
    const double v = scalars.count(in.name) ? scalars.at(in.name) : default_scalar(in);
    env.values[in.name] = v;
    text += " " + in.name + "=" + fmt("%g", v);
  }
  if (!page || page->schedule_json.is_null()) return text;
  for (const auto& f : page->schedule_json["funcs"]) {
    for (const auto& st : f["stages"]) {
      if (st["cases"].size() < 2) continue;
      const registry::CaseChoice c = registry::choose_case(st, env);
      text += "; at N = " + std::to_string(n) + " " + st.value("name", "?") + " runs ";
      if (!c.index) {
        text += "a case that depends on " + c.depends_on;
        continue;
      }
      const auto& cs = st["cases"][*c.index];
      text += "case " + std::to_string(*c.index + 1) + " of " + std::to_string(st["cases"].size()) +
              " (" +
              (cs.contains("condition") ? "if " + cs.value("condition_text", "?")
                                        : std::string("the default")) +
              ")";
    }
  }
  return text;
}

std::vector<int64_t> parse_sizes(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    double v = 0;
    std::size_t used = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 1 || v > 2e9 || v != std::floor(v)) {
      throw UsageError("--sizes: '" + item + "' is not a size between 1 and 2e9");
    }
    out.push_back(static_cast<int64_t>(v));
  }
  if (out.empty()) throw UsageError("--sizes: no sizes");
  return out;
}

// Op, bandwidth kernel (and the op's autoscheduled twin) in turn until each has used
// `budget` seconds (5 to 2000 calls): medians of interleaved calls, as `opforge bench`.
Point measure(Kernel& op, Kernel& bw, Kernel* twin, int64_t n, double budget,
              const std::map<std::string, double>& scalars) {
  Workload wo(op.descriptor(), n, scalars);
  Workload wb(bw.descriptor(), n, {});
  std::unique_ptr<Workload> wt;
  if (twin) wt = std::make_unique<Workload>(twin->descriptor(), n, scalars);
  time_call(op, wo), time_call(bw, wb);  // warm-up: page faults, thread pool start
  if (twin) time_call(*twin, *wt);
  std::vector<double> to, tb, tt;
  double spent_o = 0, spent_b = 0;
  while (to.size() < 5 || ((spent_o < budget || spent_b < budget) && to.size() < 2000)) {
    to.push_back(time_call(op, wo)), spent_o += to.back();
    tb.push_back(time_call(bw, wb)), spent_b += tb.back();
    if (twin) tt.push_back(time_call(*twin, *wt));
  }
  const double nd = static_cast<double>(n);
  Point p{n, bytes_per_element(op.descriptor()) * nd / median(to) / 1e9,
          bytes_per_element(bw.descriptor()) * nd / median(tb) / 1e9};
  if (twin) p.auto_gbs = bytes_per_element(twin->descriptor()) * nd / median(tt) / 1e9;
  return p;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

const char* kStyle = R"css(
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 90%; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; font-size: 85%; }
.meta { color: #555; } .missing { color: #a00; } code { font-size: 90%; }
.good { color: #070; } .low { color: #a60; }
)css";

std::string pct_class(double pct) {
  return pct >= 90 ? "good" : "low";
}

std::string op_section(const OpPage& p) {
  const registry::Descriptor& d = p.variants.front().d;
  std::ostringstream o;
  o << "<section id=\"op-" << p.op << "\">\n<h2>" << p.op << "</h2>\n<p>" << html_escape(d.summary)
    << "</p>\n";
  o << "<pre class=\"formula\">" << html_escape(d.formula) << "</pre>\n";
  o << "<p class=\"meta\">reference: " << html_escape(d.reference) << "; tolerance rtol "
    << d.tolerance.rtol << ", atol " << d.tolerance.atol << "; traffic "
    << d.traffic.bytes_read_per_element << " B read + " << d.traffic.bytes_written_per_element
    << " B written per element</p>\n";
  o << "<h3>Arguments</h3>\n<table><tr><th>name</th><th>role</th><th>dtype</th><th>"
       "description</th></tr>\n";
  for (const auto& in : d.inputs) {
    o << "<tr><td><code>" << html_escape(in.name) << "</code></td><td>"
      << registry::role_name(in.role) << "</td><td>" << registry::dtype_name(in.dtype)
      << "</td><td>" << html_escape(in.description) << "</td></tr>\n";
  }
  o << "</table>\n";
  if (!d.attrs.empty()) {
    o << "<h3>Attributes</h3>\n<table><tr><th>name</th><th>type</th><th>default</th><th>"
         "description</th></tr>\n";
    for (const auto& at : d.attrs) {
      std::string type = registry::attr_type_name(at.type);
      if (!at.choices.empty()) {
        type += " (";
        for (size_t k = 0; k < at.choices.size(); ++k) type += (k ? " | " : "") + at.choices[k];
        type += ")";
      }
      o << "<tr><td><code>" << html_escape(at.name) << "</code></td><td>" << html_escape(type)
        << "</td><td>" << html_escape(at.default_value) << "</td><td>"
        << html_escape(at.description) << "</td></tr>\n";
    }
    o << "</table>\n";
  }
  o << "<h3>Variants</h3>\n<table><tr><th>variant</th><th>attrs</th><th>ISA</th><th>schedule"
       "</th><th>views</th></tr>\n";
  for (const auto& v : p.variants) {
    std::string attrs, params;
    for (const auto& [k, val] : v.d.attr_values()) attrs += k + "=" + val + " ";
    for (const auto& [k, val] : v.d.schedule.params) params += k + "=" + val + " ";
    o << "<tr id=\"" << v.d.variant << "\"><td><code>" << v.d.variant << "</code></td><td>"
      << html_escape(attrs) << "</td><td>" << v.d.target.isa << "</td><td>"
      << html_escape(v.d.schedule.recipe) << ": " << html_escape(params) << "<br>"
      << html_escape(v.d.schedule.summary) << "</td><td>";
    if (v.links.empty()) {
      o << "<span class=\"missing\">no cache entry (run opforge build with this cache)</span>";
    }
    for (const auto& [label, href] : v.links) {
      o << "<a href=\"" << html_escape(href) << "\">" << html_escape(label) << "</a> ";
    }
    o << "</td></tr>\n";
  }
  o << "</table>\n";
  if (!p.points.empty()) {
    o << "<h3>Throughput</h3>\n<p class=\"meta\">" << html_escape(p.measured_variant)
      << " against the bandwidth kernel that moves the same bytes ("
      << html_escape(p.bandwidth_variant) << "), interleaved medians in one process; "
      << html_escape(p.conditions) << "."
      << (p.twin_variant.empty()
              ? ""
              : " Its autoscheduled twin " + p.twin_variant + " runs in the same loop.")
      << "</p>\n";
    std::vector<std::pair<double, double>> op_pts, bw_pts, auto_pts;
    for (const auto& pt : p.points) {
      op_pts.push_back({static_cast<double>(pt.n), pt.op_gbs});
      bw_pts.push_back({static_cast<double>(pt.n), pt.bw_gbs});
      if (pt.auto_gbs > 0) auto_pts.push_back({static_cast<double>(pt.n), pt.auto_gbs});
    }
    const bool twin = !p.twin_variant.empty();
    o << svg_line_plot({{p.op + (twin ? " (hand)" : ""), "#1f6fb2", false, op_pts},
                        {"Adams2019 twin", "#d9822b", false, auto_pts},
                        {"bandwidth kernel", "#777", true, bw_pts}},
                       "N (elements per tensor)", "GB/s")
      << "\n<table><tr><th>N</th><th>op GB/s</th><th>bandwidth GB/s</th><th>% of bandwidth"
      << (twin ? "</th><th>Adams2019 GB/s</th><th>Adams2019 % of bandwidth" : "") << "</th></tr>\n";
    for (const auto& pt : p.points) {
      const double pct = 100 * pt.op_gbs / pt.bw_gbs;
      o << "<tr><td class=\"num\">" << pt.n << "</td><td class=\"num\">" << fmt("%.2f", pt.op_gbs)
        << "</td><td class=\"num\">" << fmt("%.2f", pt.bw_gbs) << "</td><td class=\"num "
        << pct_class(pct) << "\">" << fmt("%.0f%%", pct);
      if (twin) {
        const double apct = 100 * pt.auto_gbs / pt.bw_gbs;
        o << "</td><td class=\"num\">" << fmt("%.2f", pt.auto_gbs) << "</td><td class=\"num "
          << pct_class(apct) << "\">" << fmt("%.0f%%", apct);
      }
      o << "</td></tr>\n";
    }
    o << "</table>\n";
  } else if (!p.note.empty()) {
    o << "<p class=\"meta\">" << html_escape(p.note) << "</p>\n";
  }
  for (const auto& v : p.variants) {
    if (v.d.variant != p.measured_variant || v.schedule_text.empty()) continue;
    o << "<details><summary>Schedule of <code>" << v.d.variant << "</code></summary><pre>"
      << html_escape(v.schedule_text) << "</pre></details>\n";
  }
  o << "</section>\n";
  return o.str();
}

// `out` may take a report: absent, empty, or an earlier report (never anything else).
// Checked before measuring, so that a bad --html fails at once, and again at install.
void check_report_target(const fs::path& out) {
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  const bool report = fs::is_directory(out, ec) && fs::exists(out / kMarker, ec);
  const bool empty = fs::is_directory(out, ec) && fs::is_empty(out, ec);
  if (!report && !empty) {
    throw std::runtime_error(out.string() + " exists and is not an opforge report (" +
                             (fs::is_directory(out, ec)
                                  ? "a directory without " + std::string(kMarker)
                                  : "not a directory") +
                             "): not overwriting it");
  }
}

// Moves `staging` to `out`, replacing an earlier report there (never anything else).
void install_report(const fs::path& staging, const fs::path& out) {
  std::error_code ec;
  check_report_target(out);
  if (fs::exists(out, ec)) {
    const fs::path old = staging.string() + ".old";
    fs::rename(out, old);
    fs::rename(staging, out);
    fs::remove_all(old, ec);
  } else {
    fs::rename(staging, out);
  }
}

}  // namespace

namespace {

// What the measurements take from the command line.
struct MeasureOptions {
  std::vector<int64_t> sizes;
  double budget_s = 0.04;
  bool bench = true;
  std::map<std::string, double> scalars;  // --scalar, for every op that has one of the name
};

// A variant's page: its descriptor, and the views of its cache entry (stmt_html, assembly,
// schedule) written into `staging`.
VariantPage variant_page(registry::Descriptor d, cache::CompileCache& cache,
                         const fs::path& staging) {
  VariantPage v{std::move(d), {}, ""};
  // Variant ids are validated C identifiers (descriptor schema): safe as file names.
  auto entry = cache.lookup(v.d.cache_key);
  if (!entry) return v;
  const std::string base = "kernels/" + v.d.variant;
  auto put = [&](const std::string& label, const std::string& suffix, const std::string& bytes) {
    cache::write_file_atomic((staging / (base + suffix)).string(), bytes);
    v.links[label] = base + suffix;
  };
  put("stmt_html", ".stmt.html", entry->artifacts.at("kernel.stmt.html"));
  put("asm", ".s", entry->artifacts.at("kernel.s"));
  if (const auto s = builder::compiled_schedule_source(v.d.variant)) {
    put("schedule.h", ".schedule.h", *s);
  }
  auto sched = entry->artifacts.find("schedule.json");
  if (sched != entry->artifacts.end()) {
    v.schedule_json = nlohmann::json::parse(sched->second);
    v.schedule_text = registry::render_schedule(v.schedule_json);
    put("schedule", ".schedule.txt", v.schedule_text);
  }
  return v;
}

// Measures the op's selected variant (and its autoscheduled twin) against the bandwidth
// kernel with its traffic at every size, or says on the page why not. True when it plotted.
bool measure_page(OpPage& page, Registry& reg, const MeasureOptions& o) {
  const std::string& op = page.op;
  try {
    Kernel& k = reg.select(op);
    page.measured_variant = k.descriptor().variant;
    Kernel* bw = bandwidth_kernel(reg, k.descriptor());
    if (!o.bench) {
      page.note = "not measured (--no-bench)";
      return false;
    }
    if (!k.descriptor().shape.elementwise) {
      page.note = "sparse op: measure rows/s with `opforge bench " + op + "`";
      return false;
    }
    if (!bw) {
      page.note = "no bandwidth kernel with this traffic in the registry";
      return false;
    }
    page.bandwidth_variant = bw->descriptor().variant;
    std::map<std::string, double> scalars;
    for (const auto& [name, v] : o.scalars) {
      const registry::Input* in = k.descriptor().find_input(name);
      if (in && in->role == registry::Input::Role::scalar) scalars[name] = v;
    }
    const VariantPage* measured = nullptr;
    for (const auto& v : page.variants) {
      if (v.d.variant == page.measured_variant) measured = &v;
    }
    page.conditions = measured_conditions(k.descriptor(), measured, scalars, o.sizes.back());
    Kernel* twin = nullptr;
    const std::string twin_id = builder::auto_variant_id(page.measured_variant);
    for (const auto& v : page.variants) {
      if (v.d.variant == twin_id) twin = &reg.load(twin_id);
    }
    if (twin) page.twin_variant = twin_id;
    for (int64_t n : o.sizes) {
      page.points.push_back(measure(k, *bw, twin, n, o.budget_s, scalars));
    }
    std::fprintf(stderr, "measured %s\n", op.c_str());
    return true;
  } catch (const std::exception& e) {
    page.note = std::string("not measured: ") + e.what();
    return false;
  }
}

// The whole page: a header naming the registry and the host, the ops' summary table, one
// section per op, and the bandwidth kernels.
std::string report_html(const Registry& reg, const std::vector<OpPage>& pages,
                        const std::vector<OpPage>& bandwidth_pages, size_t variants,
                        int64_t threads, int64_t largest) {
  std::ostringstream html;
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  html << "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<title>opforge op library</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n"
       << "<h1>opforge op library</h1>\n<p class=\"meta\">registry <code>" << html_escape(reg.dir())
       << "</code>, Halide " << html_escape(reg.index().halide_version) << "; " << pages.size()
       << " ops, " << bandwidth_pages.size() << " bandwidth kernels, " << variants
       << " variants. Generated " << date << " on " << sysconf(_SC_NPROCESSORS_ONLN) << " cores, "
       << threads << " threads; " << html_escape(host_summary())
       << ". GB/s counts the bytes the op must read and write once.</p>\n";
  html << "<h2>Ops</h2>\n<table><tr><th>op</th><th>kind</th><th>variants</th><th>measured "
          "variant</th><th>% of bandwidth at N = "
       << largest << "</th></tr>\n";
  for (const auto& p : pages) {
    html << "<tr><td><a href=\"#op-" << p.op << "\">" << p.op << "</a></td><td>"
         << html_escape(p.variants.front().d.kind) << "</td><td class=\"num\">" << p.variants.size()
         << "</td><td><code>" << html_escape(p.measured_variant)
         << "</code></td><td class=\"num\">";
    if (!p.points.empty()) {
      const double pct = 100 * p.points.back().op_gbs / p.points.back().bw_gbs;
      html << "<span class=\"" << pct_class(pct) << "\">" << fmt("%.0f%%", pct) << "</span>";
    } else {
      html << "&ndash;";
    }
    html << "</td></tr>\n";
  }
  html << "</table>\n";
  for (const auto& p : pages) html << op_section(p);
  if (!bandwidth_pages.empty()) {
    html << "<h2 id=\"bandwidth\">Bandwidth kernels</h2>\n<p>Read-modify-write kernels with "
            "the traffic of the ops above: the ceiling each op is measured against.</p>\n<table>"
            "<tr><th>variant</th><th>traffic</th><th>views</th></tr>\n";
    for (const auto& p : bandwidth_pages) {
      for (const auto& v : p.variants) {
        html << "<tr id=\"" << v.d.variant << "\"><td><code>" << v.d.variant << "</code></td><td>"
             << v.d.traffic.bytes_read_per_element << " B read + "
             << v.d.traffic.bytes_written_per_element << " B written</td><td>";
        for (const auto& [label, href] : v.links) {
          html << "<a href=\"" << html_escape(href) << "\">" << label << "</a> ";
        }
        html << "</td></tr>\n";
      }
    }
    html << "</table>\n";
  }
  html << "</body>\n</html>\n";
  return html.str();
}

}  // namespace

int cmd_report(const Args& a) {
  if (!a.has("html")) throw UsageError("report needs --html DIR");
  const fs::path out = fs::absolute(a.get("html")).lexically_normal();
  check_report_target(out);
  MeasureOptions o;
  o.sizes = parse_sizes(a.get("sizes", "1e3,1e4,1e5,1e6,1e7"));
  o.budget_s = a.get_int("budget-ms", 40, 1, 3600000) / 1000.0;
  const int64_t threads = a.get_int("threads", 2, 1, kMaxThreads);
  o.bench = !a.has("no-bench");
  o.scalars = scalar_options(a);
  const auto t0 = Clock::now();

  auto reg = Registry::open(registry_dir(a));
  reg->set_num_threads(static_cast<int>(threads));
  cache::CompileCache cache(cache_dir(a));
  std::vector<std::string> ops = a.has("only") ? a.all("only") : reg->ops();
  std::set<std::string> scalar_names;
  for (const auto& op : ops) {
    for (const auto& in : reg->variants(op).front().inputs) {  // unknown op: error, suggestion
      if (in.role != registry::Input::Role::scalar) continue;
      scalar_names.insert(in.name);
      // Checked now, as bench does: a value outside an op's domain would leave its page
      // unmeasured with the reason only in the HTML.
      auto given = o.scalars.find(in.name);
      if (given == o.scalars.end() || in.domain.empty()) continue;
      const double seen = in.dtype == registry::DType::f32
                              ? static_cast<double>(static_cast<float>(given->second))
                              : given->second;
      if (!registry::ScalarDomain::parse(in.domain).contains(seen)) {
        char text[64];
        std::snprintf(text, sizeof text, "%.9g", given->second);
        throw UsageError("--scalar " + in.name + "=" + text + ": outside " + op + "'s domain " +
                         in.domain + " for it");
      }
    }
  }
  for (const auto& [name, v] : o.scalars) {
    if (!scalar_names.count(name)) {
      throw UsageError("--scalar " + name + ": no reported op has a scalar of that name");
    }
  }

  fs::create_directories(out.parent_path());
  std::string tmpl = (out.parent_path() / ("." + out.filename().string() + ".tmp-XXXXXX")).string();
  if (!mkdtemp(tmpl.data()))
    throw std::runtime_error("cannot create a directory next to " + out.string());
  const fs::path staging = tmpl;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{staging};
  fs::create_directories(staging / "kernels");

  std::vector<OpPage> pages, bandwidth_pages;
  size_t variants = 0, plots = 0;
  for (const auto& op : ops) {
    OpPage page{op, {}, "", "", "", {}};
    for (auto& d : reg->variants(op)) {
      page.variants.push_back(variant_page(std::move(d), cache, staging));
      ++variants;
    }
    if (page.variants.front().d.kind == "bandwidth") {
      bandwidth_pages.push_back(std::move(page));
      continue;
    }
    plots += measure_page(page, *reg, o);
    pages.push_back(std::move(page));
  }

  cache::write_file_atomic(
      (staging / "index.html").string(),
      report_html(*reg, pages, bandwidth_pages, variants, threads, o.sizes.back()));
  cache::write_file_atomic((staging / kMarker).string(), "opforge report\n");
  install_report(staging, out);
  cleanup.dir.clear();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("wrote %s/index.html: %zu ops, %zu variants, %zu throughput plots (%.1f s)\n",
              out.string().c_str(), pages.size(), variants, plots, secs);
  return 0;
}

Command report_command() {
  return {
      {"report",
       "",
       "Write a static HTML page of the whole op library: descriptors, schedules, links to "
       "stmt_html and assembly, GB/s against N next to the bandwidth kernel",
       {registry_option(),
        cache_option(),
        {"html", "DIR", "where the report goes (replaces an earlier report there)"},
        {"only", "OP", "report only this op (repeatable)", true},
        {"sizes", "LIST", "N values to measure, comma-separated (default 1e3,1e4,1e5,1e6,1e7)"},
        {"budget-ms", "MS", "time per kernel per size (default 40)"},
        {"scalar", "NAME=VALUE",
         "a scalar's value for every op that has it (default: 0.5, integers 1, as bench)", true},
        {"threads", "N", "threads for the kernels (default 2)"},
        {"no-bench", "", "leave out the measurements (descriptors and schedules only)"}}},
      cmd_report};
}

}  // namespace opforge::cli
