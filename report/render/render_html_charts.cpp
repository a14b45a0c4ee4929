// The charts of the HTML report (render_html_parts.h). Each stays bounded in size whatever the
// number of ranks: the heat map bins ranks, bar charts show the top N plus a line about the
// others, the step-time chart buckets steps and draws all ranks as one band.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "render_html_parts.h"
#include "render_html_svg.h"

namespace laggard::report::html {
namespace {

constexpr const char* kHighlightColours[] = {"#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                                             "#bcbd22", "#1f77b4"};

std::string esc(std::string_view s) { return escape_html(s); }

std::string ms_value(double ns) { return duration(ns); }
std::string share_value(double x) { return fmt::format("{:.0f} %", 100 * x); }

std::string note(const std::string& text) { return "<p class=\"muted\">" + text + "</p>"; }

// Sections worst first: those named by findings and stragglers, then by lowest relative score.
std::vector<const SectionSummary*> worst_sections(const Page& p, size_t most) {
  std::map<std::string, const SectionSummary*> by_name;
  for (const SectionSummary& s : p.scores.sections) by_name.emplace(s.name, &s);
  std::vector<const SectionSummary*> out;
  auto add = [&](const std::string& name) {
    auto it = by_name.find(name);
    if (it != by_name.end() && out.size() < most && std::find(out.begin(), out.end(), it->second) == out.end())
      out.push_back(it->second);
  };
  for (const Finding& f : p.analyses.verdict.findings) add(f.section);
  for (const Straggler& s : p.scores.stragglers) add(s.section);
  std::vector<const SectionSummary*> rest;
  for (const SectionSummary& s : p.scores.sections) rest.push_back(&s);
  std::stable_sort(rest.begin(), rest.end(), [](auto* a, auto* b) {
    return a->worst_relative != b->worst_relative ? a->worst_relative < b->worst_relative
                                                  : a->median_median_ns > b->median_median_ns;
  });
  for (const SectionSummary* s : rest) add(s->name);
  return out;
}

struct Rgb {
  double r, g, b;
};
Rgb mix(Rgb a, Rgb b, double t) { return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t}; }

}  // namespace

// A diverging palette (ColorBrewer's RdYlBu, Brewer 2002) around the threshold: blue at 1 (as fast as
// the fastest rank), light blue halfway down to the threshold, yellow at it, orange then dark red a
// quarter below it. No grey anywhere on it: a cell without a score is white with a grey cross, so a
// healthy score (0.9) never looks like no score.
std::string score_colour(double score, double threshold) {
  const double t = std::clamp(threshold, 0.0, 1.0);
  struct Stop {
    double at;
    Rgb c;
  };
  const Stop stops[] = {{t - 0.25, {165, 0, 38}}, {t - 0.125, {244, 109, 67}}, {t, {254, 224, 144}},
                        {t + (1 - t) / 2, {171, 217, 233}}, {1, {69, 117, 180}}};
  Rgb c = stops[0].c;
  if (score >= 1) c = stops[4].c;
  for (size_t i = 0; i + 1 < std::size(stops); ++i)
    if (score >= stops[i].at && score < stops[i + 1].at)
      c = mix(stops[i].c, stops[i + 1].c, (score - stops[i].at) / std::max(1e-9, stops[i + 1].at - stops[i].at));
  return fmt::format("#{:02x}{:02x}{:02x}", static_cast<int>(c.r), static_cast<int>(c.g), static_cast<int>(c.b));
}

namespace {

constexpr int kScaleWidth = 300, kScaleHeight = 46;

// No score (a section the rank never ran, or too few samples): white with a grey cross.
void no_score_cell(Svg& svg, double x, double y, double w, double h, const std::string& title) {
  svg.rect(x, y, w, h, "#ffffff", title);
  svg.line(x, y, x + w, y + h, "#9a9a9a", 0.8);
  svg.line(x, y + h, x + w, y, "#9a9a9a", 0.8);
}

// The colour scale under the map: scores from a quarter below the threshold to 1, the threshold
// marked, and the "no score" swatch.
void colour_scale(Svg& svg, double x, double y, double threshold) {
  const double lo = std::max(0.0, threshold - 0.25), steps = 60, step_w = kScaleWidth / steps;
  for (int i = 0; i < steps; ++i) {
    const double score = lo + (1 - lo) * (i + 0.5) / steps;
    svg.rect(x + i * step_w, y, step_w + 0.5, 12, score_colour(score, threshold));
  }
  auto tick = [&](double score, const std::string& label) {
    const double at = x + kScaleWidth * (score - lo) / std::max(1e-9, 1 - lo);
    svg.line(at, y - 2, at, y + 15, "#333", 1);
    svg.text(at, y + 27, label, "middle");
  };
  tick(lo, fmt::format("≤ {:.2f}", lo));
  tick(threshold, fmt::format("{:.2f} threshold", threshold));
  tick(1, "1.00");
  no_score_cell(svg, x + kScaleWidth + 24, y, 14, 12, "no score");
  svg.text(x + kScaleWidth + 44, y + 10, "no score");
}

// One score per (rank index, column); no value: no score.
using ScoreOf = std::function<std::optional<double>(size_t rank_index, size_t column)>;

std::string heat_map(const Page& p, std::string_view id, const std::vector<std::string>& columns, const ScoreOf& score_of) {
  const size_t n = p.scores.ranks.size();
  const size_t bin = (n + p.options.heat_rows - 1) / std::max<size_t>(1, p.options.heat_rows);
  const size_t rows = (n + bin - 1) / bin;
  const double threshold = p.scores.options.relative_threshold;
  const int label_w = 150, header_h = 130;
  const double cell_w = std::min(44.0, 560.0 / static_cast<double>(columns.size()));
  const double cell_h = std::clamp(520.0 / static_cast<double>(rows), 4.0, 22.0);
  const int width = std::max(label_w + static_cast<int>(cell_w * static_cast<double>(columns.size())) + 20,
                             label_w + kScaleWidth + 140);
  const double map_h = cell_h * static_cast<double>(rows);
  Svg svg(id, width, header_h + static_cast<int>(map_h) + 4 + kScaleHeight, "rank by section score heat map");
  for (size_t c = 0; c < columns.size(); ++c)
    svg.text(label_w + cell_w * (static_cast<double>(c) + 0.6), header_h - 6, shorten(columns[c], 22), "start", {},
             -60);
  const size_t label_every = std::max<size_t>(1, static_cast<size_t>(std::ceil(12.0 / cell_h)));
  for (size_t row = 0; row < rows; ++row) {
    const size_t first = row * bin, last = std::min(n, first + bin) - 1;
    const double y = header_h + cell_h * static_cast<double>(row);
    const int first_rank = p.scores.ranks[first].rank, last_rank = p.scores.ranks[last].rank;
    std::string label = bin == 1 ? p.rank_label(first_rank) : fmt::format("ranks {}–{}", first_rank, last_rank);
    if (row % label_every == 0) svg.text(label_w - 6, y + std::min(cell_h, 12.0), shorten(label, 24), "end");
    for (size_t c = 0; c < columns.size(); ++c) {
      std::optional<double> worst;
      int worst_rank = -1;
      size_t scored = 0;
      for (size_t i = first; i <= last; ++i) {
        std::optional<double> v = score_of(i, c);
        if (!v) continue;
        ++scored;
        if (!worst || *v < *worst) {
          worst = v;
          worst_rank = p.scores.ranks[i].rank;
        }
      }
      std::string title =
          !worst ? fmt::format("{} · {}: no score", label, columns[c])
          : bin == 1
              ? fmt::format("{} · {}: relative score {:.3f}", label, columns[c], *worst)
              : fmt::format("{} · {}: worst rank {} score {:.3f} ({} ranks scored)", label, columns[c], worst_rank,
                            *worst, scored);
      const double x = label_w + cell_w * static_cast<double>(c), w = cell_w - 1, h = cell_h - (cell_h > 6 ? 1 : 0);
      if (worst) svg.rect(x, y, w, h, score_colour(*worst, threshold), title);
      else no_score_cell(svg, x, y, w, h, title);
    }
  }
  colour_scale(svg, label_w, header_h + map_h + 14, threshold);
  std::string out = svg.finish();
  if (bin > 1)
    out += note(fmt::format("{} ranks in {} rows of {} consecutive ranks; each cell shows the worst score of its row "
                            "(hover for the rank).", n, rows, bin));
  return out;
}

}  // namespace

std::string heat_map_section(const Page& p) {
  std::string out =
      "<section id=\"heatmap\"><h2>Scores: rank × section</h2>"
      "<p>NVRx relative score of each rank in each NVTX section over the whole run (1: as fast as the fastest rank; "
      "blue when fine, yellow at the threshold, orange to red below it; a white cell with a grey cross: no score, "
      "the rank never ran the section or had fewer than 5 samples of it; the scale is under the map).</p>";
  const auto sections = worst_sections(p, p.options.heat_columns);
  if (sections.empty() || p.scores.ranks.empty()) return out + note("No NVTX section was scored.") + "</section>";
  std::vector<std::string> columns;
  for (const SectionSummary* s : sections) columns.push_back(s->name);
  out += heat_map(p, "heatmap-chart", columns, [&](size_t i, size_t c) -> std::optional<double> {
    const auto& secs = p.scores.ranks[i].sections;
    auto it = secs.find(columns[c]);
    return it == secs.end() ? std::nullopt : it->second.relative;
  });
  if (p.scores.sections.size() > columns.size())
    out += note(fmt::format("The {} worst of {} sections.", columns.size(), p.scores.sections.size()));
  const GpuScoreReport& gpu = p.analyses.gpu;
  if (gpu.any && gpu.ranks.size() == p.scores.ranks.size()) {
    // GPU scores: every compute kernel, then per section (kernels launched in it), sections by worst score.
    std::map<std::string, double> worst_gpu;
    for (const RankGpu& r : gpu.ranks)
      for (const auto& [name, sc] : r.sections)
        if (sc.relative) worst_gpu[name] = std::min(worst_gpu.count(name) ? worst_gpu[name] : 1.0, *sc.relative);
    std::vector<std::pair<std::string, double>> order(worst_gpu.begin(), worst_gpu.end());
    std::stable_sort(order.begin(), order.end(), [](auto& a, auto& b) { return a.second < b.second; });
    std::vector<std::string> gpu_columns{"all kernels"};
    for (const auto& [name, v] : order)
      if (gpu_columns.size() < p.options.heat_columns) gpu_columns.push_back(name);
    out += "<h3>GPU scores (NVRx: compute kernels' medians, weighted by their time)</h3>";
    out += heat_map(p, "gpu-heatmap-chart", gpu_columns, [&](size_t i, size_t c) -> std::optional<double> {
      if (c == 0) return gpu.ranks[i].score.relative;
      auto it = gpu.ranks[i].sections.find(gpu_columns[c]);
      return it == gpu.ranks[i].sections.end() ? std::nullopt : it->second.relative;
    });
  }
  return out + "</section>";
}

std::string step_time_section(const Page& p) {
  std::string out = "<section id=\"steptime\"><h2>Step time per rank</h2>";
  const StepSet& steps = p.analyses.steps;
  size_t most = 0;
  for (const auto& r : steps.per_rank) most = std::max(most, r.size());
  if (most == 0) return out + note("No training steps were found (" + esc(steps.source) + ").") + "</section>";
  const size_t buckets = std::min<size_t>(most, 400), per = (most + buckets - 1) / buckets;
  auto mean_in = [&](size_t rank_index, size_t b) -> double {
    const auto& list = steps.per_rank[rank_index];
    double sum = 0;
    size_t k = 0;
    for (size_t s = b * per; s < std::min(list.size(), (b + 1) * per); ++s, ++k)
      sum += static_cast<double>(list[s].end_ns - list[s].start_ns);
    return k ? sum / static_cast<double>(k) : NAN;
  };
  std::vector<std::tuple<double, double, double>> band;
  LineSeries median{{"median over ranks", "#333"}, {}};
  std::vector<double> values;
  for (size_t b = 0; b * per < most; ++b) {
    values.clear();
    for (size_t i = 0; i < steps.per_rank.size(); ++i)
      if (double v = mean_in(i, b); std::isfinite(v)) values.push_back(v);
    if (values.empty()) continue;
    std::sort(values.begin(), values.end());
    double x = static_cast<double>(b * per);
    band.emplace_back(x, values.front(), values.back());
    median.points.emplace_back(x, values[(values.size() - 1) / 2]);
  }
  std::vector<LineSeries> lines{median};
  for (size_t h = 0; h < p.highlighted.size(); ++h) {
    auto it = p.index_of_rank.find(p.highlighted[h]);
    if (it == p.index_of_rank.end() || it->second >= steps.per_rank.size()) continue;
    LineSeries l{{p.rank_label(p.highlighted[h]), kHighlightColours[h % std::size(kHighlightColours)]}, {}};
    for (size_t b = 0; b * per < most; ++b)
      if (double v = mean_in(it->second, b); std::isfinite(v)) l.points.emplace_back(static_cast<double>(b * per), v);
    lines.push_back(std::move(l));
  }
  std::vector<Span> spans;
  for (const Finding& f : p.analyses.verdict.findings)
    if (f.kind == "transient" && f.first_step >= 0 && spans.size() < 4)
      spans.push_back({static_cast<double>(f.first_step), static_cast<double>(f.last_step + 1), "#fde0c5",
                       fmt::format("{}: {} in steps {}–{}", p.rank_label(f.rank), cause_name(f.cause), f.first_step,
                                   f.last_step)});
  out += fmt::format("<p>Host time of each step ({}); the band spans all {} ranks (fastest to slowest), the dashed "
                     "line is their median, the coloured lines are the ranks the verdict and the scores name{}.</p>",
                     esc(steps.source), steps.per_rank.size(), spans.empty() ? "" : ", shaded: transient findings");
  out += line_chart("steptime-chart", band, lines, true, spans);
  if (per > 1) out += note(fmt::format("{} steps, {} per point (mean).", most, per));
  return out + "</section>";
}

namespace {

struct Durations {
  std::vector<std::pair<double, double>> worst, others;  // (ns, weight)
  bool kernels = false;
};

// Kernel durations of the section when per-kernel GPU records exist, else its NVTX ranges'.
Durations durations_of(const Page& p, const std::string& section, int worst_rank) {
  Durations d;
  std::vector<char> is_section(p.model.strings.size());  // by string id: compared once, not per kernel
  for (uint32_t id = 0; id < is_section.size(); ++id) is_section[id] = p.model.strings.at(id) == section;
  for (const RankData& r : p.model.ranks)
    for (const CaptureWindow& w : r.windows)
      for (const GpuActivity& g : w.gpu)
        if (g.kind == GpuKind::kernel && !g.nccl && g.section < is_section.size() && is_section[g.section]) {
          (r.rank == worst_rank ? d.worst : d.others).emplace_back(static_cast<double>(g.end_ns - g.start_ns), 1.0);
          d.kernels = true;
        }
  if (d.kernels) return d;
  for (const RankData& r : p.model.ranks)
    for (const CaptureWindow& w : r.windows)
      for (const SectionWindow& s : w.sections)
        if (s.name == section)
          for (const Occurrence& o : s.occurrences)
            (r.rank == worst_rank ? d.worst : d.others).emplace_back(static_cast<double>(o.dur_ns), o.weight);
  return d;
}

std::vector<double> fractions(const std::vector<std::pair<double, double>>& values, const std::vector<double>& edges) {
  std::vector<double> f(edges.size() - 1, 0);
  double total = 0;
  const double lo = std::log(edges.front()), span = std::log(edges.back()) - lo;
  for (const auto& [v, w] : values) {
    double pos = span > 0 ? (std::log(std::max(v, edges.front())) - lo) / span : 0;
    size_t b = std::min(f.size() - 1, static_cast<size_t>(std::max(0.0, pos) * static_cast<double>(f.size())));
    f[b] += w;
    total += w;
  }
  for (double& x : f) x = total > 0 ? x / total : 0;
  return f;
}

int worst_rank_of(const Page& p, const SectionSummary& s) {
  for (const Finding& f : p.analyses.verdict.findings)
    if (f.section == s.name) return f.rank;
  for (const Straggler& st : p.scores.stragglers)
    if (st.section == s.name) return st.rank;
  return s.worst_rank;
}

}  // namespace

std::string distributions_section(const Page& p) {
  std::string out =
      "<section id=\"distributions\"><h2>Duration distributions of the worst sections</h2>"
      "<p>Kernel durations launched in each section (its NVTX ranges' durations when no per-kernel GPU records were "
      "kept), the rank that scores worst there against all the others; log time axis.</p>";
  const auto sections = worst_sections(p, p.options.distributions);
  if (sections.empty()) return out + note("No section to show.") + "</section>";
  size_t drawn = 0;
  for (const SectionSummary* s : sections) {
    const int rank = worst_rank_of(p, *s);
    Durations d = durations_of(p, s->name, rank);
    double lo = INFINITY, hi = 0;
    for (const auto* list : {&d.worst, &d.others})
      for (const auto& [v, w] : *list)
        if (v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
    if (!(hi > 0)) continue;
    if (hi <= lo * 1.01) hi = lo * 1.01 + 1;
    const size_t bins = 40;
    std::vector<double> edges;
    for (size_t b = 0; b <= bins; ++b) edges.push_back(lo * std::pow(hi / lo, static_cast<double>(b) / bins));
    out += fmt::format("<h3><span class=\"name\">{}</span>: {} durations, {} vs the other {} ranks</h3>",
                       esc(s->name), d.kernels ? "kernel" : "range", esc(p.rank_label(rank)),
                       p.model.ranks.size() > 0 ? p.model.ranks.size() - 1 : 0);
    out += histogram_chart(fmt::format("dist-{}", drawn++), edges,
                           {{{p.rank_label(rank), "#d62728"}, fractions(d.worst, edges)},
                            {{"other ranks", "#4c78a8"}, fractions(d.others, edges)}});
  }
  if (drawn == 0) out += note("The worst sections have no recorded durations.");
  return out + "</section>";
}

// Blame and arrived-last share per rank, the most blamed first, the top N drawn.
std::string blame_charts(const Page& p, const CommReport& c, const std::set<int>& comm_stragglers) {
  std::vector<const CommRankStats*> ranks;
  for (const CommRankStats& r : c.ranks)
    if (r.collectives) ranks.push_back(&r);
  std::stable_sort(ranks.begin(), ranks.end(), [](auto* a, auto* b) { return a->blame_ns > b->blame_ns; });
  std::vector<Bar> blame, last;
  double others_blame = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const CommRankStats& r = *ranks[i];
    if (i >= p.options.top) {
      others_blame += r.blame_ns;
      continue;
    }
    bool flagged = comm_stragglers.count(r.rank) > 0;
    blame.push_back({p.rank_label(r.rank), r.blame_ns,
                     fmt::format("{}: blamed {}, waited {}, last in {} of {} collectives", p.rank_label(r.rank),
                                 duration(r.blame_ns), duration(r.waited_ns), r.last, r.collectives),
                     flagged});
    last.push_back({p.rank_label(r.rank), static_cast<double>(r.last) / static_cast<double>(r.collectives), {}, flagged});
  }
  std::string out = "<h3>Blame per rank (most first)</h3>" + bar_chart("nccl-blame-chart", blame, ms_value);
  if (ranks.size() > p.options.top)
    out += note(fmt::format("The other {} ranks: {} of blame together.", ranks.size() - p.options.top,
                            duration(others_blame)));
  return out + "<h3>Arrived last (share of its collectives)</h3>" + bar_chart("nccl-last-chart", last, share_value);
}

// Arrival of each rank in the collective where the ranks waited longest, the latest first.
std::string worst_collective_chart(const Page& p, const CollectiveDetail& w) {
  std::vector<size_t> order(w.ranks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return w.arrival_ns[a] > w.arrival_ns[b]; });
  std::vector<Bar> arrivals;
  for (size_t k = 0; k < order.size() && k < p.options.top; ++k) {
    size_t i = order[k];
    bool is_last = std::find(w.last_ranks.begin(), w.last_ranks.end(), w.ranks[i]) != w.last_ranks.end();
    arrivals.push_back({p.rank_label(w.ranks[i]), w.arrival_ns[i],
                        fmt::format("{} arrived {} after the first; waited {}", p.rank_label(w.ranks[i]),
                                    duration(w.arrival_ns[i]), duration(w.wait_ns[i])),
                        is_last});
  }
  return fmt::format("<h3>Arrival skew in the collective with the most waiting: <span class=\"name\">{}</span> #{} "
                     "({} waited in all)</h3>",
                     esc(comm_strings(p.model, p.analyses.comm).strings.at(w.func)), w.seq, duration(w.total_wait_ns)) +
         bar_chart("nccl-arrival-chart", arrivals, ms_value);
}

