#include "stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

namespace laggard::report {

double median(std::vector<double> v) { return median_in_place(v); }

namespace {

// Pivot for select_nth: the median of three values at pseudo-random places. Fixed places (first,
// middle, last) met the structured ranges the analyses hand in, such as launch delays that ramp up
// in every step, with pivots near an end, round after round. The generator's seed is fixed: the same
// input is reordered the same way every run.
double median_of_three(const double* v, size_t n, uint64_t& state) {
  auto place = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
    return size_t((unsigned __int128)state * n >> 64);
  };
  const double x = v[place()], y = v[place()], z = v[place()];
  return std::max(std::min(x, y), std::min(std::max(x, y), z));
}

// Moves the values `keep` holds for to the front of [v, v + n), in one pass with no data-dependent
// branch (each value is swapped unconditionally, the write position advances by the test's 0 or 1);
// returns their count. The kept values' relative order is not preserved.
template <class Keep>
size_t partition_branchless(double* v, size_t n, Keep keep) {
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = v[i];
    const bool in = keep(x);
    v[i] = v[kept];
    v[kept] = x;
    kept += in;
  }
  return kept;
}

constexpr size_t kSmallRange = 24;     // below this std::nth_element's insertion sort is as fast
constexpr int kMaxPartitionRounds = 48;  // then std::nth_element (introselect: no quadratic worst case)

// std::nth_element's postcondition for [first, first + n) and k, by quickselect on branchless
// three-way partitions. Issue 29: introselect's comparisons mispredict about every other time on
// unordered values; this is 2.5-3x faster from 100 to 45,000 values (bench/stats_bench.cpp), and
// replaced the value-bucket narrowing (a counting pass and a gathering pass) that large ranges took
// before. A pivot that is not a number, or a range that does not shrink fast enough, is left to
// std::nth_element, whose worst case is not quadratic.
void select_nth(double* first, size_t n, size_t k) {
  uint64_t state = 0x9e3779b97f4a7c15u;
  for (int round = 0; n > kSmallRange && round < kMaxPartitionRounds; ++round) {
    const double pivot = median_of_three(first, n, state);
    if (std::isnan(pivot)) break;
    const size_t below = partition_branchless(first, n, [pivot](double x) { return x < pivot; });
    if (k < below) {
      n = below;
      continue;
    }
    // At least the pivot itself is kept here: every round shrinks the range.
    const size_t equal = partition_branchless(first + below, n - below, [pivot](double x) { return x <= pivot; });
    if (k < below + equal) return;  // first[k] == pivot, smaller values before it, larger after
    first += below + equal;
    n -= below + equal;
    k -= below + equal;
  }
  std::nth_element(first, first + k, first + n);
}

}  // namespace

double kth_smallest(double* first, double* last, size_t k) {
  select_nth(first, size_t(last - first), k);
  return first[k];
}

double median_in_place(double* first, double* last) {
  const size_t n = size_t(last - first);
  if (!n) return 0;
  // Values all equal (a kernel at the same launch position on every rank, NCCL kernels' zero
  // gaps): no selection. Stops at the first value that differs, so other ranges pay next to nothing.
  if (std::all_of(first + 1, last, [v = *first](double x) { return x == v; })) return *first;
  const size_t mid = n / 2;
  select_nth(first, n, mid);
  const double hi = first[mid];
  if (n % 2) return hi;
  return (*std::max_element(first, first + mid) + hi) / 2;  // the (mid-1)-th: the largest before it
}

namespace {

// A first guess's half-width: 3 % of the value (kernel durations across ranks spread less), at least 1 ns.
double first_width(double m) { return std::max(1.0, std::fabs(m) / 32); }

// The next guess: centred on this median; narrower while more than a sixteenth of the values fell
// inside, wider when the median fell outside. The values inside are selected among: with a quarter
// as the mark (before issue 29's 2026-11-29 afternoon), a rank's 45,000 launch delays left 5,600
// to 11,000 to select among, each time (the breakdown's launch statistics, 1 % of 960 x 903 x 50).
void update_guess(MedianGuess& g, double m, bool inside, size_t n_inside, size_t n) {
  if (!inside) g.width = std::max(4 * g.width, 2 * std::fabs(m - g.center));
  else if (16 * n_inside > n) g.width /= 2;
  g.width = std::max(g.width, 0.5);
  g.center = m;
}

}  // namespace

double* split_buffer(size_t n) {
  thread_local std::vector<double> buffer;
  if (buffer.size() < 3 * n) buffer.resize(3 * n);
  return buffer.data();
}

