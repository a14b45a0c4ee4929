#include "clock_offsets.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "stats.h"

namespace laggard::report {
namespace {

struct Line {
  double a = 0, b = 0;  // y = a + b x
};

// Least squares, then once more without the points further than 4 x the median |residual|
// (at least 1 us) from the first line: a few odd collectives do not tilt the fit.
Line fit_line(const std::vector<double>& x, const std::vector<double>& y, bool with_slope) {
  auto fit = [&](const std::vector<bool>& keep) {
    Line l;
    double n = 0, sx = 0, sy = 0;
    for (size_t i = 0; i < x.size(); ++i)
      if (keep[i]) n += 1, sx += x[i], sy += y[i];
    if (n == 0) return l;
    const double mx = sx / n, my = sy / n;
    double sxx = 0, sxy = 0;
    for (size_t i = 0; i < x.size(); ++i)
      if (keep[i]) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
    l.b = with_slope && sxx > 0 ? sxy / sxx : 0;
    l.a = my - l.b * mx;
    return l;
  };
  if (!with_slope) {  // offset only: the median is robust by itself
    std::vector<double> v = y;
    return {median(v), 0};
  }
  std::vector<bool> keep(x.size(), true);
  Line l = fit(keep);
  std::vector<double> res(x.size());
  for (size_t i = 0; i < x.size(); ++i) res[i] = std::abs(y[i] - (l.a + l.b * x[i]));
  std::vector<double> sorted = res;
  const double cut = std::max(1000.0, 4 * median(sorted));
  for (size_t i = 0; i < x.size(); ++i) keep[i] = res[i] <= cut;
  return fit(keep);
}

}  // namespace

ClockOffsets estimate_clock_offsets(const std::vector<ClockSample>& samples, const std::vector<std::string>& hosts,
                                    size_t ngroups, const ClockOptions& opt) {
  const size_t nranks = hosts.size();
  ClockOffsets out;
  out.offset_ns.assign(nranks, 0);
  out.drift_ppm.assign(nranks, 0);
  out.rank_residual_ns.assign(nranks, 0);
  out.rank_samples.assign(nranks, 0);
  out.samples = samples.size();
  if (samples.empty()) return out;

  std::vector<std::vector<const ClockSample*>> by_group(ngroups), by_rank(nranks);
  for (const ClockSample& s : samples) {
    by_group[s.group].push_back(&s);
    by_rank[s.rank].push_back(&s);
  }
  // Times relative to the earliest end, so doubles keep nanosecond precision.
  int64_t base = samples.front().end_ns;
  for (const ClockSample& s : samples) base = std::min(base, s.end_ns);
  out.t_ref_ns = base;

  std::vector<double> t(ngroups, 0);
  std::vector<Line> line(nranks);
  std::vector<bool> slope(nranks, false);
  for (size_t r = 0; r < nranks; ++r) {
    if (by_rank[r].size() < opt.min_drift_samples) continue;
    auto [lo, hi] = std::minmax_element(by_rank[r].begin(), by_rank[r].end(),
                                        [](const ClockSample* a, const ClockSample* b) { return a->end_ns < b->end_ns; });
    slope[r] = (*hi)->end_ns - (*lo)->end_ns >= opt.min_drift_span_ns;
  }
  auto corr = [&](size_t r, double x) { return line[r].a + line[r].b * x; };
  std::vector<double> buf, xs, ys;
  for (int iter = 0; iter < opt.iterations; ++iter) {
    for (size_t g = 0; g < ngroups; ++g) {
      if (by_group[g].empty()) continue;
      buf.clear();
      for (const ClockSample* s : by_group[g]) {
        double e = double(s->end_ns - base);
        buf.push_back(e - corr(s->rank, e));
      }
      t[g] = median(buf);
    }
    for (size_t r = 0; r < nranks; ++r) {
      if (by_rank[r].empty()) continue;
      xs.clear();
      ys.clear();
      for (const ClockSample* s : by_rank[r]) {
        xs.push_back(t[s->group]);
        ys.push_back(double(s->end_ns - base) - t[s->group]);
      }
      line[r] = fit_line(xs, ys, slope[r]);
    }
  }

  // Zero is the clock of the first rank that has samples.
  size_t ref = 0;
  while (ref < nranks && by_rank[ref].empty()) ++ref;
  out.reference_rank = ref;
  const Line zero = line[ref];
  std::vector<double> residuals;
  for (size_t r = 0; r < nranks; ++r) {
    out.rank_samples[r] = by_rank[r].size();
    if (by_rank[r].empty()) continue;
    // Relative to the reference: T' = T + zero(T) keeps every rank's fitted end unchanged.
    // offset(T) - zero(T) as a function of T' (zero's slope is ppm-small: first order is enough).
    const double b = line[r].b - zero.b;
    out.offset_ns[r] = line[r].a - zero.a;
    out.drift_ppm[r] = b * 1e6;
    out.max_abs_offset_ns = std::max(out.max_abs_offset_ns, std::abs(out.offset_ns[r]));
    out.max_abs_drift_ppm = std::max(out.max_abs_drift_ppm, std::abs(out.drift_ppm[r]));
    buf.clear();
    for (const ClockSample* s : by_rank[r]) {
      double res = std::abs(double(s->end_ns - base) - t[s->group] - corr(r, t[s->group]));
      buf.push_back(res);
      if (by_group[s->group].size() >= 2) residuals.push_back(res);
    }
    out.rank_residual_ns[r] = median(buf);
  }
  out.residual_ns = residuals.empty() ? 0 : median(residuals);
  // Per host, for the reader: the spread of its GPUs' offsets.
  std::map<std::string, std::vector<size_t>> ranks_of;
  for (size_t r = 0; r < nranks; ++r) ranks_of[hosts[r]].push_back(r);
  for (auto& [host, ranks] : ranks_of) {
    ClockOffsets::Host h;
    h.host = host;
    h.ranks = ranks;
    std::vector<double> est;
    for (size_t r : ranks)
      if (!by_rank[r].empty()) est.push_back(out.offset_ns[r]);
    if (!est.empty()) {
      auto [lo, hi] = std::minmax_element(est.begin(), est.end());
      h.spread_ns = *hi - *lo;
      h.offset_ns = median(est);
    }
    out.hosts.push_back(std::move(h));
  }
  return out;
}

}  // namespace laggard::report
