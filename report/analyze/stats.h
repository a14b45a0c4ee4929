// Order statistics used by the analyses. Medians, not means: one outlier step must not move
// a rank's score.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace laggard::report {

// Standard median (mean of the two middle values for an even count). Empty input: 0.
double median(std::vector<double> values);
// The same of [first, last), in place: reorders the range instead of copying it (issue 29: the
// per-rank medians of 45,000 launch delays were a copy each), and leaves it as
// std::nth_element(first, first + n / 2, last) does: from the middle position on, the larger half.
double median_in_place(double* first, double* last);
inline double median_in_place(std::vector<double>& v) { return median_in_place(v.data(), v.data() + v.size()); }
// The k-th smallest of [first, last) (k < last - first), as std::nth_element gives it and leaves the
// range: nothing larger before it, nothing smaller after. By a quickselect without data-dependent
// branches (introselect's mispredictions made the per-rank medians of 45,000 launch delays, and the
// cross-rank medians of the jitter analysis, the report's largest costs at 960 ranks).
double kth_smallest(double* first, double* last, size_t k);

// Where the median of a series of similar value sets lay last time (one kernel position's durations
// across ranks, step after step), so that the next one is found by one pass that sorts the values
// into below, inside and above [center - width, center + width], and a selection among the few inside.
// Only the time depends on it: median_guessed's result is exact whatever the guess.
struct MedianGuess {
  bool known = false;
  double center = 0, width = 0;
};

// median_in_place of the n values get(0), ..., get(n - 1), the same double, with the guess kept up
// to date (issue 29: the jitter analysis' cross-rank medians and the breakdown's per-rank medians of
// launch delays were a sixth of 960 x 903 x 50, three partition passes each). The values are split in
// the calling thread's own buffer (split_buffer).
template <class Get>
double median_guessed(size_t n, Get get, MedianGuess& guess);
// The k-th smallest of them (k < n), as kth_smallest gives it, likewise.
template <class Get>
double kth_guessed(size_t n, Get get, size_t k, MedianGuess& guess);

// Median of weighted values; equals median() when all weights are equal.
double weighted_median(std::vector<std::pair<double, double>> value_weight);
// The same, sorting the caller's values instead of a copy (issue 29: a copy per kernel and rank
// was 10 million allocations at 100,000 ranks of summaries).
double weighted_median_sorting(std::vector<std::pair<double, double>>& value_weight);

// Robust spread of weighted values: 1.4826 x the weighted median absolute deviation from their
// weighted median (the standard deviation, for a normal sample). Empty input: 0.
double weighted_sigma(const std::vector<std::pair<double, double>>& value_weight);

// NVRx's section statistic: torch.median, the LOWER middle value for an even count
// (sorted[(n-1)/2]); weighted: the smallest value whose cumulative weight reaches half.
double lower_weighted_median(std::vector<std::pair<double, double>> value_weight);
double lower_weighted_median_sorting(std::vector<std::pair<double, double>>& value_weight);

// What the templates above leave to stats.cpp: the values, split around the guess when there is one.
struct GuessSplit {
  double *below, *inside, *above;  // each region's values, any order
  size_t n_below, n_inside, n_above;
};
double median_of_split(const GuessSplit& split, MedianGuess& guess);
double kth_of_split(const GuessSplit& split, size_t k, MedianGuess& guess);
double median_first_time(double* values, size_t n, MedianGuess& guess);
double kth_first_time(double* values, size_t n, size_t k, MedianGuess& guess);
// The calling thread's buffer, with room for 3n values (kept from call to call).
double* split_buffer(size_t n);

// Every value stored in all three regions, one of which then grows: no branch on the values.
template <class Get>
GuessSplit split_around(size_t n, Get get, const MedianGuess& guess, double* scratch) {
  const double lo = guess.center - guess.width, hi = guess.center + guess.width;
  GuessSplit s{scratch, scratch + n, scratch + 2 * n, 0, 0, 0};
  for (size_t i = 0; i < n; ++i) {
    const double x = get(i);
    const size_t is_below = x < lo, is_above = x > hi;
    s.below[s.n_below] = x;
    s.inside[s.n_inside] = x;
    s.above[s.n_above] = x;
    s.n_below += is_below;
    s.n_above += is_above;
    s.n_inside += 1 - is_below - is_above;
  }
  return s;
}

template <class Get>
double median_guessed(size_t n, Get get, MedianGuess& guess) {
  double* scratch = split_buffer(n);
  if (guess.known) return median_of_split(split_around(n, get, guess, scratch), guess);
  for (size_t i = 0; i < n; ++i) scratch[i] = get(i);
  return median_first_time(scratch, n, guess);
}

template <class Get>
double kth_guessed(size_t n, Get get, size_t k, MedianGuess& guess) {
  double* scratch = split_buffer(n);
  if (guess.known) return kth_of_split(split_around(n, get, guess, scratch), k, guess);
  for (size_t i = 0; i < n; ++i) scratch[i] = get(i);
  return kth_first_time(scratch, n, k, guess);
}

}  // namespace laggard::report