// How late each rank reaches a step's first collective, from the jitter analysis.
std::string step_lateness_chart(const Page& p, const JitterReport& j, const std::set<int>& comm_stragglers) {
  std::vector<const RankJitter*> late;
  for (const RankJitter& r : j.ranks) late.push_back(&r);
  std::stable_sort(late.begin(), late.end(),
                   [](auto* a, auto* b) { return a->median_arrival_excess_ns > b->median_arrival_excess_ns; });
  std::vector<Bar> bars;
  for (size_t k = 0; k < late.size() && k < p.options.top; ++k)
    bars.push_back({p.rank_label(late[k]->rank), std::max(0.0, late[k]->median_arrival_excess_ns),
                    fmt::format("{}: arrives {} after the median rank at the step's first collective (median over "
                                "steps), last in {:.0f} % of steps",
                                p.rank_label(late[k]->rank), duration(late[k]->median_arrival_excess_ns),
                                100 * late[k]->last_arrival_share),
                    comm_stragglers.count(late[k]->rank) > 0});
  return "<h3>Lateness at each step's first collective (median over steps, vs the median rank)</h3>" +
         bar_chart("nccl-step-arrival-chart", bars, ms_value);
}

std::string nccl_section(const Page& p) {
  const CommReport& c = p.analyses.comm;
  std::string out = "<section id=\"nccl\"><h2>NCCL: arrival skew and blame</h2>";
  if (c.matched == 0)
    return out + note(fmt::format("No NCCL collective matched across ranks ({} operations read).", c.ops)) + "</section>";
  out += fmt::format("<p>{} collectives matched across ranks. <b>Blame</b>: the time the others waited for a rank "
                     "(it arrived last); <b>last</b>: the share of its collectives it arrived last in.</p>",
                     c.matched);
  std::set<int> comm_stragglers;
  for (const Straggler& s : c.stragglers) comm_stragglers.insert(s.rank);
  out += blame_charts(p, c, comm_stragglers);
  if (!c.worst.empty()) out += worst_collective_chart(p, c.worst.front());
  if (p.analyses.jitter.available) out += step_lateness_chart(p, p.analyses.jitter, comm_stragglers);
  return out + "</section>";
}

