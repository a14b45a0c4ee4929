#include "render_html_svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "render_html.h"

namespace laggard::report::html {
namespace {

constexpr int kLabelWidth = 220;   // left column of bar charts
constexpr int kRowHeight = 18;
constexpr int kValueWidth = 90;    // right column of bar charts

std::string attr(std::string_view s) { return escape_html(s); }

std::string coord(double v) { return fmt::format("{:.1f}", std::isfinite(v) ? v : 0.0); }

std::string points_text(const std::vector<std::pair<double, double>>& points) {
  std::string out;
  for (const auto& [x, y] : points) out += coord(x) + "," + coord(y) + " ";
  return out;
}

// Round axis maximum: 1, 2 or 5 times a power of ten, at least v.
double nice_max(double v) {
  if (!(v > 0)) return 1;
  double p = std::pow(10, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

}  // namespace

std::string duration(double ns) {
  double a = std::fabs(ns);
  if (a >= 1e9) return fmt::format("{:.3g} s", ns / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g} ms", ns / 1e6);
  if (a >= 1e3) return fmt::format("{:.3g} µs", ns / 1e3);
  return fmt::format("{:.3g} ns", ns);
}

std::string shorten(std::string_view s, size_t chars) {
  size_t seen = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) {
      if (seen == chars) break;
      ++seen;
    }
  }
  if (i >= s.size()) return std::string(s);
  return std::string(s.substr(0, i)) + "…";
}

Svg::Svg(std::string_view id, int width, int height, std::string_view label) {
  body_ = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">",
      attr(id), width, height, width, height, attr(label));
}

Svg& Svg::rect(double x, double y, double w, double h, std::string_view fill, std::string_view title) {
  body_ += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"", coord(x), coord(y),
                       coord(std::max(0.0, w)), coord(std::max(0.0, h)), attr(fill));
  body_ += title.empty() ? "/>" : fmt::format("><title>{}</title></rect>", escape_html(title));
  return *this;
}

Svg& Svg::line(double x1, double y1, double x2, double y2, std::string_view stroke, double width,
               std::string_view dash) {
  body_ += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"{}/>",
                       coord(x1), coord(y1), coord(x2), coord(y2), attr(stroke), coord(width),
                       dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", attr(dash)));
  return *this;
}

Svg& Svg::polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double width,
                   std::string_view title, std::string_view dash) {
  body_ += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{} points=\"{}\"", attr(stroke),
                       coord(width), dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", attr(dash)),
                       points_text(points));
  body_ += title.empty() ? "/>" : fmt::format("><title>{}</title></polyline>", escape_html(title));
  return *this;
}

Svg& Svg::polygon(const std::vector<std::pair<double, double>>& points, std::string_view fill, double opacity) {
  body_ += fmt::format("<polygon fill=\"{}\" fill-opacity=\"{}\" stroke=\"none\" points=\"{}\"/>", attr(fill),
                       coord(opacity), points_text(points));
  return *this;
}

Svg& Svg::text(double x, double y, std::string_view text, std::string_view anchor, std::string_view css_class,
               double rotate_deg) {
  body_ += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\"{}{}>{}</text>", coord(x), coord(y), attr(anchor),
                       css_class.empty() ? "" : fmt::format(" class=\"{}\"", attr(css_class)),
                       rotate_deg == 0 ? "" : fmt::format(" transform=\"rotate({} {} {})\"", coord(rotate_deg), coord(x), coord(y)),
                       escape_html(text));
  return *this;
}

std::string Svg::finish() { return std::move(body_) + "</svg>"; }

std::string bar_chart(std::string_view id, const std::vector<Bar>& bars, std::string (*value_text)(double),
                      int width) {
  double top = 0;
  for (const Bar& b : bars) top = std::max(top, b.value);
  top = top > 0 ? top : 1;
  const int height = static_cast<int>(bars.size()) * kRowHeight + 4;
  const double plot = width - kLabelWidth - kValueWidth;
  Svg svg(id, width, height, "bar chart");
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    double y = 2 + static_cast<double>(i) * kRowHeight;
    svg.text(kLabelWidth - 6, y + 13, shorten(b.label, 34), "end");
    svg.rect(kLabelWidth, y + 2, plot * std::max(0.0, b.value) / top, kRowHeight - 4,
             b.highlight ? "#d62728" : "#4c78a8", b.title.empty() ? b.label + ": " + value_text(b.value) : b.title);
    svg.text(kLabelWidth + plot + 6, y + 13, value_text(b.value), "start", "num");
  }
  return svg.finish();
}

std::string legend(const std::vector<Series>& series) {
  std::string out = "<div class=\"legend\">";
  for (const Series& s : series)
    out += fmt::format("<span><i style=\"background:{}\"></i>{}</span>", attr(s.colour), escape_html(s.name));
  return out + "</div>";
}

