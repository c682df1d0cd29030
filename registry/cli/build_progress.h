// `opforge build`'s output on stdout: one line per finished variant, rewritten in place
// (\r) when stdout is a terminal, one plain line each when it is not (logs, pipes), nothing
// with --quiet; then a one-line summary. Calls come one at a time (BuildOptions::on_variant).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

#include "registry/builder/registry_builder.h"

namespace opforge::cli {

class BuildProgress {
 public:
  enum class Style { quiet, lines, overwrite };
  // overwrite when `fd` is a terminal and no --explain (explanations must stay on screen).
  static Style style_for(bool quiet, bool explain, int fd);

  BuildProgress(Style style, bool explain, std::FILE* out, int fd);
  void variant(const builder::VariantResult& v, size_t done, size_t total);
  void summary(const builder::BuildReport& r);
  void abort();  // the build failed: end an overwritten line so the error starts a new one

 private:
  Style style_;
  bool explain_;
  std::FILE* out_;
  size_t width_;       // terminal columns (overwrite style)
  bool open_ = false;  // an overwritable line is on screen
};

// "[37/140] apply_adam__..._avx512  miss  2.1 s"
std::string progress_line(const builder::VariantResult& v, size_t done, size_t total);
// "built 141 kernels (140 variants + runtime): 120 hits, 21 misses, compile 35.2 s, wall
// 12.3 s, registry DIR"
std::string summary_line(const builder::BuildReport& r);

}  // namespace opforge::cli
