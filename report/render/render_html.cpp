// The HTML page (render_html.h): head with the policy and the style, the verdict, the data
// completeness warnings, the charts (render_html_charts.cpp) and a JSON summary for tools.
#include "render_html.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "render_html_parts.h"
#include "render_html_svg.h"

namespace laggard::report {
namespace {

using html::Page;

constexpr std::string_view kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1000px;padding:16px 24px;color:#222;background:#fff}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}.meta{color:#555}.muted{color:#777}.num{font-variant-numeric:tabular-nums}
table{border-collapse:collapse;margin:6px 0}td,th{padding:2px 8px;text-align:left;border-bottom:1px solid #eee;vertical-align:top}
th{background:#f6f6f6}td.n{text-align:right;font-variant-numeric:tabular-nums}
.finding{border-left:5px solid #d62728;background:#fff5f5;padding:8px 12px;margin:10px 0}
.finding.transient{border-color:#ff7f0e;background:#fff9f0}.finding h3{margin:0 0 4px}
.ok{border-left:5px solid #2ca02c;background:#f3fbf3;padding:8px 12px}
.warn{border-left:5px solid #ff7f0e;background:#fffaf2;padding:6px 12px;margin:6px 0}
.legend span{margin-right:14px;white-space:nowrap}.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
svg.chart{display:block;margin:6px 0;overflow:visible}svg text{font-size:11px;fill:#333}
code,.name{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px;word-break:break-all}
details{margin:4px 0}summary{cursor:pointer;color:#335}
)";

std::string esc(std::string_view s) { return escape_html(s); }

std::string steps_text(const Finding& f) {
  if (f.first_step < 0) return "";
  return f.first_step == f.last_step ? fmt::format("step {}", f.first_step)
                                     : fmt::format("steps {}–{}", f.first_step, f.last_step);
}

std::string finding_html(const Page& p, const Finding& f, size_t number) {
  std::string where = f.section.empty() ? "the step as a whole" : "<span class=\"name\">" + esc(f.section) + "</span>";
  std::string out = fmt::format("<div class=\"finding {}\" id=\"finding-{}\"><h3>{}. {}{}: {} ({})</h3>",
                                f.kind == "transient" ? "transient" : "", number, number, esc(p.rank_label(f.rank)),
                                f.device >= 0 ? fmt::format(", GPU {}", f.device) : "", esc(cause_name(f.cause)),
                                esc(f.kind));
  out += fmt::format("<div>in {}{}{}</div>", where, f.first_step >= 0 ? ", " + esc(steps_text(f)) : "",
                     f.impact_ns > 0 ? fmt::format(": the job loses <b>{}</b> per step{}", esc(html::duration(f.impact_ns)),
                                                   f.steps_affected > 0 ? fmt::format(" over {} steps", f.steps_affected) : "")
                                     : "");
  if (f.cause_share > 0)
    out += fmt::format("<div class=\"muted\">the cause explains {:.0f} % of it</div>", 100 * f.cause_share);
  out += "<div>" + esc(f.summary) + "</div>";
  if (!f.evidence.empty()) {
    out += "<details><summary>evidence</summary><table>";
    for (const auto& [key, value] : f.evidence)
      out += fmt::format("<tr><td class=\"name\">{}</td><td class=\"n\">{:.4g}</td></tr>", esc(key), value);
    out += "</table></details>";
  }
  return out + "</div>";
}

std::string stragglers_table(const Page& p) {
  const auto& all = p.scores.stragglers;
  if (all.empty()) return "<p class=\"muted\">No NVRx straggler (no score below its threshold).</p>";
  std::string out = fmt::format(
      "<h3>NVRx stragglers ({} below the thresholds)</h3><table id=\"stragglers\"><tr><th>rank</th><th>host</th>"
      "<th>scope</th><th>section</th><th>metric</th><th>score</th><th>windows</th></tr>",
      all.size());
  const size_t shown = std::min<size_t>(p.options.top, 10);
  for (size_t i = 0; i < all.size() && i < shown; ++i) {
    const Straggler& s = all[i];
    out += fmt::format(
        "<tr><td class=\"n\">{}</td><td class=\"name\">{}</td><td>{}</td><td class=\"name\">{}</td><td>{}</td>"
        "<td class=\"n\">{:.3f} &lt; {:.2f}</td><td class=\"n\">{}</td></tr>",
        s.rank, esc(s.host), esc(s.scope), esc(s.section.empty() ? "(all)" : s.section), esc(s.metric), s.score,
        s.threshold, s.windows.size());
  }
  out += "</table>";
  if (all.size() > shown)
    out += fmt::format("<p class=\"muted\">… and {} more (laggard report --format json lists them all).</p>",
                       all.size() - shown);
  return out;
}

std::string verdict_section(const Page& p) {
  const Verdict& v = p.analyses.verdict;
  std::string out = "<section id=\"verdict\"><h2>Verdict</h2>";
  if (v.findings.empty())
    out += "<div class=\"ok\" id=\"no-finding\">No finding: no rank is clearly and materially slower than the others.</div>";
  for (size_t i = 0; i < v.findings.size() && i < p.options.top; ++i) out += finding_html(p, v.findings[i], i + 1);
  if (v.findings.size() > p.options.top)
    out += fmt::format("<p class=\"muted\">… and {} smaller findings.</p>", v.findings.size() - p.options.top);
  out += stragglers_table(p);
  if (!v.thresholds.empty()) {
    out += "<details><summary>thresholds used</summary><table>";
    for (const Threshold& t : v.thresholds)
      out += fmt::format("<tr><td class=\"name\">{}</td><td class=\"n\">{:.4g}</td><td>{}</td></tr>", esc(t.name),
                         t.value, esc(t.why));
    out += "</table></details>";
  }
  return out + "</section>";
}

// Problems grouped by kind (a run of 10,000 ranks may have thousands of one kind).
std::string problems_html(const Page& p) {
  std::map<std::string, std::vector<const Problem*>> by_kind;
  for (const Problem& pr : p.model.problems) by_kind[pr.kind].push_back(&pr);
  std::string out;
  for (const auto& [kind, list] : by_kind) {
    out += fmt::format("<div class=\"warn\"><b class=\"name\">{}</b> ({}): {}", esc(kind), list.size(),
                       esc(list.front()->message));
    if (list.size() > 1) {
      out += "<details><summary>all of them</summary><ul>";
      for (size_t i = 0; i < list.size() && i < p.options.top; ++i) out += "<li>" + esc(list[i]->message) + "</li>";
      if (list.size() > p.options.top) out += fmt::format("<li>… and {} more</li>", list.size() - p.options.top);
      out += "</ul></details>";
    }
    out += "</div>";
  }
  return out;
}

std::string completeness_section(const Page& p) {
  std::string out = "<section id=\"completeness\"><h2>Data completeness</h2>" + problems_html(p);
  auto warn = [&](const std::string& text) { out += "<div class=\"warn\">" + text + "</div>"; };
  size_t not_final = 0, lost = 0;
  uint64_t dropped = 0;
  for (const RankData& r : p.model.ranks) {
    not_final += r.final ? 0 : 1;
    lost += r.windows_lost;
    for (const auto& [k, n] : r.dropped) dropped += n;
  }
  if (not_final) warn(fmt::format("{} of {} ranks did not end cleanly (no final window): their last window is lost.",
                                  not_final, p.model.ranks.size()));
  if (lost) warn(fmt::format("{} capture windows were dropped unwritten.", lost));
  if (dropped) warn(fmt::format("{} records were dropped at capture (buffers full).", dropped));
  size_t gpu_incomplete = 0;
  for (const RankGpu& g : p.analyses.gpu.ranks) gpu_incomplete += g.has_data && g.completeness < 0.999 ? 1 : 0;
  if (gpu_incomplete) warn(fmt::format("{} ranks lost GPU records (CUPTI completeness below 100 %).", gpu_incomplete));
  const CommReport& c = p.analyses.comm;
  if (c.incomplete)
    warn(fmt::format("{} NCCL collectives could not be matched on every rank ({} with suspect GPU times).",
                     c.incomplete, c.suspect));
  if (!p.analyses.jitter.available)
    warn("Per-step jitter analysis not available: " + esc(p.analyses.jitter.why_not));
  if (!p.analyses.breakdown.available)
    warn("HTA breakdown not available: " + esc(p.analyses.breakdown.why_not));
  if (out.find("class=\"warn\"") == std::string::npos)
    out += "<div class=\"ok\">Every rank's data is complete.</div>";
  return out + "</section>";
}

std::string health_section(const Page& p) {
  if (!p.health.present) return "";
  std::string out = "<section id=\"gpu-health\"><h2>GPU health (NVML)</h2>";
  size_t unhealthy = 0;
  std::string rows;
  for (const RankGpuHealth& g : p.health.gpus) {
    if (g.problems.empty()) continue;
    if (++unhealthy > p.options.top) continue;
    std::string why;
    for (const std::string& s : g.problems) why += (why.empty() ? "" : "; ") + s;
    rows += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.0f}</td><td class=\"n\">{:.0f}</td>"
                        "<td>{}</td></tr>",
                        esc(p.rank_label(g.rank)), g.device, g.sm_clock_median_mhz, g.temperature_max_c, esc(why));
  }
  if (unhealthy == 0) return out + fmt::format("<div class=\"ok\">All {} GPUs look healthy.</div></section>", p.health.gpus.size());
  return out + "<table><tr><th>rank</th><th>GPU</th><th>SM MHz</th><th>max °C</th><th>why</th></tr>" + rows +
         "</table>" +
         (unhealthy > p.options.top ? fmt::format("<p class=\"muted\">… and {} more.</p>", unhealthy - p.options.top) : "") +
         "</section>";
}

std::string header(const Page& p) {
  std::set<std::string> hosts;
  for (const RankData& r : p.model.ranks) hosts.insert(r.host);
  const StepSet& steps = p.analyses.steps;
  std::string out = fmt::format("<header><h1>laggard report: run <span class=\"name\">{}</span></h1>",
                                esc(p.model.run_id));
  out += fmt::format("<div class=\"meta\">{} rank{} on {} host{}{}, {} captured, {} comparable steps{}</div>",
                     p.model.ranks.size(), p.model.ranks.size() == 1 ? "" : "s", hosts.size(), hosts.size() == 1 ? "" : "s",
                     p.model.world_size > 0 ? fmt::format(" (world size {})", p.model.world_size) : "",
                     esc(html::duration(static_cast<double>(p.scores.end_ns - p.scores.start_ns))), steps.count(),
                     steps.source.empty() ? "" : " (" + esc(steps.source) + ")");
  out += fmt::format("<div class=\"meta name\">{}</div>", esc(p.model.dir));
  if (!p.options.cut.empty())
    out += "<div class=\"warn\">Cut to " + esc(p.options.cut) + ": every part below covers only that.</div>";
  out += "<nav class=\"meta\"><a href=\"#verdict\">verdict</a> · <a href=\"#completeness\">completeness</a> · "
         "<a href=\"#heatmap\">heat map</a> · <a href=\"#steptime\">step time</a> · <a href=\"#distributions\">"
         "durations</a> · <a href=\"#nccl\">NCCL</a> · <a href=\"#hta\">HTA breakdown</a></nav>";
  return out + "</header>";
}

// The verdict and stragglers for tools that read the page: a JSON data block (never executed).
std::string summary_json(const Page& p) {
  using nlohmann::json;
  json findings = json::array();
  for (size_t i = 0; i < p.analyses.verdict.findings.size() && i < p.options.top; ++i) {
    const Finding& f = p.analyses.verdict.findings[i];
    findings.push_back({{"rank", f.rank}, {"host", f.host}, {"cause", cause_name(f.cause)}, {"kind", f.kind},
                        {"section", f.section}, {"first_step", f.first_step}, {"last_step", f.last_step},
                        {"impact_ms", f.impact_ns / 1e6}, {"summary", f.summary}});
  }
  json stragglers = json::array();
  for (size_t i = 0; i < p.scores.stragglers.size() && i < p.options.top; ++i) {
    const Straggler& s = p.scores.stragglers[i];
    stragglers.push_back({{"rank", s.rank}, {"host", s.host}, {"scope", s.scope}, {"section", s.section},
                          {"metric", s.metric}, {"score", s.score}});
  }
  json j = {{"run_id", p.model.run_id}, {"ranks", p.model.ranks.size()}, {"findings", findings},
            {"stragglers", stragglers}};
  // Names may hold bytes that are not UTF-8: replaced, never an exception.
  return "<script type=\"application/json\" id=\"laggard-summary\">" +
         escape_script_json(j.dump(-1, ' ', false, json::error_handler_t::replace)) + "</script>";
}

std::vector<int> highlighted_ranks(const Analyses& a, const ScoreReport& s, size_t most) {
  std::vector<int> out;
  auto add = [&](int rank) {
    if (rank >= 0 && out.size() < most && std::find(out.begin(), out.end(), rank) == out.end()) out.push_back(rank);
  };
  for (const Finding& f : a.verdict.findings) add(f.rank);
  for (const Straggler& st : s.stragglers) add(st.rank);
  return out;
}

}  // namespace

std::string html::Page::rank_label(int rank) const {
  auto it = index_of_rank.find(rank);
  if (it == index_of_rank.end() || model.ranks[it->second].host.empty()) return fmt::format("rank {}", rank);
  return fmt::format("rank {} ({})", rank, model.ranks[it->second].host);
}

void render_html(const RunModel& model, const ScoreReport& scores, const Analyses& analyses,
                 const HealthReport& health, std::ostream& out, const HtmlOptions& options) {
  Page p{model, scores, analyses, health, options, {}, highlighted_ranks(analyses, scores, options.highlight)};
  for (size_t i = 0; i < model.ranks.size(); ++i) p.index_of_rank.emplace(model.ranks[i].rank, i);
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      << "<meta http-equiv=\"Content-Security-Policy\" content=\"" << kHtmlCsp << "\">\n"
      << "<meta name=\"referrer\" content=\"no-referrer\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      << "<title>laggard report: " << escape_html(model.run_id) << "</title>\n<style>" << kStyle << "</style></head>\n<body>\n"
      << header(p) << '\n'
      << verdict_section(p) << '\n'
      << completeness_section(p) << '\n'
      << html::heat_map_section(p) << '\n'
      << html::step_time_section(p) << '\n'
      << html::distributions_section(p) << '\n'
      << html::nccl_section(p) << '\n'
      << html::hta_section(p) << '\n'
      << health_section(p) << '\n'
      << summary_json(p) << "\n</body></html>\n";
}

}  // namespace laggard::report
