#include "registry/cli/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace opforge::cli {

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string short_count(double v) {
  const double e = std::round(std::log10(v));
  if (std::fabs(v - std::pow(10.0, e)) < 1e-6 * v && e >= 3) {
    return "1e" + std::to_string(static_cast<int>(e));
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A round upper bound for the y axis: 1, 2 or 5 times a power of ten.
double nice_ceiling(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

}  // namespace

std::string svg_line_plot(const std::vector<PlotSeries>& series, const std::string& x_label,
                          const std::string& y_label) {
  double xmin = INFINITY, xmax = 0, ymax = 0;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      if (x <= 0 || !std::isfinite(y)) continue;
      xmin = std::min(xmin, x), xmax = std::max(xmax, x), ymax = std::max(ymax, y);
    }
  }
  if (xmax == 0) return "";
  const double W = 560, H = 300, left = 56, right = 150, top = 14, bottom = 44;
  const double lo = std::floor(std::log10(xmin)),
               hi = std::max(lo + 1, std::ceil(std::log10(xmax)));
  const double ytop = nice_ceiling(ymax * 1.05);
  auto px = [&](double x) { return left + (std::log10(x) - lo) / (hi - lo) * (W - left - right); };
  auto py = [&](double y) { return top + (1 - y / ytop) * (H - top - bottom); };

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) + "\" height=\"" +
                  num(H) + "\" viewBox=\"0 0 " + num(W) + " " + num(H) +
                  "\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\">\n";
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(W - left - right) +
       "\" height=\"" + num(H - top - bottom) + "\" fill=\"#fbfbfb\" stroke=\"#999\"/>\n";
  for (double e = lo; e <= hi; ++e) {
    const double x = px(std::pow(10.0, e));
    s += "<line x1=\"" + num(x) + "\" y1=\"" + num(top) + "\" x2=\"" + num(x) + "\" y2=\"" +
         num(H - bottom) + "\" stroke=\"#e3e3e3\"/>";
    s += "<text x=\"" + num(x) + "\" y=\"" + num(H - bottom + 14) + "\" text-anchor=\"middle\">" +
         short_count(std::pow(10.0, e)) + "</text>\n";
  }
  for (int k = 0; k <= 4; ++k) {
    const double v = ytop * k / 4, y = py(v);
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(W - right) +
         "\" y2=\"" + num(y) + "\" stroke=\"#e3e3e3\"/>";
    char label[32];
    std::snprintf(label, sizeof label, "%g", v);
    s += "<text x=\"" + num(left - 4) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" + label +
         "</text>\n";
  }
  s += "<text x=\"" + num((left + W - right) / 2) + "\" y=\"" + num(H - 8) +
       "\" text-anchor=\"middle\">" + html_escape(x_label) + "</text>\n";
  s += "<text transform=\"translate(14," + num((top + H - bottom) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + html_escape(y_label) + "</text>\n";
  int row = 0;
  for (const auto& ser : series) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& p : ser.points) {
      if (p.first > 0 && std::isfinite(p.second)) pts.push_back(p);
    }
    if (pts.empty()) continue;
    std::sort(pts.begin(), pts.end());
    const std::string dash = ser.dashed ? " stroke-dasharray=\"6 4\"" : "";
    std::string poly;
    for (const auto& [x, y] : pts) poly += num(px(x)) + "," + num(py(y)) + " ";
    s += "<polyline fill=\"none\" stroke=\"" + ser.color + "\" stroke-width=\"2\"" + dash +
         " points=\"" + poly + "\"/>\n";
    for (const auto& [x, y] : pts) {
      char tip[96];
      std::snprintf(tip, sizeof tip, "N = %.0f: %.2f", x, y);
      s += "<circle cx=\"" + num(px(x)) + "\" cy=\"" + num(py(y)) + "\" r=\"3\" fill=\"" +
           ser.color + "\"><title>" + html_escape(ser.name) + ", " + tip + " " +
           html_escape(y_label) + "</title></circle>";
    }
    const double ly = top + 12 + 18 * row++;
    s += "\n<line x1=\"" + num(W - right + 10) + "\" y1=\"" + num(ly - 4) + "\" x2=\"" +
         num(W - right + 34) + "\" y2=\"" + num(ly - 4) + "\" stroke=\"" + ser.color +
         "\" stroke-width=\"2\"" + dash + "/><text x=\"" + num(W - right + 38) + "\" y=\"" +
         num(ly) + "\">" + html_escape(ser.name) + "</text>\n";
  }
  return s + "</svg>";
}

}  // namespace opforge::cli
