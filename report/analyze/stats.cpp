#include "stats.h"

#include <algorithm>
#include <cmath>

namespace laggard::report {

double median(std::vector<double> v) { return median_in_place(v); }

double median_in_place(double* first, double* last) {
  const size_t n = size_t(last - first);
  if (!n) return 0;
  const size_t mid = n / 2;
  std::nth_element(first, first + mid, last);
  const double hi = first[mid];
  if (n % 2) return hi;
  return (*std::max_element(first, first + mid) + hi) / 2;
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
