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

}  // namespace laggard::report
