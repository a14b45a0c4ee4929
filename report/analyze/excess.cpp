#include "excess.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "parallel.h"
#include "stats.h"

namespace laggard::report {
namespace {

constexpr double kMadToSigma = 1.4826;      // MAD of a normal sample -> its sigma
constexpr double kMedianStdErr = 1.2533;    // sqrt(pi/2): SE of a median = 1.2533 sigma / sqrt(n)

bool has(double x) { return !std::isnan(x); }

// Takes xs and works in it: the pooled excesses are every (step, rank) cell, 5 M values at 100,000
// ranks, and two copies of them were 80 MB of fresh memory per signal (issue 29).
double mad_sigma(std::vector<double> xs) {
  if (xs.empty()) return 0;
  const double m = median_in_place(xs);
  for (double& v : xs) v = std::fabs(v - m);  // the median of the deviations needs no order
  return kMadToSigma * median_in_place(xs);
}

// The values of one rank's column over rows [first, last], skipping missing cells.
std::vector<double> column(const std::vector<std::vector<double>>& e, size_t r, int first, int last) {
  std::vector<double> out;
  for (int k = first; k <= last; ++k)
    if (has(e[k][r])) out.push_back(e[k][r]);
  return out;
}

// Cross-rank noise of the whole signal: every (step, rank) excess pooled, so four ranks give
// a usable spread (a per-step MAD of four values is itself too noisy to divide by).
double pooled_sigma(const std::vector<std::vector<double>>& e) {
  std::vector<double> all;
  size_t cells = 0;
  for (const auto& row : e) cells += row.size();
  all.reserve(cells);
  for (const auto& row : e)
    for (double v : row)
      if (has(v)) all.push_back(v);
  return mad_sigma(std::move(all));
}

struct RankNoise {
  double own = 0;   // its step-to-step sigma
  double used = 0;  // what its z divides by
};

// The rank's own step-to-step noise from successive differences (MAD / sqrt 2): a slowdown
// of many steps shifts the level but spoils only the two differences at its ends.
double own_sigma(const std::vector<std::vector<double>>& e, size_t r) {
  std::vector<double> xs = column(e, r, 0, static_cast<int>(e.size()) - 1), diffs;
  for (size_t i = 1; i < xs.size(); ++i) diffs.push_back(xs[i] - xs[i - 1]);
  if (diffs.empty()) return 0;
  std::vector<double> dev;
  for (double d : diffs) dev.push_back(std::fabs(d));
  return kMadToSigma * median(dev) / std::sqrt(2.0);
}

RankNoise rank_noise(const std::vector<std::vector<double>>& e, size_t r, double pooled, double floor_ns) {
  RankNoise n;
  n.own = own_sigma(e, r);
  n.used = std::max({pooled, n.own, floor_ns});
  return n;
}

double z_of(double med, double sigma, size_t n) {
  return n ? med / (kMedianStdErr * sigma / std::sqrt(double(n))) : 0;
}

// The whole run as one: the rank's median excess over all its steps.
bool whole_run(const std::vector<std::vector<double>>& e, size_t r, const RankNoise& noise, double step_ns,
               const ExcessCriteria& c, Excess* out) {
  const int rows = static_cast<int>(e.size());
  std::vector<double> xs = column(e, r, 0, rows - 1);
  if (xs.size() < 2) return false;
  Excess x;
  x.rank = r;
  x.first = 0;
  x.last = rows - 1;
  x.whole_run = true;
  x.median_excess_ns = median(xs);
  double sum = 0;
  for (double v : xs) sum += v;
  x.mean_excess_ns = sum / double(xs.size());
  x.noise_ns = noise.used;
  x.own_noise_ns = noise.own;
  x.z = z_of(x.median_excess_ns, noise.used, xs.size());
  x.own_shift_ns = x.median_excess_ns;
  x.cost_share = step_ns > 0 ? x.median_excess_ns / step_ns : 0;
  *out = x;
  return x.median_excess_ns >= c.min_excess_ns && x.z >= c.z_crit;
}

// Excursions of Page's one-sided CUSUM of (e - k): [first step with S > 0, step of max S].
std::vector<std::pair<int, int>> cusum_runs(const std::vector<std::vector<double>>& e, size_t r, double k) {
  std::vector<std::pair<int, int>> runs;
  double s = 0, peak = 0;
  int start = -1, at_peak = -1;
  auto close = [&] {
    if (start >= 0 && at_peak >= start) runs.emplace_back(start, at_peak);
    start = at_peak = -1;
    peak = 0;
  };
  for (int i = 0; i < static_cast<int>(e.size()); ++i) {
    if (!has(e[i][r])) continue;
    s = std::max(0.0, s + e[i][r] - k);
    if (s <= 0) { close(); continue; }
    if (start < 0) start = i;
    if (s > peak) { peak = s; at_peak = i; }
  }
  close();
  return runs;
}

// The slowdown inside a CUSUM excursion: the excursion can run on past it (a milder excess
// after it, or a noisy step just before or after it keeps S positive). The steps whose excess
// is above half the slowdown's level, as the sub-run with the largest sum of (e - level / 2)
// (Kadane), starting from the excursion's mean and settling on its median.
std::pair<int, int> trim(const std::vector<std::vector<double>>& e, size_t r, int first, int last) {
  std::vector<double> in = column(e, r, first, last);
  double sum = 0;
  for (double v : in) sum += v;
  double half = in.empty() ? 0 : 0.5 * sum / double(in.size());
  for (int pass = 0; pass < 4; ++pass) {
    int best_first = first, best_last = first - 1, run_first = first;
    double best = 0, run = 0;
    for (int k = first; k <= last; ++k) {
      if (run <= 0) { run = 0; run_first = k; }
      run += has(e[k][r]) ? e[k][r] - half : 0;
      if (run > best) { best = run; best_first = run_first; best_last = k; }
    }
    if (best_last < best_first) break;
    first = best_first;
    last = best_last;
    const double next = 0.5 * median(column(e, r, first, last));
    if (next == half) break;
    half = next;
  }
  return {first, last};
}

bool long_enough(int first, int last, const ExcessOptions& o, const std::vector<double>& starts) {
  const int steps = last - first + 1;
  if (steps >= o.min_steps) return true;
  if (steps < 2 || o.window_ns <= 0 || starts.size() <= size_t(last) + 1) return false;
  return starts[last + 1] - starts[first] >= 2 * o.window_ns;
}

Excess run_stats(const std::vector<std::vector<double>>& e, size_t r, int first, int last, const RankNoise& noise,
                 double step_ns) {
  Excess x;
  x.rank = r;
  x.first = first;
  x.last = last;
  std::vector<double> in = column(e, r, first, last);
  std::vector<double> out = column(e, r, 0, first - 1), after = column(e, r, last + 1, int(e.size()) - 1);
  out.insert(out.end(), after.begin(), after.end());
  x.median_excess_ns = median(in);
  double sum = 0;
  for (double v : in) sum += v;
  x.mean_excess_ns = in.empty() ? 0 : sum / double(in.size());
  x.noise_ns = noise.used;
  x.own_noise_ns = noise.own;
  x.z = z_of(x.median_excess_ns, noise.used, in.size());
  x.own_shift_ns = x.median_excess_ns - median(out);
  x.cost_share = step_ns > 0 ? x.median_excess_ns / step_ns : 0;
  return x;
}

void transient_runs(const std::vector<std::vector<double>>& e, size_t r, const RankNoise& noise, double step_ns,
                    const ExcessCriteria& c, const ExcessOptions& o, const std::vector<double>& starts,
                    std::vector<Excess>& out) {
  for (auto [first, last] : cusum_runs(e, r, c.cusum_k_ns)) {
    std::tie(first, last) = trim(e, r, first, last);
    if (!long_enough(first, last, o, starts)) continue;
    Excess x = run_stats(e, r, first, last, noise, step_ns);
    x.whole_run = first == 0 && last == static_cast<int>(e.size()) - 1;
    // Material, clear against the noise, and a change against the rank's own other steps.
    if (x.median_excess_ns >= c.min_excess_ns && x.z >= c.z_crit && x.own_shift_ns >= 0.5 * c.min_excess_ns)
      out.push_back(x);
  }
}

}  // namespace

double critical_z(const ExcessOptions& o, double tests) {
  const double p = std::clamp(o.false_alarm_rate / std::max(1.0, tests), 1e-300, 0.5);
  // Upper-tail normal quantile by bisection on erfc: runs once per report.
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > p ? lo : hi) = mid;
  }
  return std::max(o.min_z, 0.5 * (lo + hi));
}

