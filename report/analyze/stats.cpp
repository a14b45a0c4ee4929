#include "stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

namespace laggard::report {

double median(std::vector<double> v) { return median_in_place(v); }

namespace {

constexpr size_t kSelectDirectly = 2048;  // below this, std::nth_element is as fast
constexpr size_t kBuckets = 4096;

// [lo, hi] of the values, or false when one is not finite (NaN, inf): those go to nth_element.
bool finite_range(const double* v, size_t n, double& lo, double& hi) {
  lo = hi = v[0];
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    lo = v[i] < lo ? v[i] : lo;
    hi = v[i] > hi ? v[i] : hi;
    finite &= std::isfinite(v[i]);
  }
  return finite;
}

// The values of the bucket holding the k-th smallest, moved to the front of v (k made relative
// to them); returns their count. (x - lo) * scale is non-decreasing in x, so buckets keep order.
size_t narrow(double* v, size_t n, size_t& k, double lo, double hi) {
  const double scale = double(kBuckets - 1) / (hi - lo);
  if (!std::isfinite(scale)) return n;  // a range too narrow to divide: nothing narrowed
  uint32_t count[kBuckets] = {};
  for (size_t i = 0; i < n; ++i) ++count[size_t((v[i] - lo) * scale)];
  size_t b = 0, below = 0;
  while (below + count[b] <= k) below += count[b++];
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i)
    if (size_t((v[i] - lo) * scale) == b) std::swap(v[kept++], v[i]);
  k -= below;
  return kept;
}

}  // namespace

double kth_smallest(double* first, double* last, size_t k) {
  size_t n = size_t(last - first);
  double lo, hi;
  while (n > kSelectDirectly && finite_range(first, n, lo, hi) && lo < hi) {
    const size_t kept = narrow(first, n, k, lo, hi);
    if (kept == n) break;  // every value in one bucket: nothing narrowed
    n = kept;
  }
  std::nth_element(first, first + k, first + n);
  return first[k];
}

double median_in_place(double* first, double* last) {
  const size_t n = size_t(last - first);
  if (!n) return 0;
  // Values all equal (a kernel at the same launch position on every rank, NCCL kernels' zero
  // gaps): no selection. Stops at the first value that differs, so other ranges pay next to nothing.
  if (std::all_of(first + 1, last, [v = *first](double x) { return x == v; })) return *first;
  const size_t mid = n / 2;
  if (n <= kSelectDirectly) {
    std::nth_element(first, first + mid, last);
    const double hi = first[mid];
    if (n % 2) return hi;
    return (*std::max_element(first, first + mid) + hi) / 2;
  }
  const double hi = kth_smallest(first, last, mid);
  if (n % 2) return hi;
  // The (mid-1)-th: hi itself when mid values are <= hi besides it, else the largest below hi.
  size_t below = 0;
  double lower = hi;
  bool any_below = false;
  for (const double* p = first; p != last; ++p)
    if (*p < hi) {
      ++below;
      lower = any_below ? std::max(lower, *p) : *p;
      any_below = true;
    }
  return ((below < mid ? hi : lower) + hi) / 2;
}

namespace {

// lower: the value where the cumulative weight reaches half; else the midpoint when it lands
// exactly between two values (the usual median).
double weighted_median_impl(std::vector<std::pair<double, double>> v, bool lower) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
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

double weighted_median(std::vector<std::pair<double, double>> v) { return weighted_median_impl(std::move(v), false); }

double weighted_sigma(const std::vector<std::pair<double, double>>& v) {
  const double m = weighted_median(v);
  std::vector<std::pair<double, double>> deviation;
  deviation.reserve(v.size());
  for (const auto& [x, w] : v) deviation.emplace_back(std::fabs(x - m), w);
  return 1.4826 * weighted_median(std::move(deviation));
}

double lower_weighted_median(std::vector<std::pair<double, double>> v) {
  return weighted_median_impl(std::move(v), true);
}

}  // namespace laggard::report
