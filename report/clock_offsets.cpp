#include "clock_offsets.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "stats.h"

namespace laggard::report {

ClockOffsets estimate_clock_offsets(const std::vector<ClockSample>& samples, const std::vector<std::string>& hosts,
                                    size_t ngroups) {
  const size_t nranks = hosts.size();
  ClockOffsets out;
  out.rank_estimate_ns.assign(nranks, 0);
  out.applied_ns.assign(nranks, 0);
  out.samples = samples.size();

  std::vector<std::vector<const ClockSample*>> by_group(ngroups), by_rank(nranks);
  for (const ClockSample& s : samples) {
    by_group[s.group].push_back(&s);
    by_rank[s.rank].push_back(&s);
  }
  // end = T(collective) + offset(rank): alternate robust (median) estimates of both. Times are
  // taken relative to the first sample so doubles keep nanosecond precision.
  const int64_t base = samples.empty() ? 0 : samples.front().end_ns;
  std::vector<double> t(ngroups, 0), offset(nranks, 0);
  std::vector<double> buf;
  for (int iter = 0; iter < 12; ++iter) {
    for (size_t g = 0; g < ngroups; ++g) {
      if (by_group[g].empty()) continue;
      buf.clear();
      for (const ClockSample* s : by_group[g]) buf.push_back(double(s->end_ns - base) - offset[s->rank]);
      t[g] = median(buf);
    }
    for (size_t r = 0; r < nranks; ++r) {
      if (by_rank[r].empty()) continue;
      buf.clear();
      for (const ClockSample* s : by_rank[r]) buf.push_back(double(s->end_ns - base) - t[s->group]);
      offset[r] = median(buf);
    }
  }

  // Zero is the clock of the first rank that has samples; then per host, the median of its ranks.
  size_t ref = 0;
  while (ref < nranks && by_rank[ref].empty()) ++ref;
  if (ref == nranks) return out;
  out.reference_rank = ref;
  const double zero = offset[ref];
  std::map<std::string, std::vector<size_t>> ranks_of;
  for (size_t r = 0; r < nranks; ++r) {
    ranks_of[hosts[r]].push_back(r);
    if (!by_rank[r].empty()) out.rank_estimate_ns[r] = offset[r] - zero;
  }
  for (auto& [host, ranks] : ranks_of) {
    ClockOffsets::Host h;
    h.host = host;
    h.ranks = ranks;
    std::vector<double> est;
    for (size_t r : ranks)
      if (!by_rank[r].empty()) est.push_back(out.rank_estimate_ns[r]);
    if (!est.empty()) {
      h.offset_ns = median(est);
      h.spread_ns = *std::max_element(est.begin(), est.end()) - *std::min_element(est.begin(), est.end());
    }
    out.hosts.push_back(std::move(h));
  }
  // The reference rank's host is zero by definition (its median may differ from the rank's own).
  double host_zero = 0;
  for (const auto& h : out.hosts)
    if (h.host == hosts[ref]) host_zero = h.offset_ns;
  for (auto& h : out.hosts) {
    h.offset_ns -= host_zero;
    for (size_t r : h.ranks) out.applied_ns[r] = h.offset_ns;
    out.max_abs_offset_ns = std::max(out.max_abs_offset_ns, std::abs(h.offset_ns));
  }

  // How well one end time per collective explains the corrected ends.
  std::vector<double> residuals;
  for (size_t g = 0; g < ngroups; ++g) {
    if (by_group[g].size() < 2) continue;
    buf.clear();
    for (const ClockSample* s : by_group[g]) buf.push_back(double(s->end_ns - base) - out.applied_ns[s->rank]);
    double m = median(buf);
    for (double v : buf) residuals.push_back(std::abs(v - m));
  }
  out.residual_ns = residuals.empty() ? 0 : median(residuals);
  return out;
}

}  // namespace laggard::report
