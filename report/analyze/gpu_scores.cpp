#include "gpu_scores.h"

#include <cxxabi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <set>
#include <tuple>

#include "stats.h"

namespace laggard::report {
namespace {

// NVRx's kernel identity: name plus launch shape.
struct KernelKey {
  uint32_t name;
  uint32_t grid[3], block[3];
  bool operator<(const KernelKey& o) const {
    return std::tie(name, grid[0], grid[1], grid[2], block[0], block[1], block[2]) <
           std::tie(o.name, o.grid[0], o.grid[1], o.grid[2], o.block[0], o.block[1], o.block[2]);
  }
};

struct KernelAcc {
  std::vector<std::pair<double, double>> medians;  // (window median, executions it stands for)
  double total_ns = 0;
  uint64_t count = 0;
  // Read many times once gathering is done (references, scores): computed once.
  double median() const {
    if (!median_known) {
      median_value = weighted_median(medians);
      median_known = true;
    }
    return median_value;
  }

 private:
  mutable double median_value = 0;
  mutable bool median_known = false;
};
using KernelMap = std::map<KernelKey, KernelAcc>;

struct Scoped {
  KernelMap whole;
  std::map<int, KernelMap> by_window;  // report window -> kernels
};

struct RankAcc {
  Scoped all;
  std::map<std::string, Scoped> sections;
};

using Reference = std::map<KernelKey, double>;

// NVRx's weighted average; no value when no kernel has a reference.
std::optional<double> weighted_score(const KernelMap& mine, const Reference& ref) {
  double num = 0, den = 0;
  int common = 0;
  for (const auto& [key, acc] : mine) {
    auto it = ref.find(key);
    if (it == ref.end()) continue;
    ++common;
    double med = acc.median();
    double ratio = med > 0 ? std::min(1.0, it->second / med) : 1.0;
    num += ratio * acc.total_ns;
    den += acc.total_ns;
  }
  if (!common) return std::nullopt;
  return den > 0 ? num / den : 1.0;
}

// Lowest median per kernel over the given ranks' maps, for kernels every one of them ran.
Reference common_minimum(const std::vector<const KernelMap*>& maps) {
  Reference ref;
  if (maps.empty()) return ref;
  for (const auto& [key, acc] : *maps.front()) {
    double best = acc.median();
    bool everywhere = true;
    for (size_t i = 1; i < maps.size() && everywhere; ++i) {
      auto it = maps[i]->find(key);
      if (it == maps[i]->end()) everywhere = false;
      else best = std::min(best, it->second.median());
    }
    if (everywhere) ref[key] = best;
  }
  return ref;
}

void add(KernelMap& m, const KernelWindowStats& s) {
  KernelKey key{s.name, {s.grid[0], s.grid[1], s.grid[2]}, {s.block[0], s.block[1], s.block[2]}};
  KernelAcc& a = m[key];
  a.medians.emplace_back(double(s.median_ns), double(s.count));
  a.total_ns += double(s.total_ns);
  a.count += s.count;
}

uint64_t count_of(const KernelMap& m) {
  uint64_t n = 0;
  for (const auto& [k, a] : m) n += a.count;
  return n;
}

int64_t time_of(const KernelMap& m) {
  double t = 0;
  for (const auto& [k, a] : m) t += a.total_ns;
  return static_cast<int64_t>(t);
}

uint64_t counter(const Counts& c, const char* key) {
  auto it = c.find(key);
  return it == c.end() ? 0 : it->second;
}

}  // namespace

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string r = status == 0 && out ? std::string(out) : name;
  std::free(out);
  return r;
}

