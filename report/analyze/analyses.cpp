#include "analyses.h"

#include <utility>

namespace laggard::report {

Analyses analyses_before_verdict(const RunModel& model, const ScoreReport& scores, const AnalysisOptions& opt,
                                 std::optional<StepSet> steps) {
  Analyses a;
  auto stage = [&opt](const char* name) {
    if (opt.on_stage) opt.on_stage(name);
  };
  a.steps = steps ? std::move(*steps) : detect_steps(model, opt.step_section);
  {
    // Each rank's timeline is built once for both analyses; the breakdown reads it as it is built.
    stage("GPU timelines, the breakdown's ranks");
    BreakdownByRank breakdown(model, a.steps, opt.breakdown);
    JitterByRank jitter(model, a.steps);
    std::vector<GpuTimeline> timelines = index_gpu_all(model, [&](size_t r, const GpuTimeline& g) {
      breakdown.add(r, g);
      jitter.add(r, g);
    });
    stage("jitter");
    a.jitter = jitter.finish(timelines, opt.jitter);
    stage("breakdown");
    a.breakdown = breakdown.finish();
    stage("freeing timelines");
  }
  stage("the verdict's step signals");
  a.step_signals = step_signals(model, a.steps);
  if (opt.hta_compatible) {
    stage("HTA numbers");
    a.hta = analyze_hta(model, opt.hta);
  }
  if (opt.nvrx_compatible) {
    stage("NVRx reports");
    a.nvrx = analyze_nvrx(model, a.steps, scores.window_s, opt.nvrx);
  }
  return a;
}

void decide_verdict(Analyses& a, const RunModel& model, const ScoreReport& scores, const AnalysisOptions& opt,
                    GpuScoreReport gpu, CommReport comm) {
  a.gpu = std::move(gpu);
  a.comm = std::move(comm);
  if (opt.on_stage) opt.on_stage("verdict");
  a.verdict = decide(model, a.steps, scores, a.jitter, a.breakdown, opt.verdict, &a.gpu, &a.comm,
                     std::exchange(a.step_signals, std::nullopt));
}

Analyses run_analyses(const RunModel& model, const ScoreReport& scores, const AnalysisOptions& opt,
                      const StepSet* steps_override, GpuScoreReport gpu, CommReport comm) {
  std::optional<StepSet> steps;
  if (steps_override) steps = *steps_override;
  Analyses a = analyses_before_verdict(model, scores, opt, std::move(steps));
  decide_verdict(a, model, scores, opt, std::move(gpu), std::move(comm));
  return a;
}

}  // namespace laggard::report
