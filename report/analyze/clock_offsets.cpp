#include "clock_offsets.h"

#include <algorithm>
#include <cmath>
#include <climits>
#include <map>
#include <span>

#include "parallel.h"
#include "stats.h"

namespace laggard::report {
namespace {

struct Line {
  double a = 0, b = 0;  // y = a + b x
};

// Least squares, then once more without the points further than 4 x the median |residual|
// (at least 1 us) from the first line: a few odd collectives do not tilt the fit. Called for
// every rank in every iteration of the fit: its buffers are the thread's, not allocated per call.
Line fit_line(const std::vector<double>& x, const std::vector<double>& y, bool with_slope) {
  thread_local std::vector<double> res, sorted;
  thread_local std::vector<char> keep;
  auto fit = [&] {
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
    sorted.assign(y.begin(), y.end());
    return {median_in_place(sorted), 0};
  }
  keep.assign(x.size(), 1);
  Line l = fit();
  res.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) res[i] = std::abs(y[i] - (l.a + l.b * x[i]));
  sorted.assign(res.begin(), res.end());
  const double cut = std::max(1000.0, 4 * median_in_place(sorted));
  for (size_t i = 0; i < x.size(); ++i) keep[i] = res[i] <= cut;
  return fit();
}

// The samples of each group (or rank) in one array, in the samples' order, group g's at
// [start[g], start[g + 1]): at 100,000 ranks a vector per rank, grown sample by sample, was
// 700,000 allocations and most of the fit's page faults (issue 29).
class SampleIndex {
 public:
  template <class KeyOf>
  SampleIndex(const std::vector<ClockSample>& samples, size_t nkeys, KeyOf key_of) : start_(nkeys + 1, 0) {
    for (const ClockSample& s : samples) ++start_[key_of(s) + 1];
    for (size_t k = 0; k < nkeys; ++k) start_[k + 1] += start_[k];
    items_.resize(samples.size());
    std::vector<size_t> next(start_.begin(), start_.end() - 1);
    for (const ClockSample& s : samples) items_[next[key_of(s)]++] = &s;
  }
  size_t size() const { return start_.size() - 1; }
  size_t samples() const { return items_.size(); }
  size_t first(size_t k) const { return start_[k]; }  // where key k's samples start in the array
  std::span<const ClockSample* const> operator[](size_t k) const {
    return {items_.data() + start_[k], items_.data() + start_[k + 1]};
  }

 private:
  std::vector<size_t> start_;
  std::vector<const ClockSample*> items_;
};

// The samples indexed both ways, times relative to the earliest end so that doubles keep
// nanosecond precision, and the current estimate: each group's true end time t[g] and each
// rank's clock line (its end = t + a + b t).
struct Fit {
  SampleIndex by_group, by_rank;
  int64_t base = 0;
  std::vector<double> t;
  std::vector<Line> line;
  std::vector<bool> slope;  // enough samples over a long enough span to fit drift

  Fit(const std::vector<ClockSample>& samples, size_t ngroups, size_t nranks)
      : by_group(samples, ngroups, [](const ClockSample& s) { return s.group; }),
        by_rank(samples, nranks, [](const ClockSample& s) { return s.rank; }),
        t(ngroups, 0),
        line(nranks),
        slope(nranks, false) {
    base = samples.front().end_ns;
    for (const ClockSample& s : samples) base = std::min(base, s.end_ns);
  }

  double end(const ClockSample* s) const { return double(s->end_ns - base); }
  double corr(size_t r, double x) const { return line[r].a + line[r].b * x; }

  void choose_slopes(const ClockOptions& opt) {
    for (size_t r = 0; r < by_rank.size(); ++r) {
      if (by_rank[r].size() < opt.min_drift_samples) continue;
      auto [lo, hi] = std::minmax_element(by_rank[r].begin(), by_rank[r].end(), [](auto* a, auto* b) {
        return a->end_ns < b->end_ns;
      });
      slope[r] = (*hi)->end_ns - (*lo)->end_ns >= opt.min_drift_span_ns;
    }
  }

  // A group's true end: the median of its members' corrected ends. Groups are independent: on
  // every core (each writes only its own t[g]; the lines are only read).
  void estimate_group_times() {
    parallel_for(by_group.size(), [&](size_t g) {
      if (by_group[g].empty()) return;
      thread_local std::vector<double> buf;
      buf.clear();
      for (const ClockSample* s : by_group[g]) buf.push_back(end(s) - corr(s->rank, end(s)));
      t[g] = median_in_place(buf);
    });
  }

  // Each rank's clock line from the group times: ranks are independent, on every core.
  void fit_rank_lines() {
    parallel_for(by_rank.size(), [&](size_t r) {
      if (by_rank[r].empty()) return;
      thread_local std::vector<double> xs, ys;
      xs.clear();
      ys.clear();
      for (const ClockSample* s : by_rank[r]) {
        xs.push_back(t[s->group]);
        ys.push_back(end(s) - t[s->group]);
      }
      line[r] = fit_line(xs, ys, slope[r]);
    });
  }

