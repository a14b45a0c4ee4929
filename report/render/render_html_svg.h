// Hand-drawn SVG for the HTML report (render_html.h): a small builder and the four chart kinds
// the report needs (horizontal bars, 100 % stacked bars, histograms on a log axis, step lines
// with a band). Every label passes through escape_html; numbers are formatted here.
#pragma once

#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace laggard::report::html {

// "12.3 ms", "450 µs", "2.1 s": a duration for people.
std::string duration(double ns);
// Cut to at most `chars` characters (UTF-8 aware) with "…" when cut; not escaped.
std::string shorten(std::string_view s, size_t chars);

class Svg {
 public:
  Svg(std::string_view id, int width, int height, std::string_view label);
  Svg& rect(double x, double y, double w, double h, std::string_view fill, std::string_view title = {});
  Svg& line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1,
            std::string_view dash = {});
  Svg& polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double width,
                std::string_view title = {}, std::string_view dash = {});
  Svg& polygon(const std::vector<std::pair<double, double>>& points, std::string_view fill, double opacity);
  Svg& text(double x, double y, std::string_view text, std::string_view anchor = "start",
            std::string_view css_class = {}, double rotate_deg = 0);
  std::string finish();

 private:
  std::string body_;
};

struct Bar {
  std::string label;   // untrusted
  double value = 0;
  std::string title;   // tooltip, untrusted
  bool highlight = false;
};
// value_text(value) labels each bar.
std::string bar_chart(std::string_view id, const std::vector<Bar>& bars, std::string (*value_text)(double),
                      int width = 720);

struct Series {
  std::string name;
  std::string colour;
};
std::string legend(const std::vector<Series>& series);

struct StackRow {
  std::string label;           // untrusted
  std::vector<double> parts;   // one per series; drawn as shares of their sum
  std::string title;           // untrusted
};
std::string stacked_share_chart(std::string_view id, const std::vector<Series>& series,
                                const std::vector<StackRow>& rows, int width = 720);

struct HistogramSeries {
  Series series;
  std::vector<double> fractions;  // one per bin, summing to 1 (or all 0)
};
// edges: bin edges in ns (bins + 1 of them, log-spaced), drawn on a log axis.
std::string histogram_chart(std::string_view id, const std::vector<double>& edges,
                            const std::vector<HistogramSeries>& series, int width = 720);

struct LineSeries {
  Series series;
  std::vector<std::pair<double, double>> points;  // (step, ns)
};
struct Span {
  double from = 0, to = 0;  // steps
  std::string colour, title;
};
// band: (step, low ns, high ns) drawn as a shaded area; lines over it, the first one dashed when
// `first_dashed` (the median); spans: step ranges shaded behind everything (transient findings).
std::string line_chart(std::string_view id, const std::vector<std::tuple<double, double, double>>& band,
                       const std::vector<LineSeries>& lines, bool first_dashed, const std::vector<Span>& spans = {},
                       int width = 720, int height = 280);

}  // namespace laggard::report::html
