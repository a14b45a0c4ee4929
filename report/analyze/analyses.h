// Everything `laggard report` derives beyond the NVRx section scores, computed in one place
// so the text and JSON renderers show the same thing.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "breakdown.h"
#include "comm_analysis.h"
#include "gpu_scores.h"
#include "hta_compat.h"
#include "jitter.h"
#include "nvrx_compat.h"
#include "scores.h"
#include "steps.h"
#include "verdict.h"

namespace laggard::report {

struct AnalysisOptions {
  std::string step_section;
  JitterOptions jitter;
  BreakdownOptions breakdown;
  VerdictOptions verdict;
  bool hta_compatible = false;  // also compute HTA's own numbers (--hta-compatible)
  HtaOptions hta;
  bool nvrx_compatible = false;  // also compute NVRx's own reports (--nvrx-compatible, issue 30)
  NvrxOptions nvrx;
  // Called with each analysis' name as it starts (LAGGARD_STAGE_TIMES, the progress bar); may be empty.
  std::function<void(const std::string&)> on_stage;
};

struct Analyses {
  GpuScoreReport gpu;  // NVRx GPU scores (computed with the section scores, shown with these)
  CommReport comm;     // who everyone waited for, from the NCCL plugin's records
  StepSet steps;
  JitterReport jitter;
  BreakdownReport breakdown;
  Verdict verdict;
  std::optional<StepSignals> step_signals;  // made by analyses_before_verdict, used up by decide_verdict
  std::optional<HtaReport> hta;  // with AnalysisOptions::hta_compatible
  std::optional<NvrxRunReport> nvrx;  // with AnalysisOptions::nvrx_compatible
};

// gpu, comm: computed with `scores` beforehand (they add GPU and comm stragglers to it).
Analyses run_analyses(const RunModel& model, const ScoreReport& scores, const AnalysisOptions& options,
                      const StepSet* steps_override = nullptr, GpuScoreReport gpu = {}, CommReport comm = {});

// run_analyses in two parts, for a caller that computes the collectives meanwhile (issue 29):
// first what needs neither the GPU scores nor the collectives (steps, jitter, breakdown, the
// verdict's step signals, HTA's and NVRx's numbers; of `scores` only its window length), then with
// them the verdict, from `scores` with their stragglers added.
// `steps`: the steps to use (moved in: no copy of every rank's), or none to detect them.
Analyses analyses_before_verdict(const RunModel& model, const ScoreReport& scores, const AnalysisOptions& options,
                                 std::optional<StepSet> steps = std::nullopt);
void decide_verdict(Analyses& a, const RunModel& model, const ScoreReport& scores, const AnalysisOptions& options,
                    GpuScoreReport gpu, CommReport comm);

}  // namespace laggard::report