  double residual(size_t r, const ClockSample* s) const {
    return std::abs(end(s) - t[s->group] - corr(r, t[s->group]));
  }
};

// Relative to the reference (the first rank with samples): T' = T + zero(T) keeps every rank's
// fitted end unchanged; offset(T) - zero(T) as a function of T' (zero's slope is ppm-small:
// first order is enough).
void relative_to_reference(const Fit& f, ClockOffsets& out) {
  const size_t nranks = f.by_rank.size();
  size_t ref = 0;
  while (ref < nranks && f.by_rank[ref].empty()) ++ref;
  out.reference_rank = ref;
  const Line zero = f.line[ref];
  // Per rank on every core, each writing only its own entries; residual[i] is the residual of
  // the i-th sample in by_rank's order.
  std::vector<double> residual(f.by_rank.samples());
  parallel_for(nranks, [&](size_t r) {
    out.rank_samples[r] = f.by_rank[r].size();
    if (f.by_rank[r].empty()) return;
    out.offset_ns[r] = f.line[r].a - zero.a;
    out.drift_ppm[r] = (f.line[r].b - zero.b) * 1e6;
    double* mine = residual.data() + f.by_rank.first(r);
    for (const ClockSample* s : f.by_rank[r]) *mine++ = f.residual(r, s);
    thread_local std::vector<double> buf;
    buf.assign(residual.data() + f.by_rank.first(r), mine);
    out.rank_residual_ns[r] = median_in_place(buf);
  });
  // The residuals of collectives at least two ranks took part in, moved to the front of
  // residual (each read before anything is written over it).
  size_t shared = 0;
  for (size_t r = 0; r < nranks; ++r) {
    out.max_abs_offset_ns = std::max(out.max_abs_offset_ns, std::abs(out.offset_ns[r]));
    out.max_abs_drift_ppm = std::max(out.max_abs_drift_ppm, std::abs(out.drift_ppm[r]));
    size_t i = f.by_rank.first(r);
    for (const ClockSample* s : f.by_rank[r]) {
      if (f.by_group[s->group].size() >= 2) residual[shared++] = residual[i];
      ++i;
    }
  }
  out.residual_ns = shared == 0 ? 0 : median_in_place(residual.data(), residual.data() + shared);
}

// Per host, for the reader: the spread of its GPUs' offsets.
void host_spreads(const Fit& f, const std::vector<std::string>& hosts, ClockOffsets& out) {
  std::map<std::string, std::vector<size_t>> ranks_of;
  for (size_t r = 0; r < hosts.size(); ++r) ranks_of[hosts[r]].push_back(r);
  for (auto& [host, ranks] : ranks_of) {
    ClockOffsets::Host h;
    h.host = host;
    h.ranks = ranks;
    std::vector<double> est;
    for (size_t r : ranks)
      if (!f.by_rank[r].empty()) est.push_back(out.offset_ns[r]);
    if (!est.empty()) {
      auto [lo, hi] = std::minmax_element(est.begin(), est.end());
      h.spread_ns = *hi - *lo;
      h.offset_ns = median(est);
    }
    out.hosts.push_back(std::move(h));
  }
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

  Fit f(samples, ngroups, nranks);
  out.t_ref_ns = f.base;
  f.choose_slopes(opt);
  for (int iter = 0; iter < opt.iterations; ++iter) {  // alternate: group times, then rank clocks
    f.estimate_group_times();
    f.fit_rank_lines();
  }
  relative_to_reference(f, out);
  host_spreads(f, hosts, out);
  return out;
}

namespace {

// Per GPU, per time slice: the second smallest callback delay (the proxy's prompt reads, robust to
// one odd value) and how crowded that floor is (fourth smallest - second smallest: a proxy that
// reads promptly only now and then has a floor only that sure); INT64_MAX where a slice has fewer
// than four.
struct SliceFloor {
  int64_t floor = INT64_MAX, spread = 0;
};
std::vector<SliceFloor> slice_floors(const ClockOffsets& fit, size_t r, const std::vector<CallbackDelay>& d, int64_t lo,
                                     int64_t width, int buckets) {
  std::vector<std::vector<int64_t>> in(buckets);
  for (const CallbackDelay& x : d) {
    const int64_t t = x.gpu_ns - std::llround(fit.correction(r, x.gpu_ns));
    in[std::clamp<int64_t>((t - lo) / width, 0, buckets - 1)].push_back(x.delay_ns);
  }
  std::vector<SliceFloor> floors(buckets);
  for (int b = 0; b < buckets; ++b)
    if (in[b].size() >= 4) {
      std::partial_sort(in[b].begin(), in[b].begin() + 4, in[b].end());
      floors[b] = {in[b][1], in[b][3] - in[b][1]};
    }
  return floors;
}

// How late a GPU's proxy usually reads a stamp beyond its prompt reads: the first quartile of its
// callback delays minus the second smallest. NCCL's proxy polls on a core of its own and reads
// within microseconds, so this is small; a proxy starved of CPU (an oversubscribed node) reads
// promptly only now and then, its floor is an accident of the few prompt reads, and a
// disagreement of that size says nothing about its GPU's clock.
double proxy_noise(const std::vector<CallbackDelay>& d) {
  if (d.size() < 4) return 0;
  std::vector<int64_t> v;
  v.reserve(d.size());
  for (const CallbackDelay& x : d) v.push_back(x.delay_ns);
  std::sort(v.begin(), v.end());
  return double(v[v.size() / 4] - v[1]);
}

}  // namespace

std::vector<size_t> check_with_callbacks(ClockOffsets& fit, const std::vector<std::vector<CallbackDelay>>& delays,
                                         const std::vector<std::string>& hosts, const CallbackCheckOptions& o) {
  std::vector<size_t> corrected;
  const size_t n = std::min(hosts.size(), delays.size());
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  std::map<std::string, std::vector<size_t>> units_of;
  for (size_t r = 0; r < n && r < fit.offset_ns.size(); ++r) {
    if (delays[r].size() < o.min_samples || !fit.rank_samples[r]) continue;
    units_of[hosts[r]].push_back(r);
    for (const CallbackDelay& x : delays[r]) {
      const int64_t t = x.gpu_ns - std::llround(fit.correction(r, x.gpu_ns));
      lo = std::min(lo, t);
      hi = std::max(hi, t);
    }
  }
  // Slices of at least 32 samples each (the floors need some prompt reads), at most o.buckets.
  size_t fewest = SIZE_MAX;
  for (const auto& [host, units] : units_of)
    for (size_t r : units) fewest = std::min(fewest, delays[r].size());
  const int buckets = static_cast<int>(std::clamp<size_t>(fewest == SIZE_MAX ? 1 : fewest / 32, 1, std::max(1, o.buckets)));
  const int64_t width = lo <= hi ? (hi - lo) / buckets + 1 : 1;
  for (const auto& [host, units] : units_of) {
    if (units.size() < 2) continue;
    // (fit's offset - callbacks' offset) per GPU and slice: the same for every GPU whose fitted
    // offset is its clock's (host - reference GPU clock, plus the proxy's lag).
    std::vector<std::vector<double>> diff(units.size(), std::vector<double>(buckets, NAN));
    std::vector<std::vector<double>> floor_spread(units.size());
    for (size_t k = 0; k < units.size(); ++k) {
      const size_t r = units[k];
      std::vector<SliceFloor> floors = slice_floors(fit, r, delays[r], lo, width, buckets);
      for (int b = 0; b < buckets; ++b)
        if (floors[b].floor != INT64_MAX) {
          diff[k][b] = fit.correction(r, lo + width * b + width / 2) + double(floors[b].floor);
          floor_spread[k].push_back(double(floors[b].spread));
        }
    }
    std::vector<std::vector<double>> e(units.size());
    for (int b = 0; b < buckets; ++b) {
      std::vector<double> col;
      for (size_t k = 0; k < units.size(); ++k)
        if (!std::isnan(diff[k][b])) col.push_back(diff[k][b]);
      if (col.size() < 2) continue;
      const double mid = median(col);
      for (size_t k = 0; k < units.size(); ++k)
        if (!std::isnan(diff[k][b])) e[k].push_back(diff[k][b] - mid);
    }
    // How sure the floors are: the host's typical floor spread, and each GPU's slice-to-slice
    // variation.
    std::vector<double> host_spreads, noise(units.size());
    for (const auto& v : floor_spread)
      if (!v.empty()) host_spreads.push_back(median(v));
    for (size_t k = 0; k < units.size(); ++k) noise[k] = proxy_noise(delays[units[k]]);
    const double host_spread = std::max(host_spreads.empty() ? 0 : median(host_spreads), median(noise));
    for (size_t k = 0; k < units.size(); ++k) {
      if (e[k].empty()) continue;
      std::vector<double> v = e[k];
      const double disagreement = median(v);
      for (double& x : v) x = std::abs(x - disagreement);
      const double spread = std::max({v.size() >= 2 ? median(v) : 0.0, host_spread, noise[k]});
      if (std::abs(disagreement) <= std::max(o.tolerance_ns, 3 * spread)) continue;
      fit.offset_ns[units[k]] -= disagreement;
      corrected.push_back(units[k]);
    }
  }
  fit.max_abs_offset_ns = 0;
  for (size_t r = 0; r < fit.offset_ns.size(); ++r)
    if (fit.rank_samples[r]) fit.max_abs_offset_ns = std::max(fit.max_abs_offset_ns, std::abs(fit.offset_ns[r]));
  std::sort(corrected.begin(), corrected.end());
  return corrected;
}

}  // namespace laggard::report
