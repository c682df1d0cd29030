#include "registry/cli/build_progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include "registry/cache/cache_config.h"

namespace opforge::cli {

namespace {

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

size_t terminal_width(int fd) {
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

}  // namespace

BuildProgress::Style BuildProgress::style_for(bool quiet, bool explain, int fd) {
  if (quiet) return Style::quiet;
  return isatty(fd) && !explain ? Style::overwrite : Style::lines;
}

BuildProgress::BuildProgress(Style style, bool explain, std::FILE* out, int fd)
    : style_(style), explain_(explain), out_(out), width_(terminal_width(fd)) {}

std::string progress_line(const builder::VariantResult& v, size_t done, size_t total) {
  const std::string n = std::to_string(total);
  std::string count = std::to_string(done);
  count.insert(0, n.size() - std::min(n.size(), count.size()), ' ');
  return "[" + count + "/" + n + "] " + v.variant + "  " + (v.hit ? "hit " : "miss") + "  " +
         format("%.1f s", v.compile_ms / 1000.0);
}

std::string summary_line(const builder::BuildReport& r) {
  size_t hits = r.runtime.hit;
  double compile_ms = r.runtime.hit ? 0 : r.runtime.compile_ms;
  for (const auto& v : r.variants) {
    hits += v.hit;
    if (!v.hit) compile_ms += v.compile_ms;
  }
  const size_t kernels = r.variants.size() + 1;
  std::string s = "built " + std::to_string(kernels) + " kernels (" +
                  std::to_string(r.variants.size()) +
                  " variants + runtime): " + std::to_string(hits) + " hits, " +
                  std::to_string(kernels - hits) + " misses";
  if (r.cache_mode == builder::CacheMode::disabled) s += " (cache disabled)";
  if (r.cache_mode == builder::CacheMode::recache) s += " (--recache)";
  return s + ", compile " + format("%.1f s", compile_ms / 1000.0) + ", wall " +
         format("%.1f s", r.seconds) + ", registry " + r.registry_dir;
}

void BuildProgress::variant(const builder::VariantResult& v, size_t done, size_t total) {
  if (style_ == Style::quiet) return;
  std::string line = progress_line(v, done, total);
  if (style_ == Style::overwrite) {
    // Cut to the terminal's width: a wrapped line would not be overwritten by \r.
    if (line.size() >= width_) line.resize(width_ - 1);
    std::fprintf(out_, "\r%s\033[K", line.c_str());
    open_ = true;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
    if (explain_) {
      const std::string why = !v.hit ? "miss: " + v.why
                              : v.copied_from.empty()
                                  ? "hit: same key as an entry in the cache"
                                  : "hit: same key as an entry in " + v.copied_from + ", copied";
      std::fprintf(out_, "    key %.16s  %s\n", v.key.c_str(), why.c_str());
    }
  }
  std::fflush(out_);
}

void BuildProgress::abort() {
  if (open_) std::fprintf(out_, "\n");
  open_ = false;
  std::fflush(out_);
}

void BuildProgress::summary(const builder::BuildReport& r) {
  if (style_ == Style::quiet) return;
  if (open_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s\n", summary_line(r).c_str());
  if (!r.tuning_path.empty()) {
    std::fprintf(out_, "tuning: %s set the params of %zu variants\n", r.tuning_path.c_str(),
                 r.tuned_variants);
  }
  if (r.pruned > 0) {
    std::fprintf(out_, "cache: removed %llu least recently used entries (max-size %s)\n",
                 static_cast<unsigned long long>(r.pruned),
                 cache::format_limit(r.max_cache_size).c_str());
  }
  if (r.cache_over) {
    std::fprintf(out_,
                 "cache: warning: this registry's entries alone exceed max-size %s; kept "
                 "them (raise it: opforge cache config max-size SIZE)\n",
                 cache::format_limit(r.max_cache_size).c_str());
  }
  std::fflush(out_);
}

}  // namespace opforge::cli