auto idle_share(const Temporal& t) { return t.span_ns > 0 ? t.idle_ns / t.span_ns : 0; }

StackRow temporal_row(std::string label, const Temporal& t) {
  return StackRow{std::move(label), {t.compute_ns, t.comm_ns, t.memory_ns, t.idle_ns}, {}};
}

StackRow idle_row(std::string label, const IdleSplit& i) {
  return StackRow{std::move(label), {i.host_wait_ns, i.kernel_wait_ns, i.other_ns}, {}};
}

template <typename T>
std::vector<const T*> most_idle_first(const std::vector<T>& items) {
  std::vector<const T*> sorted;
  for (const T& x : items) sorted.push_back(&x);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](auto* x, auto* y) { return idle_share(x->temporal) > idle_share(y->temporal); });
  return sorted;
}

// Temporal and idle breakdowns: all ranks, then the most idle hosts and ranks.
std::string temporal_charts(const Page& p, const BreakdownReport& b) {
  const std::vector<Series> temporal{{"compute", "#4c78a8"}, {"communication", "#f58518"}, {"memory", "#54a24b"},
                                     {"idle", "#bab0ac"}};
  const std::vector<Series> idle{{"host wait", "#e45756"}, {"kernel wait", "#eeca3b"}, {"other", "#9d755d"}};
  Temporal all_t;
  IdleSplit all_i;
  for (const RankBreakdown& r : b.ranks) {
    all_t += r.temporal;
    all_i += r.idle;
  }
  const std::vector<const RankBreakdown*> ranks = most_idle_first(b.ranks);
  const std::vector<const HostBreakdown*> hosts = most_idle_first(b.hosts);
  std::vector<StackRow> t_rows{temporal_row("all ranks", all_t)}, i_rows{idle_row("all ranks", all_i)};
  for (size_t k = 0; k < hosts.size() && k < p.options.top / 2 && hosts.size() > 1; ++k) {
    t_rows.push_back(temporal_row("host " + hosts[k]->host, hosts[k]->temporal));
    i_rows.push_back(idle_row("host " + hosts[k]->host, hosts[k]->idle));
  }
  for (size_t k = 0; k < ranks.size() && k < p.options.top; ++k) {
    t_rows.push_back(temporal_row(p.rank_label(ranks[k]->rank), ranks[k]->temporal));
    i_rows.push_back(idle_row(p.rank_label(ranks[k]->rank), ranks[k]->idle));
  }
  std::string out = "<h3>Temporal breakdown (share of profiled time; most idle ranks first)</h3>" +
                    stacked_share_chart("hta-temporal-chart", temporal, t_rows);
  out += "<h3>Idle time breakdown (share of idle time)</h3>" + stacked_share_chart("hta-idle-chart", idle, i_rows);
  if (ranks.size() > p.options.top)
    out += note(fmt::format("The {} most idle of {} ranks; \"all ranks\" sums every rank.", p.options.top, ranks.size()));
  return out;
}

