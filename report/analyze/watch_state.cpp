#include "watch_state.h"

#include <algorithm>
#include <set>

#include "comm_analysis.h"
#include "gpu_scores.h"
#include "host_collectives.h"
#include "steps.h"

namespace laggard::report {
namespace {

WatchRank rank_basics(const RankData& r) {
  WatchRank w;
  w.rank = r.rank;
  w.host = r.host;
  w.final = r.final;
  w.data_end_ns = r.data_end_ns;
  w.windows = r.windows.size();
  for (const CaptureWindow& cw : r.windows) w.data_end_ns = std::max(w.data_end_ns, cw.end_ns);
  return w;
}

void add_section_scores(WatchRank& w, const RankScores& scores) {
  for (const auto& [name, s] : scores.sections) {
    WatchSection& ws = w.sections[name];
    ws.relative = s.relative;
    ws.individual = s.individual;
    ws.median_ns = s.median_ns;
    if (s.relative && (!w.worst_relative || *s.relative < *w.worst_relative)) {
      w.worst_relative = s.relative;
      w.worst_section = name;
    }
  }
}

// Each section's relative score in the newest report window the rank ran it in: a live view wants
// "how is it doing now", which the whole-run score (dominated by the past) hides.
void add_window_scores(std::vector<WatchRank>& ranks, const std::map<int, size_t>& by_rank, const ScoreReport& scores) {
  for (auto w = scores.windows.rbegin(); w != scores.windows.rend(); ++w)
    for (const RankScores& rs : w->ranks) {
      auto it = by_rank.find(rs.rank);
      if (it == by_rank.end()) continue;
      for (const auto& [name, s] : rs.sections) {
        auto sec = ranks[it->second].sections.find(name);
        if (sec != ranks[it->second].sections.end() && !sec->second.window_relative && s.relative)
          sec->second.window_relative = s.relative;
      }
    }
}

WatchState::Newest newest_window(const ScoreReport& scores) {
  WatchState::Newest n;
  for (auto w = scores.windows.rbegin(); w != scores.windows.rend(); ++w) {
    if (w->ranks.empty()) continue;
    n.index = w->index;
    n.start_ns = w->start_ns;
    n.end_ns = w->end_ns;
    for (const RankScores& rs : w->ranks) {
      WatchWindowRank wr;
      wr.rank = rs.rank;
      for (const auto& [name, s] : rs.sections)
        if (s.relative && (!wr.worst_relative || *s.relative < *wr.worst_relative)) {
          wr.worst_relative = s.relative;
          wr.worst_section = name;
          wr.worst_median_ns = s.median_ns;
        }
      n.ranks.push_back(std::move(wr));
    }
    break;
  }
  return n;
}

void add_steps(WatchRank& w, const std::vector<Step>& steps) {
  w.steps = steps.size();
  if (steps.empty()) return;
  std::vector<double> durs;
  for (const Step& s : steps) durs.push_back(double(s.end_ns - s.start_ns));
  w.step_last_ns = durs.back();
  std::nth_element(durs.begin(), durs.begin() + (durs.size() - 1) / 2, durs.end());
  w.step_median_ns = durs[(durs.size() - 1) / 2];  // lower middle, like the scores' medians
}

}  // namespace

WatchState summarize_for_watch(const RunModel& model, const ScoreOptions& score_options,
                               const std::string& step_section) {
  WatchState st;
  st.dir = model.dir;
  st.run_id = model.run_id;
  st.world_size = model.world_size;
  st.relative_threshold = score_options.relative_threshold;
  st.individual_threshold = score_options.individual_threshold;
  st.problems = model.problems.size();
  std::set<std::string> kinds;
  for (const Problem& p : model.problems) kinds.insert(p.kind);
  st.problem_kinds.assign(kinds.begin(), kinds.end());

  ScoreReport scores = compute_scores(model, score_options);
  GpuScoreReport gpu = compute_gpu_scores(model, scores);
  CommReport comm = analyze_run_collectives(model, scores);
  scores.stragglers.insert(scores.stragglers.end(), comm.stragglers.begin(), comm.stragglers.end());
  StepSet steps = detect_steps(model, step_section);
  st.window_s = scores.window_s;
  st.step_source = steps.source;
  st.report_windows = static_cast<int>(scores.windows.size());

  std::map<int, size_t> by_rank;
  for (size_t i = 0; i < model.ranks.size(); ++i) {
    WatchRank w = rank_basics(model.ranks[i]);
    if (i < scores.ranks.size()) add_section_scores(w, scores.ranks[i]);
    if (i < gpu.ranks.size() && gpu.ranks[i].has_data) {
      w.gpu_data = true;
      w.gpu = {gpu.ranks[i].score.relative, gpu.ranks[i].score.individual};
      for (const auto& [name, g] : gpu.ranks[i].sections) w.gpu_sections[name] = {g.relative, g.individual};
    }
    if (i < steps.per_rank.size()) add_steps(w, steps.per_rank[i]);
    if (i < comm.ranks.size() && comm.ranks[i].collectives > 0) {
      const CommRankStats& c = comm.ranks[i];
      w.nccl_data = true;
      w.nccl_blame_ns = c.blame_ns;
      w.nccl_waited_ns = c.waited_ns;
      w.nccl_collectives = c.collectives;
      w.nccl_last = c.last;
    }
    by_rank[w.rank] = st.ranks.size();
    st.ranks.push_back(std::move(w));
  }
  add_window_scores(st.ranks, by_rank, scores);
  for (const Straggler& s : scores.stragglers)
    if (auto it = by_rank.find(s.rank); it != by_rank.end()) {
      WatchRank& w = st.ranks[it->second];
      w.straggler = true;
      if (!w.flagged_by || s.score < w.flagged_by->score) w.flagged_by = s;
    }
  st.stragglers = std::move(scores.stragglers);
  st.newest = newest_window(scores);
  return st;
}

}  // namespace laggard::report