double median_first_time(double* values, size_t n, MedianGuess& guess) {
  const double m = median_in_place(values, values + n);
  guess = {true, m, first_width(m)};
  return m;
}

double kth_first_time(double* values, size_t n, size_t k, MedianGuess& guess) {
  const double v = kth_smallest(values, values + n, k);
  guess = {true, v, first_width(v)};
  return v;
}

namespace {

// Where the k-th smallest of a split lies: the j-th of `region`. Every value of a region is below
// every value of the next.
struct InSplit {
  double* region;
  size_t size, j;
  const double* before = nullptr;  // the nearest nonempty region before it
  size_t before_size = 0;
  bool inside;
};

InSplit locate(const GuessSplit& s, size_t k) {
  InSplit at{s.below, s.n_below, k, nullptr, 0, false};
  if (at.j < s.n_below) return at;
  if (s.n_below) at.before = s.below, at.before_size = s.n_below;
  at.region = s.inside, at.size = s.n_inside, at.j -= s.n_below, at.inside = true;
  if (at.j < s.n_inside) return at;
  if (s.n_inside) at.before = s.inside, at.before_size = s.n_inside;
  at.region = s.above, at.size = s.n_above, at.j -= s.n_inside, at.inside = false;
  return at;
}

// The j-th of its region; values all equal (NCCL kernels' zero gaps) need no selection, as in
// median_in_place.
double select_in(const InSplit& at, size_t n) {
  if (at.size == n && std::all_of(at.region + 1, at.region + at.size, [v = *at.region](double x) { return x == v; }))
    return *at.region;
  select_nth(at.region, at.size, at.j);
  return at.region[at.j];
}

}  // namespace

double median_of_split(const GuessSplit& s, MedianGuess& guess) {
  const size_t n = s.n_below + s.n_inside + s.n_above;
  if (!n) return 0;
  const InSplit at = locate(s, n / 2);
  const double hi = select_in(at, n);
  double m = hi;
  if (n % 2 == 0) {  // the (n/2 - 1)-th: the largest before it in its region, else of the region before
    const double lo = at.j ? *std::max_element(at.region, at.region + at.j)
                           : *std::max_element(at.before, at.before + at.before_size);
    m = (lo + hi) / 2;
  }
  update_guess(guess, m, at.inside, s.n_inside, n);
  return m;
}

double kth_of_split(const GuessSplit& s, size_t k, MedianGuess& guess) {
  const size_t n = s.n_below + s.n_inside + s.n_above;
  const InSplit at = locate(s, k);
  const double v = select_in(at, n);
  update_guess(guess, v, at.inside, s.n_inside, n);
  return v;
}

namespace {

// lower: the value where the cumulative weight reaches half; else the midpoint when it lands
// exactly between two values (the usual median).
double weighted_median_impl(std::vector<std::pair<double, double>>& v, bool lower) {
  if (v.empty()) return 0;
  // Two values (a kernel in two capture windows: every kernel of a rank's run in two files or
  // windows) ordered by one comparison: std::sort's insertion sort was 3 % of the samples while the
  // GPU scores ran at 100,000 ranks of summaries (2026-11-29). The same order: pairs that compare
  // equal are equal.
  if (v.size() == 2) {
    if (v[1] < v[0]) std::swap(v[0], v[1]);
  } else {
    std::sort(v.begin(), v.end());
  }
  double total = 0;
  for (const auto& p : v) total += p.second;
  const double half = total / 2;
  const double eps = 1e-9 * total;
  double cum = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    cum += v[i].second;
    if (lower ? cum >= half - eps : cum > half + eps) return v[i].first;
    if (std::fabs(cum - half) <= eps && i + 1 < v.size()) return (v[i].first + v[i + 1].first) / 2;
  }
  return v.back().first;
}

}  // namespace

double weighted_median(std::vector<std::pair<double, double>> v) { return weighted_median_impl(v, false); }
double weighted_median_sorting(std::vector<std::pair<double, double>>& v) { return weighted_median_impl(v, false); }

double weighted_sigma(const std::vector<std::pair<double, double>>& v) {
  const double m = weighted_median(v);
  std::vector<std::pair<double, double>> deviation;
  deviation.reserve(v.size());
  for (const auto& [x, w] : v) deviation.emplace_back(std::fabs(x - m), w);
  return 1.4826 * weighted_median(std::move(deviation));
}

double lower_weighted_median(std::vector<std::pair<double, double>> v) { return weighted_median_impl(v, true); }
double lower_weighted_median_sorting(std::vector<std::pair<double, double>>& v) { return weighted_median_impl(v, true); }

}  // namespace laggard::report
