// NVRx straggler scores (nvidia-resiliency-ext, straggler package) for NVTX sections.
//   relative score   = lowest median across ranks / this rank's median        (per window and run)
//   individual score = this rank's best window median so far / this window's median
// Scores run from 0 (worst) to 1 (best); below a threshold the rank is a straggler. As in NVRx,
// a median of an even count is the lower middle value (torch.median), the individual reference
// includes the current window (so a rank's first window scores 1), and a rank is a straggler
// when its score is strictly below the threshold. Unlike NVRx, a section some rank never ran
// is still scored among the ranks that ran it (NVRx turns it into NaN for everyone).
// Report windows are wall-clock buckets of equal length starting at the run's first window,
// so every rank is compared over the same interval regardless of when its flushes happened.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model.h"

namespace laggard::report {

// A score needs at least this many stored samples (occurrences) behind its median, in the
// window or the whole run it covers: fewer give no score (and no straggler), and never serve as
// the reference other scores are measured against. (NVRx has no such minimum: min_samples 1.)
constexpr size_t kMinScoreSamples = 5;

// At most this many report windows: a longer run gets longer windows (ScoreReport::window_s).
constexpr int kMaxReportWindows = 10000;

struct ScoreOptions {
  double relative_threshold = 0.75;
  double individual_threshold = 0.75;
  double window_s = 0;  // 0: the capture flush interval recorded in the files
  // A section is listed as a straggler only if it holds at least this share of its rank's
  // captured time (its total over the rank's windows' span): one-off 100 ns ranges are noise.
  // Its scores stay in the report either way.
  double min_share = 0.01;
  size_t min_samples = kMinScoreSamples;
};

struct SectionScore {
  uint64_t count = 0;                 // occurrences recorded (exact, sampled or not)
  size_t samples = 0;                 // stored occurrences the median is taken from
  double median_ns = 0;
  double share = 0;                   // of the rank's captured time (whole run only)
  bool median_from_sample = false;    // some window's median came from a sample
  std::optional<double> relative;     // no value: no data to compare, or too few samples
  std::optional<double> individual;   // whole run: the lowest per-window individual score
};

struct RankScores {
  int rank = -1;
  std::string host;
  std::map<std::string, SectionScore> sections;
};

struct WindowScores {
  int index = 0;
  int64_t start_ns = 0, end_ns = 0;
  std::vector<RankScores> ranks;  // only ranks with data in this window
};

struct Straggler {
  int rank = -1;
  std::string host;
  std::string scope = "section";
  std::string section;
  std::string metric;       // "relative" | "individual"
  double score = 0;         // whole-run score of that metric
  double threshold = 0;
  std::vector<int> windows; // report windows whose own score is below the threshold
};

struct SectionSummary {
  std::string name;    // as Nsight Systems shows it
  std::string domain;  // NVTX domain; empty: default
  std::string parent;  // most common parent, empty for top level
  int ranks = 0;
  double min_median_ns = 0, median_median_ns = 0, max_median_ns = 0;
  int worst_rank = -1;          // among the ranks with a score (min_samples); -1: none has one
  double worst_relative = 1;
};

struct ScoreReport {
  ScoreOptions options;
  double window_s = 0;
  int64_t start_ns = 0, end_ns = 0;
  std::vector<RankScores> ranks;       // whole run, every rank of the model
  std::vector<WindowScores> windows;
  std::vector<SectionSummary> sections;
  std::vector<Straggler> stragglers;   // worst first
  int below_min_share = 0;             // straggler scores not listed: section under min_share
  // NVRx flags a rank in each report window in which it is slow: sections whose whole-run score is
  // fine but some windows' is not (score: the lowest window score; windows: those below threshold).
  std::vector<Straggler> window_stragglers;
};

ScoreReport compute_scores(const RunModel& model, const ScoreOptions& options);

// The report windows compute_scores starts from, alone: `windows` (without ranks), start_ns,
// end_ns and window_s, as compute_scores sets them. For the NCCL analysis, which needs only these
// and so runs beside the section scores (issue 29).
ScoreReport report_windows_of(const RunModel& model, const ScoreOptions& options);

}  // namespace laggard::report
