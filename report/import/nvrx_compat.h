// NVRx's own straggler numbers (`laggard report --nvrx-compatible`), computed from the run model
// exactly as nvidia-resiliency-ext computes them (NVIDIA/nvidia-resiliency-ext d8686d9c,
// src/nvidia_resiliency_ext/attribution/straggler/: reporting.py ReportGenerator and
// Report.identify_stragglers, straggler.py Detector, interval_tracker.py, cupti_src/CuptiProfiler.cpp),
// so a user can check laggard against NVRx on the same job. Where laggard's own scores (scores.h,
// gpu_scores.h) differ on purpose, this follows NVRx:
//  - one report per NVRx report interval (not a whole-run score): its samples only, every
//    rank's history of best medians kept across reports for the individual scores;
//  - a name (section or kernel) some rank lacks in a report has no reference: every rank's relative
//    score of it is NaN, and a rank without any kernel makes every rank's GPU relative score NaN;
//  - any number of samples makes a score (laggard asks for 5), and no share filter (laggard lists a
//    section only when it holds 1 % of its rank's time);
//  - kernels by "name_blk_X_Y_Z_grid_X_Y_Z" (any section), durations as float microseconds, median of
//    an even count the mean of the two middle values, weight NUM x AVG (float); names containing
//    "ncclDev" dropped (laggard drops every NCCL kernel, "ncclKernel_*" of older NCCL too), memcpy
//    and memset never captured; only kernels launched inside an NVTX section (NVRx profiles only
//    inside detection sections);
//  - a section's median is torch.median's (the lower middle value), of its last 8192 samples;
//    a kernel's of its last 8192;
//  - references and scores pass through float32 tensors (the all-reduce and the gather on rank 0).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model.h"
#include "steps.h"

namespace laggard::report {

// statistics.py Statistic: the fields the scores read (MIN, MAX, STD are not used by any score).
struct NvrxStat {
  double med = 0;  // Statistic.MED
  double avg = 0;  // Statistic.AVG
  double num = 0;  // Statistic.NUM
};
using NvrxSummaries = std::map<std::string, NvrxStat>;  // name -> stats, in the name's sorted order

// One rank's input to one report (Detector._get_section_summaries / _get_kernel_summaries).
struct NvrxRankInput {
  int rank = 0;
  std::string node;
  NvrxSummaries sections;  // CPU ms per section
  NvrxSummaries kernels;   // GPU us per kernel key, NCCL kernels included (the generator drops them)
};

// reporting.py Report (gather_on_rank0=True, scores_to_compute "all"): every rank; NaN: no score.
struct NvrxReport {
  std::map<int, double> gpu_relative, gpu_individual;
  std::map<std::string, std::map<int, double>> section_relative, section_individual;
  std::map<int, std::string> rank_to_node;
};

using NvrxStragglerId = std::pair<int, std::string>;  // StragglerId(rank, node)
struct NvrxStragglers {
  std::set<NvrxStragglerId> gpus_relative, gpus_individual;
  std::map<std::string, std::set<NvrxStragglerId>> sections_relative, sections_individual;  // non-empty sets only
};

struct NvrxThresholds {  // Report.identify_stragglers' defaults
  double gpu_relative = 0.75, section_relative = 0.75, gpu_individual = 0.75, section_individual = 0.75;
};

// reporting.py ReportGenerator for the whole job: one generate() per report, all ranks at once
// (what the all-reduce and the gather on rank 0 see), with every rank's history in between.
class NvrxReportGenerator {
 public:
  NvrxReport generate(const std::vector<NvrxRankInput>& ranks);

 private:
  std::map<int, std::map<std::string, double>> min_kernel_, min_section_;  // per rank: best medians so far
  std::set<std::string> kernel_names_, section_names_;                     // NameMapper: every name seen
  std::map<int, std::string> rank_to_node_;
};

NvrxStragglers nvrx_identify_stragglers(const NvrxReport& r, const NvrxThresholds& t = {});

// Statistics as NVRx computes them from raw samples.
NvrxStat nvrx_section_stat(std::vector<double> elapsed_ms);  // straggler.py: torch.median (lower middle)
NvrxStat nvrx_kernel_stat(std::vector<float> dur_us);        // CuptiProfiler.cpp computeStats (float)
float nvrx_kernel_us(int64_t dur_ns);                        // (end - start) / 1000.0f
std::string nvrx_kernel_key(const std::string& name, const uint32_t block[3], const uint32_t grid[3]);

// interval_tracker.py: the report interval in iterations from the first 16 step times of each rank
// (float32 median, the largest over ranks). 0 when some rank has fewer than 16.
int nvrx_iter_interval(const std::vector<std::vector<double>>& step_times_s, double time_interval_s,
                       int profiling_interval = 1);

// ---- over a run ----

struct NvrxOptions {
  double interval_s = 60;  // Detector.initialize(report_time_interval=...): report every ~this many seconds
  int every = 0;           // > 0: generate_report() after every this many iterations instead (the usage
                           // guide's `training_iter % N == 0`: after iterations 0, N, 2N, ...)
  NvrxThresholds thresholds;
};

struct NvrxInterval {
  int index = 0;
  int first_step = -1, last_step = -1;  // the iterations it covers (-1: report windows, no steps)
  int64_t start_ns = 0, end_ns = 0;     // host time, the first rank's
  bool exact = true;                    // false: some window had no per-kernel records (below)
  NvrxReport report;
  NvrxStragglers stragglers;
};

struct NvrxRunReport {
  bool available = false;
  std::string why_not;
  std::string schedule;       // how the reports were placed, for the reader
  int iter_interval = 0;      // iterations between reports (0: report windows)
  std::string inexact;        // why some report is not exact, when one is not
  std::vector<NvrxInterval> reports;
  int unreported_steps = 0;   // iterations after the last report (NVRx reports them at its next)
};

// With steps, NVRx's reports fall between iterations as NVRx places them (options); without, one
// report per report window of window_s seconds from the run's first window.
NvrxRunReport analyze_nvrx(const RunModel& model, const StepSet& steps, double window_s,
                           const NvrxOptions& options = {});

}  // namespace laggard::report