// Kernel types over all kernels, then per NVTX section, the sections with most GPU time first.
std::string kernel_type_chart(const Page& p, const BreakdownReport& b) {
  const std::vector<Series> types{{"compute (COMP)", "#4c78a8"}, {"communication (COMM)", "#f58518"},
                                  {"memory (MEM)", "#54a24b"}};
  TypeTotals all_types;
  for (const RankBreakdown& r : b.ranks) all_types += r.types;
  std::vector<StackRow> type_rows{{"all kernels", {all_types.comp_ns, all_types.comm_ns, all_types.mem_ns}, {}}};
  std::vector<std::pair<std::string, TypeTotals>> by_section(b.by_section.begin(), b.by_section.end());
  std::stable_sort(by_section.begin(), by_section.end(), [](auto& x, auto& y) {
    return x.second.comp_ns + x.second.comm_ns + x.second.mem_ns > y.second.comp_ns + y.second.comm_ns + y.second.mem_ns;
  });
  for (size_t k = 0; k < by_section.size() && k < p.options.top; ++k)
    type_rows.push_back({by_section[k].first, {by_section[k].second.comp_ns, by_section[k].second.comm_ns,
                                               by_section[k].second.mem_ns}, {}});
  return "<h3>Kernel types (GPU time; all kernels, then by NVTX section)</h3>" +
         stacked_share_chart("hta-types-chart", types, type_rows);
}

std::string top_kernels_chart(const BreakdownReport& b) {
  std::vector<Bar> top;
  for (const TopKernel& k : b.top)
    top.push_back({demangle(k.name), k.total_ns,
                   fmt::format("{} [{}]: {} over {} launches, {:.0f} % of its type; ranks {}..{}", demangle(k.name),
                               k.type, duration(k.total_ns), k.count, 100 * k.share_of_type, k.min_rank, k.max_rank),
                   false});
  if (top.empty()) return "";
  return "<h3>Top kernels (total GPU time, all ranks)</h3>" + bar_chart("hta-top-kernels-chart", top, ms_value);
}

std::string hta_section(const Page& p) {
  const BreakdownReport& b = p.analyses.breakdown;
  std::string out = "<section id=\"hta\"><h2>GPU time breakdown (HTA)</h2>";
  if (!b.available) return out + note("Not available: " + esc(b.why_not)) + "</section>";
  return out + temporal_charts(p, b) + kernel_type_chart(p, b) + top_kernels_chart(b) + "</section>";
}

}  // namespace laggard::report::html
