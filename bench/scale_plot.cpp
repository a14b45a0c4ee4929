// laggard-bench-plot CSV SVG: draws bench/scale's points (its --csv) as one SVG with four log-log
// panels, with the report's own SVG builder (report/render/render_html_svg.h): CPU time and peak
// memory of `laggard report` against ranks (summaries) and against kernel records (detailed,
// kernels, steps and windows series), one line per series and file format, and a dotted line of slope 1
// through each line's first point, so a curve that bends above it grows faster than linearly.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "render_html_svg.h"

namespace {

using laggard::report::html::Svg;

struct Point {
  double x, cpu_s, rss_mib;
};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) out.push_back(cell);
  return out;
}

// (series, format) -> points, read from bench/scale's CSV (its header names the columns).
std::map<std::pair<std::string, std::string>, std::vector<Point>> read_points(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> head = split(line);
  auto col = [&](const char* name) {
    return static_cast<size_t>(std::find(head.begin(), head.end(), name) - head.begin());
  };
  const size_t series = col("series"), format = col("format"), ranks = col("ranks"), records = col("records"),
               cpu = col("cpu_s"), rss = col("rss_mib");
  std::map<std::pair<std::string, std::string>, std::vector<Point>> out;
  while (std::getline(in, line)) {
    const std::vector<std::string> c = split(line);  // trailing empty cells are not there
    if (c.size() <= std::max({series, format, ranks, records, cpu, rss})) continue;
    const bool by_ranks = c[series] == "ranks";
    out[{c[series], c[format]}].push_back(
        {std::stod(by_ranks ? c[ranks] : c[records]), std::stod(c[cpu]), std::stod(c[rss])});
  }
  for (auto& [key, points] : out)
    std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
  return out;
}

std::string number(double v) {
  if (v >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:g}k", v / 1e3);
  return fmt::format("{:g}", v);
}

const char* colour(const std::string& series, const std::string& format) {
  static const std::map<std::string, std::pair<const char*, const char*>> kColours = {
      {"ranks", {"#1f77b4", "#aec7e8"}},   {"detailed", {"#d62728", "#ff9896"}},
      {"kernels", {"#2ca02c", "#98df8a"}}, {"steps", {"#9467bd", "#c5b0d5"}},
      {"windows", {"#8c564b", "#c49c94"}}};
  auto it = kColours.find(series);
  if (it == kColours.end()) return "#7f7f7f";
  return format == "json" ? it->second.second : it->second.first;
}

// One log-log panel at (x0, y0) of size w x h: `value` of every series whose points `take`.
template <class Take, class Value>
void panel(Svg& svg, double x0, double y0, double w, double h, const char* title, const char* x_label,
           const std::map<std::pair<std::string, std::string>, std::vector<Point>>& all, Take take, Value value) {
  double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0;
  for (const auto& [key, points] : all)
    if (take(key.first))
      for (const Point& p : points) {
        xmin = std::min(xmin, p.x), xmax = std::max(xmax, p.x);
        ymin = std::min(ymin, value(p)), ymax = std::max(ymax, value(p));
      }
  svg.text(x0 + w / 2, y0 - 8, title, "middle");
  if (!(xmax > 0) || !(ymax > 0)) return;
  const double lx0 = std::floor(std::log10(xmin)), lx1 = std::ceil(std::log10(xmax) + 1e-9);
  const double ly0 = std::floor(std::log10(std::max(ymin, 1e-3))), ly1 = std::ceil(std::log10(ymax) + 1e-9);
  auto px = [&](double x) { return x0 + (std::log10(x) - lx0) / std::max(lx1 - lx0, 1.0) * w; };
  auto py = [&](double y) { return y0 + h - (std::log10(std::max(y, 1e-3)) - ly0) / std::max(ly1 - ly0, 1.0) * h; };
  for (double e = lx0; e <= lx1; ++e) {
    svg.line(px(std::pow(10, e)), y0, px(std::pow(10, e)), y0 + h, "#ddd");
    svg.text(px(std::pow(10, e)), y0 + h + 14, number(std::pow(10, e)), "middle");
  }
  for (double e = ly0; e <= ly1; ++e) {
    svg.line(x0, py(std::pow(10, e)), x0 + w, py(std::pow(10, e)), "#ddd");
    svg.text(x0 - 4, py(std::pow(10, e)) + 4, number(std::pow(10, e)), "end");
  }
  svg.text(x0 + w / 2, y0 + h + 30, x_label, "middle");
  for (const auto& [key, points] : all) {
    if (!take(key.first) || points.empty()) continue;
    std::vector<std::pair<double, double>> line, linear;
    for (const Point& p : points) {
      line.emplace_back(px(p.x), py(value(p)));
      linear.emplace_back(px(p.x), py(value(points.front()) * p.x / points.front().x));
    }
    const std::string name = key.first + " " + key.second;
    svg.polyline(linear, colour(key.first, key.second), 1, name + ": linear from the first point", "2,3");
    svg.polyline(line, colour(key.first, key.second), 2, name);
    svg.text(line.back().first + 4, line.back().second + 4, name, "start");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: laggard-bench-plot POINTS.csv OUT.svg (bench/scale --csv)\n");
    return 2;
  }
  const auto all = read_points(argv[1]);
  const double w = 300, h = 200;
  Svg svg("scale", 900, 600, "laggard report: CPU time and peak memory against input size (log-log)");
  auto by_ranks = [](const std::string& s) { return s == "ranks"; };
  auto by_records = [](const std::string& s) { return s != "ranks"; };
  auto cpu = [](const Point& p) { return p.cpu_s; };
  auto rss = [](const Point& p) { return p.rss_mib; };
  panel(svg, 70, 40, w, h, "CPU s (user + sys), summaries", "ranks", all, by_ranks, cpu);
  panel(svg, 520, 40, w, h, "peak RSS MiB, summaries", "ranks", all, by_ranks, rss);
  panel(svg, 70, 340, w, h, "CPU s (user + sys), per-kernel records", "kernel records", all, by_records, cpu);
  panel(svg, 520, 340, w, h, "peak RSS MiB, per-kernel records", "kernel records", all, by_records, rss);
  std::string text = svg.finish();
  text.insert(text.find('>') + 1, "<style>text{font:11px sans-serif;fill:#333}</style><rect width=\"100%\" "
                                  "height=\"100%\" fill=\"white\"/>");  // a standalone file: no page CSS
  std::ofstream out(argv[2]);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" << text << "\n";
  return out ? 0 : 1;
}
