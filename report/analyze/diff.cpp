#include "diff.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "stats.h"

namespace laggard::report {
namespace {

struct Totals {
  double count = 0, total_ns = 0;
  std::vector<std::pair<double, double>> samples;  // (duration, weight)
};

std::map<std::string, Totals> section_totals(const RunModel& m) {
  std::map<std::string, Totals> out;
  for (const RankData& r : m.ranks)
    for (const CaptureWindow& w : r.windows)
      for (const SectionWindow& s : w.sections) {
        Totals& t = out[s.name];
        t.count += double(s.count);
        t.total_ns += double(s.total_ns);
        for (const Occurrence& o : s.occurrences) t.samples.emplace_back(double(o.dur_ns), o.weight);
      }
  return out;
}

// Kernels from the per-window statistics (every window), else from the per-kernel records.
std::map<std::string, Totals> kernel_totals(const RunModel& m) {
  std::map<std::string, Totals> out;
  for (const RankData& r : m.ranks)
    for (const CaptureWindow& w : r.windows) {
      if (!w.kernel_stats.empty()) {
        for (const KernelWindowStats& k : w.kernel_stats) {
          Totals& t = out[m.strings.at(k.name)];
          t.count += double(k.count);
          t.total_ns += double(k.total_ns);
          t.samples.emplace_back(double(k.median_ns), double(k.count));
        }
      } else {
        for (const GpuActivity& a : w.gpu) {
          Totals& t = out[m.strings.at(a.name)];
          t.count += 1;
          t.total_ns += double(a.end_ns - a.start_ns);
          t.samples.emplace_back(double(a.end_ns - a.start_ns), 1.0);
        }
      }
    }
  return out;
}

// B moved from A by more than `threshold` of A (A is the base: 100 -> 136 is 36 %).
bool moved(double a, double b, double threshold) {
  if (a == b) return false;
  return a == 0 || std::fabs(b - a) / std::fabs(a) > threshold;
}

// A duration that moved by more than the threshold and by more than one occurrence's spread.
bool duration_moved(double a, double b, double threshold, double spread) {
  return moved(a, b, threshold) && std::fabs(b - a) > spread;
}

// The total counts per occurrence: a total that moved by less than the spread of each of its
// occurrences is noise too.
bool changed(const DiffEntry& e, double threshold) {
  const double occurrences = std::max({e.count_a, e.count_b, 1.0});
  return moved(e.count_a, e.count_b, threshold) ||
         duration_moved(e.median_a_ns, e.median_b_ns, threshold, e.spread_ns) ||
         duration_moved(e.total_a_ns, e.total_b_ns, threshold, e.spread_ns * occurrences);
}

std::vector<DiffEntry> compare(const std::map<std::string, Totals>& a, int na, const std::map<std::string, Totals>& b,
                               int nb, double threshold) {
  std::vector<DiffEntry> out;
  std::map<std::string, std::pair<const Totals*, const Totals*>> names;
  for (auto& [k, t] : a) names[k].first = &t;
  for (auto& [k, t] : b) names[k].second = &t;
  for (auto& [name, pair] : names) {
    DiffEntry e;
    e.name = name;
    if (pair.first) {
      e.count_a = pair.first->count / std::max(1, na);
      e.total_a_ns = pair.first->total_ns / std::max(1, na);
      e.median_a_ns = weighted_median(pair.first->samples);
      e.spread_ns = weighted_sigma(pair.first->samples);
    }
    if (pair.second) {
      e.count_b = pair.second->count / std::max(1, nb);
      e.total_b_ns = pair.second->total_ns / std::max(1, nb);
      e.median_b_ns = weighted_median(pair.second->samples);
      e.spread_ns = std::max(e.spread_ns, weighted_sigma(pair.second->samples));
    }
    if (e.median_a_ns > 0 && e.median_b_ns > 0) e.median_change = (e.median_b_ns - e.median_a_ns) / e.median_a_ns;
    e.status = !pair.first ? "added" : !pair.second ? "removed" : changed(e, threshold) ? "changed" : "same";
    out.push_back(e);
  }
  std::stable_sort(out.begin(), out.end(), [](const DiffEntry& x, const DiffEntry& y) {
    return std::fabs(x.total_b_ns - x.total_a_ns) > std::fabs(y.total_b_ns - y.total_a_ns);
  });
  return out;
}

}  // namespace

RunDiff diff_runs(const RunModel& a, const RunModel& b, double threshold) {
  RunDiff d;
  d.run_a = a.run_id;
  d.run_b = b.run_id;
  d.ranks_a = static_cast<int>(a.ranks.size());
  d.ranks_b = static_cast<int>(b.ranks.size());
  d.threshold = threshold;
  d.sections = compare(section_totals(a), d.ranks_a, section_totals(b), d.ranks_b, threshold);
  d.kernels = compare(kernel_totals(a), d.ranks_a, kernel_totals(b), d.ranks_b, threshold);
  return d;
}

}  // namespace laggard::report
