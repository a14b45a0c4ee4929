// What `laggard watch` shows and serves, one plain record per refresh: the report's own numbers
// (NVRx section and GPU scores, stragglers, steps, NCCL blame) condensed per rank, plus the newest
// report window. A pure function of the run model, so the terminal view and the Prometheus
// metrics are tested with synthetic models and no files.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model.h"
#include "scores.h"

namespace laggard::report {

struct WatchSection {
  std::optional<double> relative, individual;  // whole run, as in `laggard report`
  std::optional<double> window_relative;       // the newest report window in which the rank ran it
  double median_ns = 0;                        // whole run
};

struct WatchGpu {
  std::optional<double> relative, individual;
};

struct WatchRank {
  int rank = -1;
  std::string host;
  bool final = false;           // the process exited cleanly and wrote its last window
  int64_t data_end_ns = 0;      // end of its newest window
  uint64_t windows = 0;         // capture windows read
  bool straggler = false;       // some finding (any scope) names this rank
  std::optional<Straggler> flagged_by;  // ... the one with the lowest score: what the view's star stands for
  std::optional<double> worst_relative;  // lowest whole-run relative section score
  std::string worst_section;             // ... and its section
  std::map<std::string, WatchSection> sections;
  bool gpu_data = false;
  WatchGpu gpu;                              // all compute kernels
  std::map<std::string, WatchGpu> gpu_sections;
  uint64_t steps = 0;
  std::optional<double> step_median_ns, step_last_ns;
  bool nccl_data = false;       // took part in matched collectives
  double nccl_blame_ns = 0, nccl_waited_ns = 0;
  uint64_t nccl_collectives = 0, nccl_last = 0;
};

struct WatchWindowRank {
  int rank = -1;
  std::string worst_section;           // lowest relative score in the window
  std::optional<double> worst_relative;
  double worst_median_ns = 0;
};

struct WatchState {
  std::string dir, run_id;
  int world_size = -1;
  std::string waiting;                 // nothing to read yet, and why (then ranks is empty)
  double relative_threshold = 0.75, individual_threshold = 0.75;
  double window_s = 0;                 // report window length
  std::string step_source;
  std::vector<WatchRank> ranks;        // sorted by rank
  std::vector<Straggler> stragglers;   // worst first, as in the report
  int report_windows = 0;
  struct Newest {                      // the newest report window with data
    int index = -1;
    int64_t start_ns = 0, end_ns = 0;
    std::vector<WatchWindowRank> ranks;
  } newest;
  size_t problems = 0;
  std::vector<std::string> problem_kinds;  // distinct kinds, sorted
};

// Scores the model as `laggard report` would (same thresholds, same analyses).
WatchState summarize_for_watch(const RunModel& model, const ScoreOptions& scores, const std::string& step_section);

}  // namespace laggard::report
