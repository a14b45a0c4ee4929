// The verdict: a ranked list of findings, each naming a rank (and host, GPU), where it shows
// (section, steps), the cause, how sure it is, and what the job lost.
//
// A finding is made when a rank's per-step excess in a signal (an NVTX section's CPU time per
// step; with GPU records also its lateness at the step's collective) is statistically clear
// (robust z against the noise measured in the run itself, see excess.h) AND material to the job:
// in a synchronous job every rank waits for the slowest, so the excess costs the job its share
// of the step time, which must reach `excess.min_cost_share` (default 2 %). Transients are runs
// of >= `excess.min_steps` consecutive steps found by CUSUM. NVRx scores (0.75) still make the
// NVRx-compatible straggler list and add evidence; they make findings of their own only for
// ranks the per-step evidence could not judge (too few ranks, no steps).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "breakdown.h"
#include "comm_analysis.h"
#include "excess.h"
#include "gpu_scores.h"
#include "jitter.h"
#include "scores.h"
#include "steps.h"

namespace laggard::report {

enum class Cause { gpu_compute, host, communication, memory, unknown, gpu_health, cpu_contention };
// "gpu_compute", "host", "communication", "memory_copies", "unknown", "gpu_health" (a slow GPU whose
// NVML telemetry shows low clocks, throttling or errors; set by link_gpu_health, health_analysis.h),
// "cpu_contention" (the rank's threads waited for a CPU: its machine was busy; issue 30)
const char* cause_name(Cause c);

struct Finding {
  int rank = -1;
  std::string host;
  int device = -1;
  Cause cause = Cause::unknown;
  std::string kind;        // "persistent" | "transient" | "section" (NVRx score only)
  std::string section;     // where it shows most; empty: the step as a whole
  int first_step = -1, last_step = -1;  // transient: affected steps (inclusive); else -1
  double impact_ns = 0;    // median extra time per affected step (or per section run): what the job lost per step
  int steps_affected = 0;  // steps the loss applies to (0: unknown, e.g. NVRx-score findings)
  double cause_share = 0;  // fraction of impact_ns the cause explains
  std::string summary;     // one line with the evidence
  std::map<std::string, double> evidence;
};

struct Threshold {
  std::string name;
  double value = 0;
  std::string why;
};

struct VerdictOptions {
  ExcessOptions excess;             // statistics and materiality of per-step findings
  double min_impact_ns = 20'000;    // absolute floor of a material excess
  int min_consecutive_windows = 2;  // an NVRx individual-score finding needs this many windows
  double cause_share = 0.5;         // a cause must explain this much of the excess
  double explained_by_children = 2.0 / 3;  // a section's finding moves to its sub-sections when they explain this much
};

struct Verdict {
  std::vector<Finding> findings;    // most impact first
  std::vector<Threshold> thresholds;
};

// What the verdict reads of the steps alone: no scores, no collectives. Made while the collectives
// are analysed (issue 29: a quarter of a second of one thread at 100,000 ranks).
struct StepSignals {
  double step_ns = 0;            // median step time over ranks and steps
  std::vector<Signal> sections;  // NVTX CPU time per step (section_steps.h)
  // Issue 30, with CPU-wait measurements: [step row][rank index] the rank's CPU wait in that step
  // (NaN: not measured; empty: none at all), and the sections with the part of each rank's extra
  // wait that the section follows taken out (slope per section, see verdict_contention.cpp).
  std::vector<std::vector<double>> cpu_wait;
  std::vector<Signal> sections_less_wait;
  std::map<std::string, double> wait_slope;
};
StepSignals step_signals(const RunModel& model, const StepSet& steps);

// gpu (optional): NVRx GPU scores, to size the impact of GPU-score findings.
// comm (optional): the NCCL analysis, whose persistently-last ranks (comm stragglers) are named.
// signals: step_signals(model, steps), made here when not given.
Verdict decide(const RunModel& model, const StepSet& steps, const ScoreReport& scores,
               const JitterReport& jitter, const BreakdownReport& breakdown, const VerdictOptions& options = {},
               const GpuScoreReport* gpu = nullptr, const CommReport* comm = nullptr,
               std::optional<StepSignals> signals = std::nullopt);

// Robust z of x against the median and MAD of xs (0 when it cannot be told apart).
double robust_z(double x, const std::vector<double>& xs);

}  // namespace laggard::report
