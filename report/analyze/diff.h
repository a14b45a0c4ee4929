// `laggard diff A B`: what changed between two runs (HTA's trace diff): NVTX sections and GPU
// kernels that appeared, disappeared, or changed in count or duration. Counts are per rank,
// so runs of different sizes compare. A is the base: changes are measured against A's value.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model.h"

namespace laggard::report {

struct DiffEntry {
  std::string name;
  std::string status;  // added | removed | changed | same
  double count_a = 0, count_b = 0;          // per rank
  double median_a_ns = 0, median_b_ns = 0;  // per occurrence
  double total_a_ns = 0, total_b_ns = 0;    // per rank
  double spread_ns = 0;  // the larger of the two runs' spread of one occurrence (robust sigma)
  std::optional<double> median_change;  // (B - A) / A of the medians; none when either has none
};

struct RunDiff {
  std::string run_a, run_b;
  int ranks_a = 0, ranks_b = 0;
  double threshold = 0.05;
  std::vector<DiffEntry> sections;  // largest change of total time first
  std::vector<DiffEntry> kernels;
};

// An entry is "changed" when its count moved by more than `threshold` of A's, or its median or
// total by more than `threshold` of A's and by more than the spread of one occurrence (per
// occurrence, for the total): the same program on a busier machine runs every piece of work a
// little later, and that is no change of the program.
RunDiff diff_runs(const RunModel& a, const RunModel& b, double threshold = 0.05);

}  // namespace laggard::report
