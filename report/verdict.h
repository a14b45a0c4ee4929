// The verdict: a ranked list of findings, each naming a rank (and host, GPU), where it shows
// (section, steps), the cause, and the numbers behind it. Causes: GPU compute, host/CPU,
// communication, memory copies, unknown.
//
// Robust statistics throughout: a rank stands out when its value is far from the cross-rank
// median in units of the median absolute deviation (robust z, Iglewicz & Hoaglin's 3.5) AND the
// effect is large enough to matter (share of the step time, absolute floor), so near-identical
// ranks with a tiny MAD are not flagged. Hysteresis: a transient finding needs at least
// `min_consecutive_steps` consecutive flagged steps, and an individual-score (own history)
// finding at least `min_consecutive_windows` consecutive report windows, so one noisy step or
// window never produces or flips a verdict.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "breakdown.h"
#include "comm_analysis.h"
#include "gpu_scores.h"
#include "jitter.h"
#include "scores.h"
#include "steps.h"

namespace laggard::report {

enum class Cause { gpu_compute, host, communication, memory, unknown, gpu_health };
// "gpu_compute", "host", "communication", "memory_copies", "unknown", "gpu_health" (a slow GPU whose
// NVML telemetry shows low clocks, throttling or errors; set by link_gpu_health, health_analysis.h)
const char* cause_name(Cause c);

struct Finding {
  int rank = -1;
  std::string host;
  int device = -1;
  Cause cause = Cause::unknown;
  std::string kind;        // "persistent" | "transient" | "section"
  std::string section;     // where it shows most; empty: the step as a whole
  int first_step = -1, last_step = -1;  // transient: affected steps (inclusive); else -1
  double impact_ns = 0;    // median extra time per affected step (or per section run)
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
  double robust_z = 3.5;
  double min_effect = 0.05;         // of the median step time
  double min_impact_ns = 20'000;    // absolute floor
  int min_consecutive_steps = 2;
  int min_consecutive_windows = 2;
  double cause_share = 0.5;         // a cause must explain this much of the excess
};

struct Verdict {
  std::vector<Finding> findings;    // most impact first
  std::vector<Threshold> thresholds;
};

// gpu (optional): NVRx GPU scores, to size the impact of GPU-score findings.
// comm (optional): the NCCL analysis, whose persistently-last ranks (comm stragglers) are named.
Verdict decide(const RunModel& model, const StepSet& steps, const ScoreReport& scores,
               const JitterReport& jitter, const BreakdownReport& breakdown, const VerdictOptions& options = {},
               const GpuScoreReport* gpu = nullptr, const CommReport* comm = nullptr);

// Robust z of x against the median and MAD of xs (0 when it cannot be told apart).
double robust_z(double x, const std::vector<double>& xs);

}  // namespace laggard::report