std::string stacked_share_chart(std::string_view id, const std::vector<Series>& series,
                                const std::vector<StackRow>& rows, int width) {
  const int height = static_cast<int>(rows.size()) * kRowHeight + 4;
  const double plot = width - kLabelWidth - 10;
  Svg svg(id, width, height, "stacked shares");
  for (size_t i = 0; i < rows.size(); ++i) {
    const StackRow& r = rows[i];
    double y = 2 + static_cast<double>(i) * kRowHeight, sum = 0, x = kLabelWidth;
    for (double p : r.parts) sum += std::max(0.0, p);
    svg.text(kLabelWidth - 6, y + 13, shorten(r.label, 34), "end");
    for (size_t k = 0; k < r.parts.size() && k < series.size(); ++k) {
      double share = sum > 0 ? std::max(0.0, r.parts[k]) / sum : 0;
      svg.rect(x, y + 2, plot * share, kRowHeight - 4, series[k].colour,
               fmt::format("{}: {} {:.1f} %", r.title.empty() ? r.label : r.title, series[k].name, 100 * share));
      x += plot * share;
    }
  }
  return legend(series) + svg.finish();
}

std::string histogram_chart(std::string_view id, const std::vector<double>& edges,
                            const std::vector<HistogramSeries>& series, int width) {
  const int height = 220, left = 50, bottom = 30, top_pad = 10;
  const size_t bins = edges.size() > 1 ? edges.size() - 1 : 0;
  double peak = 0;
  for (const auto& s : series)
    for (double f : s.fractions) peak = std::max(peak, f);
  peak = nice_max(peak);
  const double plot_w = width - left - 10, plot_h = height - bottom - top_pad;
  Svg svg(id, width, height, "duration histogram");
  svg.line(left, top_pad + plot_h, left + plot_w, top_pad + plot_h, "#888");
  svg.line(left, top_pad, left, top_pad + plot_h, "#888");
  svg.text(left - 4, top_pad + 10, fmt::format("{:.0f}%", 100 * peak), "end", "num");
  svg.text(left - 4, top_pad + plot_h, "0", "end", "num");
  if (bins == 0) return svg.finish();
  const double bin_w = plot_w / static_cast<double>(bins);
  for (size_t b = 0; b <= bins; b += std::max<size_t>(1, bins / 6))
    svg.text(left + bin_w * static_cast<double>(b), height - 10, duration(edges[b]), "middle", "num");
  for (const auto& s : series) {
    std::vector<std::pair<double, double>> pts;
    for (size_t b = 0; b < bins && b < s.fractions.size(); ++b) {
      double y = top_pad + plot_h - plot_h * s.fractions[b] / peak;
      pts.emplace_back(left + bin_w * static_cast<double>(b), y);
      pts.emplace_back(left + bin_w * static_cast<double>(b + 1), y);
    }
    svg.polyline(pts, s.series.colour, 2, s.series.name);
  }
  return legend([&] {
           std::vector<Series> v;
           for (const auto& s : series) v.push_back(s.series);
           return v;
         }()) +
         svg.finish();
}

std::string line_chart(std::string_view id, const std::vector<std::tuple<double, double, double>>& band,
                       const std::vector<LineSeries>& lines, bool first_dashed, const std::vector<Span>& spans,
                       int width, int height) {
  const int left = 70, bottom = 30, top_pad = 10, right = 10;
  double x_lo = INFINITY, x_hi = -INFINITY, y_hi = 0;
  auto see = [&](double x, double y) {
    x_lo = std::min(x_lo, x);
    x_hi = std::max(x_hi, x);
    y_hi = std::max(y_hi, y);
  };
  for (const auto& [x, lo, hi] : band) see(x, hi);
  for (const auto& l : lines)
    for (const auto& [x, y] : l.points) see(x, y);
  Svg svg(id, width, height, "step time per rank");
  if (!(x_hi >= x_lo)) return svg.finish();
  if (x_hi == x_lo) x_hi = x_lo + 1;
  y_hi = nice_max(y_hi);
  const double plot_w = width - left - right, plot_h = height - bottom - top_pad;
  auto px = [&](double x) { return left + plot_w * (x - x_lo) / (x_hi - x_lo); };
  auto py = [&](double y) { return top_pad + plot_h - plot_h * y / y_hi; };
  for (const Span& s : spans)
    svg.rect(px(std::max(x_lo, s.from)), top_pad, px(std::min(x_hi, s.to)) - px(std::max(x_lo, s.from)), plot_h,
             s.colour, s.title);
  for (int k = 0; k <= 4; ++k) {
    double y = y_hi * k / 4;
    svg.line(left, py(y), left + plot_w, py(y), "#e3e3e3");
    svg.text(left - 4, py(y) + 4, duration(y), "end", "num");
  }
  for (int k = 0; k <= 5; ++k) {
    double x = x_lo + (x_hi - x_lo) * k / 5;
    svg.text(px(x), height - 10, fmt::format("step {:.0f}", x), "middle", "num");
  }
  if (!band.empty()) {
    std::vector<std::pair<double, double>> poly;
    for (const auto& [x, lo, hi] : band) poly.emplace_back(px(x), py(hi));
    for (auto it = band.rbegin(); it != band.rend(); ++it) poly.emplace_back(px(std::get<0>(*it)), py(std::get<1>(*it)));
    svg.polygon(poly, "#4c78a8", 0.18);
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& [x, y] : lines[i].points) pts.emplace_back(px(x), py(y));
    bool dashed = i == 0 && first_dashed;
    svg.polyline(pts, lines[i].series.colour, dashed ? 1.5 : 1.8, lines[i].series.name, dashed ? "5 3" : "");
  }
  std::vector<Series> keys;
  for (const auto& l : lines) keys.push_back(l.series);
  return legend(keys) + svg.finish();
}

}  // namespace laggard::report::html
