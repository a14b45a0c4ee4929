#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "render.h"
#include "render_analyses.h"
#include "render_paused.h"
#include "score_text.h"
#include "text_lists.h"

namespace laggard::report {
namespace {

std::string score_str(const std::optional<double>& s, double threshold) { return s ? score_text(*s, threshold) : "-"; }

std::string windows_str(const std::vector<int>& w, size_t total) {
  if (w.empty()) return "whole run only";
  std::string out = fmt::format("{}/{} windows", w.size(), total);
  if (w.size() <= 6) {
    out += " (";
    for (size_t i = 0; i < w.size(); ++i) out += (i ? "," : "") + std::to_string(w[i]);
    out += ")";
  }
  return out;
}

// Sections in nesting order (parents before children, longest first), with their depth.
std::vector<std::pair<const SectionSummary*, int>> section_tree(const std::vector<SectionSummary>& all) {
  std::map<std::string, std::vector<const SectionSummary*>> children;
  std::set<std::string> names;
  for (const auto& s : all) names.insert(s.name);
  for (const auto& s : all) children[names.count(s.parent) && s.parent != s.name ? s.parent : ""].push_back(&s);
  for (auto& [p, kids] : children)
    std::sort(kids.begin(), kids.end(), [](auto* a, auto* b) { return a->median_median_ns > b->median_median_ns; });
  std::vector<std::pair<const SectionSummary*, int>> out;
  std::set<std::string> visited;
  auto visit = [&](auto&& self, const std::string& parent, int depth) -> void {
    for (const SectionSummary* s : children[parent]) {
      if (!visited.insert(s->name).second) continue;  // guards against cycles between names
      out.emplace_back(s, depth);
      self(self, s->name, depth + 1);
    }
  };
  visit(visit, "", 0);
  for (const auto& s : all)  // anything only reachable through a cycle
    if (!visited.count(s.name)) out.emplace_back(&s, 0);
  return out;
}

// Problems grouped by kind: a kind with many entries (a missing rank each, at 10,000 ranks)
// shows its first rows and the ranks of the rest.
void problems_text(const RunModel& m, size_t top, std::ostream& out) {
  std::vector<std::string> kinds;
  std::map<std::string, std::vector<const Problem*>> by_kind;
  for (const Problem& p : m.problems) {
    if (!by_kind.count(p.kind)) kinds.push_back(p.kind);
    by_kind[p.kind].push_back(&p);
  }
  for (const std::string& kind : kinds) {
    const auto& list = by_kind[kind];
    const size_t shown = rows_shown(list.size(), top);
    for (size_t i = 0; i < shown; ++i) {
      out << "  [" << list[i]->kind << "] " << list[i]->message;
      if (!list[i]->file.empty()) out << ": " << list[i]->file;
      out << '\n';
    }
    if (shown == list.size()) continue;
    std::vector<int> ranks;
    for (size_t i = shown; i < list.size(); ++i)
      if (list[i]->rank >= 0) ranks.push_back(list[i]->rank);
    out << fmt::format("  [{}] ... {} more{}\n", kind, list.size() - shown,
                       ranks.empty() ? std::string() : ", " + counted_ranks(ranks));
  }
}

// Straggler rows beyond `top` (when the table is long): how many, and which ranks.
void more_stragglers(const std::vector<Straggler>& all, size_t shown, std::ostream& out) {
  if (shown >= all.size()) return;
  std::vector<int> ranks;
  for (size_t i = shown; i < all.size(); ++i) ranks.push_back(all[i].rank);
  out << fmt::format("  ... {} more (--top shows more; all are in --format json or csv): {}\n", all.size() - shown,
                     counted_ranks(ranks));
}

size_t hosts(const RunModel& m) {
  std::set<std::string> h;
  for (const auto& r : m.ranks) h.insert(r.host);
  return h.size();
}

void run_header(const RunModel& model, const ScoreReport& rep, std::ostream& out) {
  out << fmt::format("laggard report: run {} ({})\n", model.run_id, model.dir);
  out << fmt::format("  {} of {} ranks on {} host(s), {:.1f} s of data, {} report window(s) of {:g} s\n",
                     model.ranks.size(), model.world_size, hosts(model),
                     double(rep.end_ns - rep.start_ns) / 1e9, rep.windows.size(), rep.window_s);
  if (!model.other_runs.empty()) {
    out << "  other runs in this directory (choose with --run):";
    for (const auto& r : model.other_runs) out << ' ' << r;
    out << '\n';
  }
}

void straggler_rows(const std::vector<Straggler>& list, const ScoreReport& rep, size_t top, std::ostream& out) {
  const size_t shown = rows_shown(list.size(), top);
  for (size_t i = 0; i < shown; ++i) {
    const Straggler& s = list[i];
    const std::string section =
        s.scope == "gpu" ? (s.section.empty() ? std::string("[GPU] all kernels") : "[GPU] " + s.section) : s.section;
    out << fmt::format("  {:>5}  {:<16} {:<24} {:<10} {:>5}  {}\n", s.rank, s.host, section, s.metric,
                       score_text(s.score, s.threshold), windows_str(s.windows, rep.windows.size()));
  }
  more_stragglers(list, shown, out);
}

// Whole-run stragglers, then those slow only in some report windows.
void stragglers_text(const ScoreReport& rep, size_t top, std::ostream& out) {
  out << fmt::format("\nStragglers (score below {:.2f} relative / {:.2f} individual): {}\n",
                     rep.options.relative_threshold, rep.options.individual_threshold,
                     rep.stragglers.empty() ? "none" : std::to_string(rep.stragglers.size()));
  if (!rep.stragglers.empty()) {
    out << fmt::format("  {:>5}  {:<16} {:<24} {:<10} {:>5}  {}\n", "RANK", "HOST", "SECTION", "METRIC", "SCORE",
                       "WHEN");
    straggler_rows(rep.stragglers, rep, top, out);
  }
  if (rep.below_min_share)
    out << fmt::format("  ({} low scores not listed: their sections hold under {:g}% of their rank's time; "
                       "--min-share, or the JSON report, shows them)\n",
                       rep.below_min_share, rep.options.min_share * 100);
  if (rep.window_stragglers.empty()) return;
  out << fmt::format("  Slow only in some report windows (NVRx flags these per window; whole-run score passes): {}\n",
                     rep.window_stragglers.size());
  straggler_rows(rep.window_stragglers, rep, top, out);
}

void sections_text(const ScoreReport& rep, size_t top, std::ostream& out) {
  out << "\nSections (median ms per rank, whole run):\n";
  if (rep.sections.empty()) out << "  no NVTX sections recorded\n";
  else
    out << fmt::format("  {:<32} {:>5}  {:>9} {:>9} {:>9}  {:<18}\n", "SECTION", "RANKS", "MIN", "MEDIAN", "MAX",
                       "WORST RANK (REL)");
  const auto tree = section_tree(rep.sections);
  const size_t sections_shown = rows_shown(tree.size(), top);
  for (size_t i = 0; i < sections_shown; ++i) {
    const auto& [s, depth] = tree[i];
    std::string name = std::string(2 * depth, ' ') + s->name;
    const std::string worst =
        s->worst_rank < 0 ? fmt::format("- (< {} samples)", rep.options.min_samples)
                          : fmt::format("{} ({})", s->worst_rank, score_text(s->worst_relative, rep.options.relative_threshold));
    out << fmt::format("  {:<32} {:>5}  {:>9.3f} {:>9.3f} {:>9.3f}  {:<18}\n", name, s->ranks,
                       s->min_median_ns / 1e6, s->median_median_ns / 1e6, s->max_median_ns / 1e6, worst);
  }
  out << more_line(tree.size(), sections_shown, "sections");
}

using Weakest = const std::pair<const std::string, SectionScore>*;

// A rank's section with the lowest relative score; null when none has one.
Weakest weakest_section(const RankScores& r) {
  Weakest worst = nullptr;
  for (const auto& kv : r.sections)
    if (kv.second.relative && (!worst || *kv.second.relative < *worst->second.relative)) worst = &kv;
  return worst;
}

// Per rank: the weakest section by relative score, so 1000 ranks still read as a list.
// Small jobs list every rank; large ones the weakest `top` (all are in the JSON).
void ranks_text(const ScoreReport& rep, size_t top, std::ostream& out) {
  std::vector<const RankScores*> shown;
  for (const RankScores& r : rep.ranks) shown.push_back(&r);
  const bool all = rows_shown(shown.size(), top) == shown.size();
  if (!all) {
    auto score = [](const RankScores* r) { Weakest w = weakest_section(*r); return w ? *w->second.relative : 2.0; };
    shown.erase(std::remove_if(shown.begin(), shown.end(), [](auto* r) { return !weakest_section(*r); }), shown.end());
    std::stable_sort(shown.begin(), shown.end(), [&](auto* a, auto* b) { return score(a) < score(b); });
    if (shown.size() > top) shown.resize(top);
  }
  out << (all ? "\nRanks (weakest section per rank):\n"
              : fmt::format("\nRanks (the {} with the weakest section; all {} in --format json or csv):\n", top,
                            rep.ranks.size()));
  out << fmt::format("  {:>5}  {:<16} {:<24} {:>5} {:>5}\n", "RANK", "HOST", "SECTION", "REL", "IND");
  for (const RankScores* r : shown) {
    Weakest worst = weakest_section(*r);
    if (!worst) {  // sections with fewer samples than a score needs are not "no data"
      const bool some = std::any_of(r->sections.begin(), r->sections.end(), [](const auto& kv) { return kv.second.samples > 0; });
      out << fmt::format("  {:>5}  {:<16} {}\n", r->rank, r->host,
                         some ? fmt::format("(no section score: fewer than {} samples)", rep.options.min_samples)
                              : std::string("(no data)"));
      continue;
    }
    out << fmt::format("  {:>5}  {:<16} {:<24} {:>5} {:>5}\n", r->rank, r->host, worst->first,
                       score_str(worst->second.relative, rep.options.relative_threshold),
                       score_str(worst->second.individual, rep.options.individual_threshold));
  }
  if (all) return;
  std::vector<int> without;
  for (const RankScores& r : rep.ranks)
    if (!weakest_section(r)) without.push_back(r.rank);
  if (!without.empty()) out << "  no section scores (no data, or too few samples): " << counted_ranks(without) << '\n';
}

}  // namespace

void render_text(const RunModel& model, const ScoreReport& rep, std::ostream& out, const Analyses* analyses,
                 size_t top) {
  run_header(model, rep, out);
  render_paused_text(model, out);
  out << "\nProblems: " << (model.problems.empty() ? "none\n" : "\n");
  problems_text(model, top, out);
  if (analyses) render_verdict_text(*analyses, out);
  stragglers_text(rep, top, out);
  sections_text(rep, top, out);
  ranks_text(rep, top, out);
  if (analyses) render_analyses_text(model, *analyses, top, out, &rep.options);
}

}  // namespace laggard::report
