#include "analyses.h"

namespace laggard::report {

Analyses run_analyses(const RunModel& model, const ScoreReport& scores, const AnalysisOptions& opt,
                      const StepSet* steps_override, GpuScoreReport gpu, CommReport comm) {
  Analyses a;
  a.gpu = std::move(gpu);
  a.comm = std::move(comm);
  auto stage = [&opt](const char* name) {
    if (opt.on_stage) opt.on_stage(name);
  };
  a.steps = steps_override ? *steps_override : detect_steps(model, opt.step_section);
  {
    stage("GPU timelines");
    std::vector<GpuTimeline> timelines = index_gpu_all(model);  // built once for both
    stage("jitter");
    a.jitter = analyze_jitter(model, a.steps, timelines, opt.jitter);
    stage("GPU timelines by stream");
    regroup_by_stream(timelines);
    stage("breakdown");
    a.breakdown = analyze_breakdown(model, a.steps, timelines, opt.breakdown);
    stage("freeing timelines");
  }
  if (opt.hta_compatible) {
    stage("HTA numbers");
    a.hta = analyze_hta(model, opt.hta);
  }
  if (opt.nvrx_compatible) {
    stage("NVRx reports");
    a.nvrx = analyze_nvrx(model, a.steps, scores.window_s, opt.nvrx);
  }
  stage("verdict");
  a.verdict = decide(model, a.steps, scores, a.jitter, a.breakdown, opt.verdict, &a.gpu, &a.comm);
  return a;
}

}  // namespace laggard::report