ExcessCriteria excess_criteria(const ExcessOptions& o, double step_ns, double tests) {
  ExcessCriteria c;
  c.z_crit = critical_z(o, tests);
  c.min_excess_ns = std::max(1.0, o.min_cost_share * step_ns);
  c.cusum_k_ns = 0.5 * c.min_excess_ns;
  return c;
}

std::vector<std::vector<double>> excess_matrix(const Signal& s) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<double>> e(s.ns.size());
  parallel_for(e.size(), [&](size_t k) {  // rows (steps) are independent: on every core
    const std::vector<double>& row = s.ns[k];
    std::vector<double> present;
    present.reserve(row.size());
    for (double v : row)
      if (has(v)) present.push_back(v);
    std::vector<double> out(row.size(), nan);
    if (present.size() >= 3) {  // with two ranks, either could be the slow one
      const double m = median_in_place(present);
      for (size_t r = 0; r < row.size(); ++r)
        if (has(row[r])) out[r] = row[r] - m;
    }
    e[k] = std::move(out);
  });
  return e;
}

namespace {

// Whether every rank spent the same in each step (each row's values equal): then every excess is
// 0 and, with criteria from excess_criteria, nothing can be found (a CUSUM of 0 - k with k > 0
// never rises; a median excess of 0 is below min_excess_ns >= 1). A run of summaries without
// occurrences has only such signals, and at 100,000 ranks their four excess matrices and pooled
// noise took 0.6 s of one core (issue 29).
bool flat(const Signal& s) {
  for (const std::vector<double>& row : s.ns) {
    const double* first = nullptr;
    for (const double& v : row)
      if (has(v) && (first ? v != *first : (first = &v, false))) return false;
  }
  return true;
}

// What one rank's column shows: its transient runs, or the whole run.
std::vector<Excess> detect_in_rank(const std::vector<std::vector<double>>& e, size_t r, double pooled, double step_ns,
                                   const ExcessCriteria& c, const ExcessOptions& o,
                                   const std::vector<double>& step_start_ns) {
  // Identical sleeps can give a zero spread; a nanosecond floor keeps z finite, and the
  // material-cost rule then decides.
  const double floor_ns = 1.0;
  const RankNoise noise = rank_noise(e, r, pooled, floor_ns);
  std::vector<Excess> runs;
  transient_runs(e, r, noise, step_ns, c, o, step_start_ns, runs);
  // A run over (nearly) every step is the whole run; so is a small steady excess whose
  // CUSUM excursions broke up but whose median over all steps is clear.
  const bool nearly_all = std::any_of(runs.begin(), runs.end(), [&](const Excess& x) {
    return (x.last - x.first + 1) * 10 >= 9 * static_cast<int>(e.size());
  });
  if (!nearly_all && !runs.empty()) return runs;
  Excess whole;
  if (whole_run(e, r, noise, step_ns, c, &whole)) return {whole};
  if (nearly_all) return runs;
  return {};
}

}  // namespace

std::vector<Excess> detect_excess(const Signal& s, double step_ns, const ExcessCriteria& c, const ExcessOptions& o,
                                  const std::vector<double>& step_start_ns) {
  std::vector<Excess> out;
  if (s.ns.empty() || (c.cusum_k_ns > 0 && c.min_excess_ns > 0 && flat(s))) return out;
  const std::vector<std::vector<double>> e = excess_matrix(s);
  const double pooled = pooled_sigma(e);
  // Ranks are independent: on every core, each into its own list, joined in rank order (1 s of
  // the verdict at 100,000 ranks of summaries was this loop on one core).
  std::vector<std::vector<Excess>> of_rank(s.ns.front().size());
  parallel_for(of_rank.size(), [&](size_t r) { of_rank[r] = detect_in_rank(e, r, pooled, step_ns, c, o, step_start_ns); });
  for (const std::vector<Excess>& found : of_rank) out.insert(out.end(), found.begin(), found.end());
  return out;
}

}  // namespace laggard::report
