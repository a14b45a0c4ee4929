#include "render_watch.h"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "score_text.h"
#include "text_escape.h"

namespace laggard::report {
namespace {

std::string clock_text(int64_t epoch_ns) {
  std::time_t t = static_cast<std::time_t>(epoch_ns / 1'000'000'000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

std::string score_or_dash(const std::optional<double>& s, double threshold) {
  return s ? score_text(*s, threshold) : "-";
}

std::string ms_or_dash(const std::optional<double>& ns) { return ns ? fmt::format("{:.2f}", *ns / 1e6) : "-"; }

void header(const WatchState& st, const WatchViewOptions& o, std::ostream& out) {
  out << fmt::format("laggard watch: run {} ({})\n", escape_text(st.run_id.empty() ? "-" : st.run_id), escape_text(st.dir));
  size_t finals = std::count_if(st.ranks.begin(), st.ranks.end(), [](const WatchRank& r) { return r.final; });
  std::string world = st.world_size > 0 ? std::to_string(st.world_size) : "?";
  out << fmt::format("{}  every {:g} s  ranks {}/{} ({} finished)  report windows {} of {:g} s  problems {}",
                     clock_text(o.now_ns), o.interval_s, st.ranks.size(), world, finals, st.report_windows,
                     st.window_s, st.problems);
  if (!st.problem_kinds.empty()) {
    std::string kinds;
    for (const std::string& k : st.problem_kinds) kinds += (kinds.empty() ? "" : ", ") + k;
    out << " (" << escape_text(kinds) << ")";
  }
  out << '\n';
  if (!o.serving.empty()) out << "metrics: " << o.serving << '\n';
}

void stragglers(const WatchState& st, const WatchViewOptions& o, std::ostream& out) {
  if (st.stragglers.empty()) {
    out << "\nStragglers: none\n";
    return;
  }
  out << fmt::format("\nStragglers ({}):\n", st.stragglers.size());
  for (size_t i = 0; i < st.stragglers.size() && i < o.rows; ++i) {
    const Straggler& s = st.stragglers[i];
    std::string what = s.section.empty() ? s.scope : s.scope + " " + escape_text(s.section);
    out << fmt::format("  rank {:<5} {:<16} {:<28} {} {} < {:g}\n", s.rank, escape_text(s.host), what, s.metric,
                       score_text(s.score, s.threshold), s.threshold);
  }
  if (st.stragglers.size() > o.rows) out << fmt::format("  ... and {} more\n", st.stragglers.size() - o.rows);
}

void newest_window(const WatchState& st, const WatchViewOptions& o, std::ostream& out) {
  if (st.newest.index < 0) return;
  out << fmt::format("\nNewest window #{} ({} - {}): lowest relative score per rank\n", st.newest.index,
                     clock_text(st.newest.start_ns), clock_text(st.newest.end_ns));
  std::vector<const WatchWindowRank*> rows;
  for (const WatchWindowRank& r : st.newest.ranks) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) {
    return a->worst_relative.value_or(2) < b->worst_relative.value_or(2);
  });
  out << fmt::format("  {:<5} {:<28} {:>8} {:>10}\n", "rank", "section", "relative", "median ms");
  for (size_t i = 0; i < rows.size() && i < o.rows; ++i)
    out << fmt::format("  {:<5} {:<28} {:>8} {:>10.2f}\n", rows[i]->rank,
                       escape_text(rows[i]->worst_section.empty() ? "-" : rows[i]->worst_section),
                       score_or_dash(rows[i]->worst_relative, st.relative_threshold), rows[i]->worst_median_ns / 1e6);
  if (rows.size() > o.rows) out << fmt::format("  ... and {} more ranks\n", rows.size() - o.rows);
}

// What a straggler's star stands for: "backward individual 0.62", "gpu all relative 0.70".
std::string flagged_text(const Straggler& s) {
  std::string what = s.scope == "section" ? s.section : s.section.empty() ? s.scope : s.scope + " " + s.section;
  return fmt::format("{} {} {}", escape_text(what), s.metric, score_text(s.score, s.threshold));
}

void rank_table(const WatchState& st, const WatchViewOptions& o, std::ostream& out) {
  out << "\nRanks (stragglers *, then lowest relative score first; a star's score is at the end of its row):\n";
  std::vector<const WatchRank*> rows;
  for (const WatchRank& r : st.ranks) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) {
    if (a->straggler != b->straggler) return a->straggler;
    return a->worst_relative.value_or(2) < b->worst_relative.value_or(2);
  });
  out << fmt::format("  {:<5} {:<16} {:<20} {:>8} {:>8} {:>8} {:>6} {:>9} {:>9} {:>10} {:>7}  {}\n", "rank", "host",
                     "worst section", "relative", "indiv.", "gpu rel", "steps", "step ms", "last ms", "blame ms", "age s",
                     "* straggler by");
  for (size_t i = 0; i < rows.size() && i < o.rows; ++i) {
    const WatchRank& r = *rows[i];
    const WatchSection* worst = r.sections.count(r.worst_section) ? &r.sections.at(r.worst_section) : nullptr;
    double age_s = r.data_end_ns ? std::max<double>(0, (o.now_ns - r.data_end_ns) / 1e9) : 0;
    std::string row = fmt::format("{} {:<5} {:<16} {:<20} {:>8} {:>8} {:>8} {:>6} {:>9} {:>9} {:>10} {:>7}  {}",
                       r.straggler ? "*" : " ", r.rank, escape_text(r.host),
                       escape_text(r.worst_section.empty() ? "-" : r.worst_section),
                       score_or_dash(r.worst_relative, st.relative_threshold),
                       score_or_dash(worst ? worst->individual : std::nullopt, st.individual_threshold),
                       score_or_dash(r.gpu.relative, st.relative_threshold), r.steps, ms_or_dash(r.step_median_ns),
                       ms_or_dash(r.step_last_ns),
                       r.nccl_data ? fmt::format("{:.2f}", r.nccl_blame_ns / 1e6) : std::string("-"),
                       r.final ? std::string("done") : fmt::format("{:.1f}", age_s),
                       r.flagged_by ? flagged_text(*r.flagged_by) : std::string());
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out << row << '\n';
  }
  if (rows.size() > o.rows) out << fmt::format("  ... and {} more ranks\n", rows.size() - o.rows);
}

}  // namespace

void render_watch(const WatchState& st, const WatchViewOptions& o, std::ostream& out) {
  header(st, o, out);
  if (!st.waiting.empty()) {
    out << "\nwaiting for rank files: " << escape_text(st.waiting) << '\n';
    return;
  }
  stragglers(st, o, out);
  newest_window(st, o, out);
  rank_table(st, o, out);
}

}  // namespace laggard::report
