#include "scores.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>
#include <tuple>

#include "host_collectives.h"
#include "parallel.h"
#include "stats.h"

namespace laggard::report {
namespace {

using Samples = std::vector<std::pair<double, double>>;  // (duration ns, weight)

struct Acc {
  uint64_t count = 0;
  int64_t total_ns = 0;
  bool median_from_sample = false;
  std::string domain;
  Samples all;
  std::map<int, Samples> by_window;
  std::map<std::string, uint64_t> parents;
};

// best / mine, where lower durations are better; a zero median is as good as it gets.
double ratio(double best, double mine) { return mine > 0 ? std::min(1.0, best / mine) : 1.0; }

}  // namespace

// Per window, as NVRx decides: a section whose whole-run score passes but whose score in some
// report windows falls below the threshold.
static void add_window_stragglers(ScoreReport& rep, const ScoreOptions& opt) {
  std::set<std::tuple<int, std::string, std::string>> whole_run;  // listed already: (rank, section, metric)
  for (const Straggler& s : rep.stragglers)
    if (s.scope == "section") whole_run.emplace(s.rank, s.section, s.metric);
  auto listed = [&](int rank, const std::string& section, const std::string& metric) {
    return whole_run.count({rank, section, metric}) > 0;
  };
  std::map<std::tuple<int, std::string, std::string>, Straggler> found;
  for (const WindowScores& w : rep.windows)
    for (const RankScores& wr : w.ranks)
      for (const auto& [name, ws] : wr.sections)
        for (auto [metric, score, thr] : {std::tuple{"relative", ws.relative, opt.relative_threshold},
                                          std::tuple{"individual", ws.individual, opt.individual_threshold}}) {
          if (!score || *score >= thr || listed(wr.rank, name, metric) || parse_host_collective(name)) continue;
          auto [it, added] = found.try_emplace({wr.rank, name, metric},
                                               Straggler{wr.rank, wr.host, "section", name, metric, *score, thr, {}});
          it->second.score = std::min(it->second.score, *score);
          it->second.windows.push_back(w.index);
        }
  for (auto& [key, s] : found) rep.window_stragglers.push_back(std::move(s));
  std::stable_sort(rep.window_stragglers.begin(), rep.window_stragglers.end(),
                   [](const Straggler& a, const Straggler& b) { return a.score < b.score; });
}

namespace {

// What the steps of compute_scores pass on to each other.
struct ScoreWork {
  const RunModel& model;
  const ScoreOptions& opt;
  ScoreReport& rep;
  double window_ns = 0;
  int nwin = 1;
  std::vector<std::map<std::string, Acc>> acc;              // per rank index, per section
  std::map<std::string, std::map<std::string, uint64_t>> parent_votes;
  std::map<std::string, double> best, best_any;             // best: from enough samples to score against
  std::vector<std::map<std::string, double>> med;           // whole-run median per rank index, section
  std::vector<std::map<std::string, std::map<int, double>>> wmed;  // per rank index, section, window
  std::map<std::string, std::map<int, double>> window_best;
  // Where each rank's scores sit in rep.windows: (window, index in its ranks), by window.
  std::vector<std::vector<std::pair<int, size_t>>> rank_windows;
};

// Report windows: wall-clock buckets of equal length from the run's first window.
void report_windows(ScoreWork& w) {
  ScoreReport& rep = w.rep;
  double flush_s = 0;
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (const RankData& r : w.model.ranks) {
    flush_s = std::max(flush_s, r.flush_s);
    for (const CaptureWindow& cw : r.windows) {
      t0 = std::min(t0, cw.start_ns);
      t1 = std::max(t1, cw.end_ns);
    }
  }
  rep.window_s = w.opt.window_s > 0 ? w.opt.window_s : (flush_s > 0 ? flush_s : 10.0);
  if (t0 > t1) t0 = t1 = 0;
  rep.start_ns = t0;
  rep.end_ns = t1;
  // The window count comes from times in files: bounded, a long run gets longer windows.
  if (double(t1 - t0) / (rep.window_s * 1e9) > kMaxReportWindows) rep.window_s = double(t1 - t0) / 1e9 / kMaxReportWindows;
  w.window_ns = rep.window_s * 1e9;
  w.nwin = std::clamp(static_cast<int>(std::ceil(double(t1 - t0) / w.window_ns - 1e-9)), 1, kMaxReportWindows);
  rep.windows.resize(w.nwin);
  for (int k = 0; k < w.nwin; ++k) {
    rep.windows[k].index = k;
    rep.windows[k].start_ns = t0 + static_cast<int64_t>(k * w.window_ns);
    rep.windows[k].end_ns = std::min<int64_t>(t1, t0 + static_cast<int64_t>((k + 1) * w.window_ns));
  }
}

// Every occurrence into its report window, per rank and section.
void gather(ScoreWork& w) {
  w.acc.resize(w.model.ranks.size());
  parallel_for(w.model.ranks.size(), [&](size_t ri) {  // each rank writes only its own
    for (const CaptureWindow& cw : w.model.ranks[ri].windows) {
      for (const SectionWindow& s : cw.sections) {
        Acc& a = w.acc[ri][s.name];
        a.count += s.count;
        a.total_ns += s.total_ns;
        a.domain = s.domain;
        a.median_from_sample |= s.median_from_sample || s.occurrences.size() < s.count;
        a.parents[s.parent] += s.count;
        for (const Occurrence& o : s.occurrences) {
          int k = static_cast<int>(std::floor(double(o.start_ns - w.rep.start_ns) / w.window_ns));
          k = std::clamp(k, 0, w.nwin - 1);
          a.all.emplace_back(double(o.dur_ns), o.weight);
          a.by_window[k].emplace_back(double(o.dur_ns), o.weight);
        }
      }
    }
  });
}

// Whole-run medians, then the lowest across ranks per section.
void whole_run_medians(ScoreWork& w) {
  w.med.resize(w.model.ranks.size());
  // The medians on every core (each rank writes only its own), the lowest then in rank order.
  parallel_for(w.model.ranks.size(), [&](size_t ri) {
    for (auto& [name, a] : w.acc[ri])
      if (!a.all.empty()) w.med[ri][name] = lower_weighted_median_sorting(a.all);  // later only counted
  });
  for (size_t ri = 0; ri < w.model.ranks.size(); ++ri) {
    for (auto& [name, a] : w.acc[ri]) {
      for (auto& [p, n] : a.parents) w.parent_votes[name][p] += n;
      if (a.all.empty()) continue;
      const double m = w.med[ri].at(name);
      if (auto it = w.best_any.find(name); it == w.best_any.end() || m < it->second) w.best_any[name] = m;
      if (a.all.size() < w.opt.min_samples) continue;  // no reference from a handful of samples
      auto it = w.best.find(name);
      if (it == w.best.end() || m < it->second) w.best[name] = m;
    }
  }
}

// Per-window medians, and the lowest across ranks per section and window.
void window_medians(ScoreWork& w) {
  w.wmed.resize(w.model.ranks.size());
  // As whole_run_medians: the medians on every core, the lowest in rank order.
  parallel_for(w.model.ranks.size(), [&](size_t ri) {
    for (auto& [name, a] : w.acc[ri])
      for (auto& [k, samples] : a.by_window)
        if (samples.size() >= w.opt.min_samples)  // no window score from a handful
          w.wmed[ri][name][k] = lower_weighted_median(samples);
  });
  for (size_t ri = 0; ri < w.model.ranks.size(); ++ri)
    for (const auto& [name, by_window] : w.wmed[ri])
      for (const auto& [k, m] : by_window) {
        auto& b = w.window_best[name];
        if (!b.count(k) || m < b[k]) b[k] = m;
      }
}

// One rank's section scores, whole run and per window (into per_window).
RankScores score_rank(ScoreWork& w, size_t ri, std::map<int, RankScores>& per_window) {
  const RankData& r = w.model.ranks[ri];
  RankScores rs;
  rs.rank = r.rank;
  rs.host = r.host;
  int64_t captured_ns = 0;
  for (const CaptureWindow& cw : r.windows) captured_ns += std::max<int64_t>(0, cw.end_ns - cw.start_ns);
  for (auto& [name, a] : w.acc[ri]) {
    SectionScore sc;
    sc.count = a.count;
    sc.share = captured_ns > 0 ? double(a.total_ns) / double(captured_ns) : 0;
    sc.median_from_sample = a.median_from_sample;
    sc.samples = a.all.size();
    if (auto it = w.med[ri].find(name); it != w.med[ri].end()) {
      sc.median_ns = it->second;
      if (auto b = w.best.find(name); b != w.best.end() && sc.samples >= w.opt.min_samples)
        sc.relative = ratio(b->second, it->second);
    }
    // Individual: against the best window median seen so far on this rank (NVRx keeps the
    // best historical performance as the reference).
    double best_so_far = INFINITY;
    for (auto& [k, m] : w.wmed[ri][name]) {
      best_so_far = std::min(best_so_far, m);
      SectionScore ws;
      ws.median_ns = m;
      ws.samples = a.by_window[k].size();
      double weight = 0;
      for (auto& p : a.by_window[k]) weight += p.second;
      ws.count = static_cast<uint64_t>(std::llround(weight));
      ws.relative = ratio(w.window_best[name][k], m);
      ws.individual = ratio(best_so_far, m);
      sc.individual = std::min(sc.individual.value_or(1.0), *ws.individual);
      RankScores& wr = per_window[k];
      wr.rank = r.rank;
      wr.host = r.host;
      wr.sections[name] = ws;
    }
    rs.sections[name] = sc;
  }
  return rs;
}

void score_ranks(ScoreWork& w) {
  w.rank_windows.resize(w.model.ranks.size());
  for (size_t ri = 0; ri < w.model.ranks.size(); ++ri) {
    std::map<int, RankScores> per_window;
    w.rep.ranks.push_back(score_rank(w, ri, per_window));
    for (auto& [k, wr] : per_window) {
      w.rank_windows[ri].emplace_back(k, w.rep.windows[k].ranks.size());
      w.rep.windows[k].ranks.push_back(std::move(wr));
    }
  }
}

// Stragglers: whole-run score below threshold; the windows say when.
void list_stragglers(ScoreWork& w) {
  ScoreReport& rep = w.rep;
  for (size_t ri = 0; ri < rep.ranks.size(); ++ri) {
    const RankScores& rs = rep.ranks[ri];
    for (const auto& entry : rs.sections) {  // not a structured binding: the lambda uses it (clang 14)
      const std::string& name = entry.first;
      const SectionScore& sc = entry.second;
      auto add = [&](const char* metric, std::optional<double> score, double thr,
                     std::optional<double> SectionScore::*field) {
        if (!score || *score >= thr) return;
        if (parse_host_collective(name)) return;  // waiting for the last rank, not work (issue 25)
        if (sc.share < w.opt.min_share) {
          ++rep.below_min_share;
          return;
        }
        Straggler s{rs.rank, rs.host, "section", name, metric, *score, thr, {}};
        for (auto [k, at] : w.rank_windows[ri]) {
          const RankScores& wr = rep.windows[k].ranks[at];
          if (auto it = wr.sections.find(name); it != wr.sections.end() && (it->second.*field).value_or(1.0) < thr)
            s.windows.push_back(rep.windows[k].index);
        }
        rep.stragglers.push_back(std::move(s));
      };
      add("relative", sc.relative, w.opt.relative_threshold, &SectionScore::relative);
      add("individual", sc.individual, w.opt.individual_threshold, &SectionScore::individual);
    }
  }
  std::stable_sort(rep.stragglers.begin(), rep.stragglers.end(),
                   [](const Straggler& a, const Straggler& b) { return a.score < b.score; });
}

// Per-section summary across ranks.
void section_summaries(ScoreWork& w) {
  for (const auto& [name, lowest] : w.best_any) {
    const double b = w.best.count(name) ? w.best[name] : lowest;
    SectionSummary s;
    s.name = name;
    for (const auto& ranks_acc : w.acc)
      if (auto it = ranks_acc.find(name); it != ranks_acc.end()) s.domain = it->second.domain;
    uint64_t most = 0;
    for (auto& [p, n] : w.parent_votes[name])
      if (n > most) { most = n; s.parent = p; }
    std::vector<double> meds;
    for (size_t ri = 0; ri < w.model.ranks.size(); ++ri) {
      auto it = w.med[ri].find(name);
      if (it == w.med[ri].end()) continue;
      meds.push_back(it->second);
      // The worst rank is one with a score: a median of fewer than min_samples samples is shown
      // as a median, but ranks nobody (the rank table says "too few samples" for it).
      if (w.acc[ri].at(name).all.size() < w.opt.min_samples) continue;
      double rel = ratio(b, it->second);
      if (s.worst_rank < 0 || rel < s.worst_relative) {
        s.worst_rank = w.model.ranks[ri].rank;
        s.worst_relative = rel;
      }
    }
    s.ranks = static_cast<int>(meds.size());
    s.min_median_ns = *std::min_element(meds.begin(), meds.end());
    s.max_median_ns = *std::max_element(meds.begin(), meds.end());
    s.median_median_ns = median(meds);
    w.rep.sections.push_back(std::move(s));
  }
}

}  // namespace

ScoreReport report_windows_of(const RunModel& model, const ScoreOptions& opt) {
  ScoreReport rep;
  rep.options = opt;
  ScoreWork w{model, opt, rep};
  report_windows(w);
  return rep;
}

ScoreReport compute_scores(const RunModel& model, const ScoreOptions& opt) {
  ScoreReport rep;
  rep.options = opt;
  ScoreWork w{model, opt, rep};
  report_windows(w);
  gather(w);
  whole_run_medians(w);
  window_medians(w);
  score_ranks(w);
  list_stragglers(w);
  add_window_stragglers(rep, opt);
  section_summaries(w);
  return rep;
}

}  // namespace laggard::report
