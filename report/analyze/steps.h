// Training steps: the unit every per-step analysis cuts by. From the NVTX section the user
// names, else the most frequent top-level section, else the repeating sequence of NCCL
// collectives. Step k of every rank is the k-th step that rank ran.
#pragma once

#include <string>
#include <vector>

#include "model.h"

namespace laggard::report {

struct Step {
  int index = 0;
  int64_t start_ns = 0, end_ns = 0;  // host time (epoch ns)
};

struct StepSet {
  std::string source;   // how the steps were found, for the reader of the report
  std::string section;  // the step section, when steps come from NVTX
  std::vector<std::vector<Step>> per_rank;  // indexed like RunModel::ranks
  int count() const;    // steps every rank has (the comparable ones)
};

// step_section: user's choice (may be empty). Never throws; no steps gives an empty set.
StepSet detect_steps(const RunModel& model, const std::string& step_section);

}  // namespace laggard::report
