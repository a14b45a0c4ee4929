// Cuts: restrict a run to some ranks, hosts, steps or sections before analysing it, the way
// HTA and the GTC analysis look at one host, one step range or one part of the model.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model.h"
#include "steps.h"

namespace laggard::report {

struct Cut {
  std::set<int> ranks;          // empty: all
  std::set<std::string> hosts;  // empty: all
  std::optional<std::pair<int, int>> steps;  // [first, last], inclusive
  std::string sections;         // ECMAScript regex on NVTX section names (and kernels' sections)
  bool empty() const { return ranks.empty() && hosts.empty() && !steps && sections.empty(); }
};

// Throws std::invalid_argument for a bad regex.
RunModel apply_cut(const RunModel& model, const Cut& cut);
StepSet apply_cut(StepSet steps, const Cut& cut);

// Each rank's data restricted to the time of its own steps [first, last] (step k of a rank is
// the k-th step it ran, as in `steps`): NVTX occurrences, GPU records and NCCL operations by
// their start, whole-window GPU kernel statistics by the window's middle. A rank without any
// of those steps keeps no data.
RunModel cut_to_steps(const RunModel& model, const StepSet& steps, std::pair<int, int> range);

// Ranks and hosts the cut names that the run does not have, one message each.
std::vector<std::string> cut_warnings(const RunModel& model, const Cut& cut);

// What the cut keeps, in words, for the report's header ("" without a cut).
std::string describe_cut(const Cut& cut, const StepSet& steps);

// "0,3,5-7" -> {0,3,5,6,7}; "10:20" or "10-20" step ranges. Throw std::invalid_argument.
std::set<int> parse_rank_list(const std::string& text);
std::pair<int, int> parse_step_range(const std::string& text);

}  // namespace laggard::report
