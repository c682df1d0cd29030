// Pieces of `opforge report --html`: HTML escaping and an inline SVG line plot (log-scale x),
// so the page is self-contained: no scripts, fonts or network.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace opforge::cli {

std::string html_escape(const std::string& text);

struct PlotSeries {
  std::string name;
  std::string color;  // CSS color
  bool dashed = false;
  std::vector<std::pair<double, double>> points;  // (x > 0, y >= 0), any order
};

// A 560x300 SVG: x on a log10 axis with a tick per decade, y linear from 0, a legend, and a
// <title> tooltip on every point. Series without points are left out; no points at all gives
// an empty string.
std::string svg_line_plot(const std::vector<PlotSeries>& series, const std::string& x_label,
                          const std::string& y_label);

}  // namespace opforge::cli