namespace {

// A kernel's run-wide totals per section, and the ranks that ran it.
struct TopAcc {
  GpuTopKernel kernel;
  size_t last_rank = SIZE_MAX;  // rank index that counted last (ranks come in order)
};
using TopMap = std::map<std::string, std::map<std::string, TopAcc>>;

// What the steps of compute_gpu_scores pass on to each other.
struct GpuWork {
  const RunModel& model;
  ScoreReport& rep;
  GpuScoreReport& out;
  int nwin = 1;
  double window_ns = 1e10;
  std::vector<RankAcc> acc;                              // per rank index
  TopMap top;
  std::vector<std::map<int, GpuWindowRank>> per_window;  // per rank index
  // Where each rank's scores sit in out.windows: (window, index in it), by window.
  std::vector<std::vector<std::pair<int, size_t>>> rank_windows;
};

int report_window(const GpuWork& w, const CaptureWindow& cw) {
  double mid = (double(cw.start_ns) + double(cw.end_ns)) / 2;
  int k = static_cast<int>(std::floor((mid - double(w.rep.start_ns)) / w.window_ns));
  return std::clamp(k, 0, w.nwin - 1);
}

// Counts and times of one kernel statistic on the rank; compute kernels go into the scopes.
void add_stats(GpuWork& w, size_t ri, int k, const KernelWindowStats& s, RankGpu& g) {
  const std::string& section = s.section == StringTable::kNone ? kNoSection : w.model.strings.at(s.section);
  const std::string& name = w.model.strings.at(s.name);
  g.has_data = true;
  g.records += s.count;
  TopAcc& t = w.top[section][name];
  t.kernel.name = name;
  t.kernel.count += s.count;
  t.kernel.total_ns += s.total_ns;
  t.kernel.nccl = s.nccl;
  t.kernel.kind = s.kind;
  if (t.last_rank != ri) {
    t.last_rank = ri;
    ++t.kernel.ranks;
  }
  if (s.graph) g.graph_count += s.count;
  if (s.kind == GpuKind::memcpy) {
    g.memcpy_count += s.count;
    g.memcpy_ns += s.total_ns;
    return;
  }
  if (s.kind == GpuKind::memset) {
    g.memset_count += s.count;
    g.memset_ns += s.total_ns;
    return;
  }
  if (s.nccl) {
    g.nccl_count += s.count;
    g.nccl_ns += s.total_ns;
    return;
  }
  g.kernel_count += s.count;
  g.kernel_ns += s.total_ns;
  RankAcc& acc = w.acc[ri];
  add(acc.all.whole, s);
  add(acc.all.by_window[k], s);
  Scoped& sec = acc.sections[section];
  add(sec.whole, s);
  add(sec.by_window[k], s);
}

// Per rank, per scope, whole run and per report window.
void gather(GpuWork& w) {
  w.acc.resize(w.model.ranks.size());
  for (size_t ri = 0; ri < w.model.ranks.size(); ++ri) {
    const RankData& r = w.model.ranks[ri];
    RankGpu g;
    g.rank = r.rank;
    g.host = r.host;
    g.cupti_status = r.cupti_status;
    for (const CaptureWindow& cw : r.windows) {
      if (!cw.kernel_stats.empty() || cw.gpu_sampled) ++g.windows;
      if (cw.gpu_sampled) ++g.sampled_windows;
      const int k = report_window(w, cw);
      for (const KernelWindowStats& s : cw.kernel_stats) add_stats(w, ri, k, s, g);
    }
    g.lost = counter(r.dropped, "cupti_records_dropped") + counter(r.dropped, "gpu_no_timestamp");
    g.unmatched = counter(r.dropped, "unmatched_correlation");
    g.buffer_full = counter(r.dropped, "gpu_buffer_full");
    g.completeness = g.records + g.lost ? double(g.records) / double(g.records + g.lost) : 1.0;
    w.out.any |= g.has_data;
    w.out.ranks.push_back(std::move(g));
  }
  w.out.windows.resize(w.nwin);
}

// Scores for one scope: `pick` selects the scope's Scoped of a rank (null: rank lacks it).
template <class Pick, class StoreWhole, class StoreWindow>
void score_scope(const GpuWork& w, Pick pick, StoreWhole store_whole, StoreWindow store_window) {
  std::vector<const KernelMap*> whole_maps;
  for (size_t ri = 0; ri < w.acc.size(); ++ri)
    if (const Scoped* s = pick(ri); s && !s->whole.empty()) whole_maps.push_back(&s->whole);
  Reference whole_ref = common_minimum(whole_maps);
  // Each rank's windows once (not every window of every rank): ranks stay in order per window.
  std::vector<std::vector<const KernelMap*>> window_maps(w.nwin);
  for (size_t ri = 0; ri < w.acc.size(); ++ri)
    if (const Scoped* s = pick(ri))
      for (const auto& [k, m] : s->by_window)
        if (!m.empty()) window_maps[k].push_back(&m);
  std::vector<Reference> window_ref(w.nwin);
  for (int k = 0; k < w.nwin; ++k) window_ref[k] = common_minimum(window_maps[k]);
  for (size_t ri = 0; ri < w.acc.size(); ++ri) {
    const Scoped* s = pick(ri);
    if (!s || s->whole.empty()) continue;
    GpuScore whole;
    whole.kernels = count_of(s->whole);
    whole.kernel_ns = time_of(s->whole);
    whole.relative = weighted_score(s->whole, whole_ref);
    Reference best_so_far;  // NVRx's rank historical minimum, updated before scoring
    for (const auto& [k, m] : s->by_window) {
      for (const auto& [key, a] : m) {
        double med = a.median();
        auto it = best_so_far.find(key);
        if (it == best_so_far.end() || med < it->second) best_so_far[key] = med;
      }
      GpuScore ws;
      ws.kernels = count_of(m);
      ws.kernel_ns = time_of(m);
      ws.relative = weighted_score(m, window_ref[k]);
      ws.individual = weighted_score(m, best_so_far);
      if (ws.individual) whole.individual = std::min(whole.individual.value_or(1.0), *ws.individual);
      store_window(ri, k, ws);
    }
    store_whole(ri, whole);
  }
}

// Every rank's scores: all compute kernels, then each section's.
void score_all(GpuWork& w) {
  w.per_window.resize(w.acc.size());
  score_scope(
      w, [&](size_t ri) -> const Scoped* { return &w.acc[ri].all; },
      [&](size_t ri, const GpuScore& s) { w.out.ranks[ri].score = s; },
      [&](size_t ri, int k, const GpuScore& s) { w.per_window[ri][k].score = s; });
  std::set<std::string> sections;
  for (const RankAcc& a : w.acc)
    for (const auto& [name, s] : a.sections) sections.insert(name);
  for (const std::string& name : sections) {
    score_scope(
        w,
        [&](size_t ri) -> const Scoped* {
          auto it = w.acc[ri].sections.find(name);
          return it == w.acc[ri].sections.end() ? nullptr : &it->second;
        },
        [&](size_t ri, const GpuScore& s) { w.out.ranks[ri].sections[name] = s; },
        [&](size_t ri, int k, const GpuScore& s) { w.per_window[ri][k].sections[name] = s; });
  }
  w.rank_windows.resize(w.acc.size());
  for (size_t ri = 0; ri < w.acc.size(); ++ri)
    for (auto& [k, wr] : w.per_window[ri]) {
      wr.rank = w.out.ranks[ri].rank;
      w.rank_windows[ri].emplace_back(k, w.out.windows[k].size());
      w.out.windows[k].push_back(std::move(wr));
    }
}

std::optional<double> window_score(const GpuWork& w, std::pair<int, size_t> at, const std::string& section,
                                   bool relative) {
  const GpuWindowRank& wr = w.out.windows[at.first][at.second];
  const GpuScore* s = &wr.score;
  if (!section.empty()) {
    auto it = wr.sections.find(section);
    if (it == wr.sections.end()) return std::nullopt;
    s = &it->second;
  }
  return relative ? s->relative : s->individual;
}

// Stragglers, as for sections: the whole-run score decides, the windows say when.
void flag_stragglers(GpuWork& w) {
  auto flag = [&](size_t ri, const std::string& section, const GpuScore& s) {
    const RankGpu& g = w.out.ranks[ri];
    auto one = [&](const char* metric, std::optional<double> score, double thr, bool relative) {
      if (!score || *score >= thr) return;
      Straggler st{g.rank, g.host, "gpu", section, metric, *score, thr, {}};
      for (auto at : w.rank_windows[ri])
        if (auto ws = window_score(w, at, section, relative); ws && *ws < thr) st.windows.push_back(at.first);
      w.rep.stragglers.push_back(std::move(st));
    };
    one("relative", s.relative, w.rep.options.relative_threshold, true);
    one("individual", s.individual, w.rep.options.individual_threshold, false);
  };
  for (size_t ri = 0; ri < w.out.ranks.size(); ++ri) {
    flag(ri, "", w.out.ranks[ri].score);
    for (const auto& [name, s] : w.out.ranks[ri].sections) flag(ri, name, s);
  }
  std::stable_sort(w.rep.stragglers.begin(), w.rep.stragglers.end(),
                   [](const Straggler& a, const Straggler& b) { return a.score < b.score; });
}

void list_top_kernels(GpuWork& w, size_t top_n) {
  for (auto& [section, kernels] : w.top) {
    std::vector<GpuTopKernel> list;
    for (auto& [name, t] : kernels) list.push_back(t.kernel);
    std::sort(list.begin(), list.end(), [](const GpuTopKernel& a, const GpuTopKernel& b) {
      return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
    });
    if (list.size() > top_n) list.resize(top_n);
    w.out.top_kernels[section] = std::move(list);
  }
}

}  // namespace

GpuScoreReport compute_gpu_scores(const RunModel& model, ScoreReport& rep, size_t top_n) {
  GpuScoreReport out;
  GpuWork w{model, rep, out};
  w.nwin = std::max<int>(1, static_cast<int>(rep.windows.size()));
  w.window_ns = rep.window_s > 0 ? rep.window_s * 1e9 : 1e10;
  gather(w);
  score_all(w);
  flag_stragglers(w);
  list_top_kernels(w, top_n);
  return out;
}

}  // namespace laggard::report
