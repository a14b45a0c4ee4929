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
  double median() const { return weighted_median(medians); }
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

GpuScoreReport compute_gpu_scores(const RunModel& model, ScoreReport& rep, size_t top_n) {
  GpuScoreReport out;
  const int nwin = std::max<int>(1, static_cast<int>(rep.windows.size()));
  const double window_ns = rep.window_s > 0 ? rep.window_s * 1e9 : 1e10;
  auto report_window = [&](const CaptureWindow& w) {
    double mid = (double(w.start_ns) + double(w.end_ns)) / 2;
    int k = static_cast<int>(std::floor((mid - double(rep.start_ns)) / window_ns));
    return std::clamp(k, 0, nwin - 1);
  };

  // Gather: per rank, per scope, whole run and per report window.
  std::vector<RankAcc> acc(model.ranks.size());
  std::map<std::string, std::map<std::string, GpuTopKernel>> top;
  std::map<std::string, std::map<std::string, std::set<int>>> top_ranks;
  for (size_t ri = 0; ri < model.ranks.size(); ++ri) {
    const RankData& r = model.ranks[ri];
    RankGpu g;
    g.rank = r.rank;
    g.host = r.host;
    g.cupti_status = r.cupti_status;
    for (const CaptureWindow& w : r.windows) {
      if (!w.kernel_stats.empty() || w.gpu_sampled) ++g.windows;
      if (w.gpu_sampled) ++g.sampled_windows;
      int k = report_window(w);
      for (const KernelWindowStats& s : w.kernel_stats) {
        g.has_data = true;
        g.records += s.count;
        const std::string& section = s.section == StringTable::kNone ? kNoSection : model.strings.at(s.section);
        const std::string& name = model.strings.at(s.name);
        GpuTopKernel& t = top[section][name];
        t.name = name;
        t.count += s.count;
        t.total_ns += s.total_ns;
        t.nccl = s.nccl;
        t.kind = s.kind;
        top_ranks[section][name].insert(r.rank);
        if (s.graph) g.graph_count += s.count;
        if (s.kind == GpuKind::memcpy) {
          g.memcpy_count += s.count;
          g.memcpy_ns += s.total_ns;
          continue;
        }
        if (s.kind == GpuKind::memset) {
          g.memset_count += s.count;
          g.memset_ns += s.total_ns;
          continue;
        }
        if (s.nccl) {
          g.nccl_count += s.count;
          g.nccl_ns += s.total_ns;
          continue;
        }
        g.kernel_count += s.count;
        g.kernel_ns += s.total_ns;
        add(acc[ri].all.whole, s);
        add(acc[ri].all.by_window[k], s);
        Scoped& sec = acc[ri].sections[section];
        add(sec.whole, s);
        add(sec.by_window[k], s);
      }
    }
    g.lost = counter(r.dropped, "cupti_records_dropped") + counter(r.dropped, "gpu_no_timestamp");
    g.unmatched = counter(r.dropped, "unmatched_correlation");
    g.buffer_full = counter(r.dropped, "gpu_buffer_full");
    g.completeness = g.records + g.lost ? double(g.records) / double(g.records + g.lost) : 1.0;
    out.any |= g.has_data;
    out.ranks.push_back(std::move(g));
  }
  out.windows.resize(nwin);

  // Scores for one scope: `pick` selects the scope's Scoped of a rank (null: rank lacks it).
  auto score_scope = [&](auto pick, auto store_whole, auto store_window) {
    std::vector<const KernelMap*> whole_maps;
    for (size_t ri = 0; ri < acc.size(); ++ri)
      if (const Scoped* s = pick(ri); s && !s->whole.empty()) whole_maps.push_back(&s->whole);
    Reference whole_ref = common_minimum(whole_maps);
    std::map<int, Reference> window_ref;
    for (int k = 0; k < nwin; ++k) {
      std::vector<const KernelMap*> maps;
      for (size_t ri = 0; ri < acc.size(); ++ri)
        if (const Scoped* s = pick(ri))
          if (auto it = s->by_window.find(k); it != s->by_window.end() && !it->second.empty())
            maps.push_back(&it->second);
      window_ref[k] = common_minimum(maps);
    }
    for (size_t ri = 0; ri < acc.size(); ++ri) {
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
  };

  std::vector<std::map<int, GpuWindowRank>> per_window(acc.size());
  score_scope([&](size_t ri) -> const Scoped* { return &acc[ri].all; },
              [&](size_t ri, const GpuScore& s) { out.ranks[ri].score = s; },
              [&](size_t ri, int k, const GpuScore& s) { per_window[ri][k].score = s; });
  std::set<std::string> sections;
  for (const RankAcc& a : acc)
    for (const auto& [name, s] : a.sections) sections.insert(name);
  for (const std::string& name : sections) {
    score_scope(
        [&](size_t ri) -> const Scoped* {
          auto it = acc[ri].sections.find(name);
          return it == acc[ri].sections.end() ? nullptr : &it->second;
        },
        [&](size_t ri, const GpuScore& s) { out.ranks[ri].sections[name] = s; },
        [&](size_t ri, int k, const GpuScore& s) { per_window[ri][k].sections[name] = s; });
  }
  for (size_t ri = 0; ri < acc.size(); ++ri)
    for (auto& [k, wr] : per_window[ri]) {
      wr.rank = out.ranks[ri].rank;
      out.windows[k].push_back(std::move(wr));
    }

  // Stragglers, as for sections: the whole-run score decides, the windows say when.
  auto window_score = [&](int k, int rank, const std::string& section, bool relative) -> std::optional<double> {
    for (const GpuWindowRank& wr : out.windows[k]) {
      if (wr.rank != rank) continue;
      const GpuScore* s = &wr.score;
      if (!section.empty()) {
        auto it = wr.sections.find(section);
        if (it == wr.sections.end()) return std::nullopt;
        s = &it->second;
      }
      return relative ? s->relative : s->individual;
    }
    return std::nullopt;
  };
  auto flag = [&](const RankGpu& g, const std::string& section, const GpuScore& s) {
    auto one = [&](const char* metric, std::optional<double> score, double thr, bool relative) {
      if (!score || *score >= thr) return;
      Straggler st{g.rank, g.host, "gpu", section, metric, *score, thr, {}};
      for (int k = 0; k < nwin; ++k)
        if (auto ws = window_score(k, g.rank, section, relative); ws && *ws < thr) st.windows.push_back(k);
      rep.stragglers.push_back(std::move(st));
    };
    one("relative", s.relative, rep.options.relative_threshold, true);
    one("individual", s.individual, rep.options.individual_threshold, false);
  };
  for (const RankGpu& g : out.ranks) {
    flag(g, "", g.score);
    for (const auto& [name, s] : g.sections) flag(g, name, s);
  }
  std::stable_sort(rep.stragglers.begin(), rep.stragglers.end(),
                   [](const Straggler& a, const Straggler& b) { return a.score < b.score; });

  for (auto& [section, kernels] : top) {
    std::vector<GpuTopKernel> list;
    for (auto& [name, t] : kernels) {
      t.ranks = static_cast<int>(top_ranks[section][name].size());
      list.push_back(t);
    }
    std::sort(list.begin(), list.end(), [](const GpuTopKernel& a, const GpuTopKernel& b) {
      return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
    });
    if (list.size() > top_n) list.resize(top_n);
    out.top_kernels[section] = std::move(list);
  }
  return out;
}

}  // namespace laggard::report
