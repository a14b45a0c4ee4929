#include "analyses.h"

namespace laggard::report {

Analyses run_analyses(const RunModel& model, const ScoreReport& scores, const AnalysisOptions& opt,
                      const StepSet* steps_override, GpuScoreReport gpu, CommReport comm) {
  Analyses a;
  a.gpu = std::move(gpu);
  a.comm = std::move(comm);
  a.steps = steps_override ? *steps_override : detect_steps(model, opt.step_section);
  {
    const std::vector<GpuTimeline> timelines = index_gpu_all(model);  // built once for both
    a.jitter = analyze_jitter(model, a.steps, timelines, opt.jitter);
    a.breakdown = analyze_breakdown(model, a.steps, timelines, opt.breakdown);
  }
  if (opt.hta_compatible) a.hta = analyze_hta(model, opt.hta);
  a.verdict = decide(model, a.steps, scores, a.jitter, a.breakdown, opt.verdict, &a.gpu, &a.comm);
  return a;
}

}  // namespace laggard::report
