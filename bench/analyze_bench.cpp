// How long each analysis of `laggard report` takes on a run model built in memory (no files:
// the reader is timed elsewhere), to show the analyses grow linearly in ranks, steps and kernels
// (issue 14). A plain timed tool, one run per size: the sizes are too large to repeat.
//
//   laggard-bench-analyze detailed RANKS KERNELS STEPS   per-kernel records in every window
//   laggard-bench-analyze summaries RANKS STEPS          window summaries only (sections, kernel
//                                                        statistics, NCCL), no per-kernel records
// Prints one line per analysis: name, seconds, and the run's size.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "analyses.h"
#include "comm_analysis.h"
#include "gpu_scores.h"
#include "scores.h"
#include "synthetic_run.h"

using namespace laggard;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
auto timed(const char* name, F f) {
  const double t0 = now_s();
  auto out = f();
  std::printf("  %-22s %9.3f s\n", name, now_s() - t0);
  std::fflush(stdout);
  return out;
}

// KERNELS kernels per step, spread over four sections like a transformer step's phases; one
// injected slow rank (rank 1, 10 % slower backward) that the verdict must find.
synth::Spec spec_of(int ranks, int kernels, int steps) {
  synth::Spec s;
  s.ranks = ranks;
  s.ranks_per_host = 8;
  s.steps = steps;
  s.window_s = 1.0;
  s.kernels.clear();
  const char* sections[] = {"data_load", "forward", "backward", "optimizer"};
  for (int k = 0; k < kernels; ++k)
    s.kernels.push_back({"kernel_" + std::to_string(k % (kernels / 2 + 1)), sections[k * 4 / kernels],
                         4'000 + 1'000 * (k % 7)});
  s.faults = {{synth::Fault::Kind::slow_gpu, 1, 3.0, 0, "backward"}};
  return s;
}

long peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

void run(report::RunModel& m) {
  report::ScoreReport scores = timed("compute_scores", [&] { return report::compute_scores(m, {}); });
  report::GpuScoreReport gpu = timed("compute_gpu_scores", [&] { return report::compute_gpu_scores(m, scores); });
  report::CommReport comm = timed("analyze_collectives", [&] { return report::analyze_collectives(m, scores); });
  report::StepSet steps = timed("detect_steps", [&] { return report::detect_steps(m, ""); });
  report::JitterReport jitter = timed("analyze_jitter", [&] { return report::analyze_jitter(m, steps); });
  report::BreakdownReport breakdown = timed("analyze_breakdown", [&] { return report::analyze_breakdown(m, steps); });
  report::Verdict v = timed("decide", [&] {
    return report::decide(m, steps, scores, jitter, breakdown, {}, &gpu, &comm);
  });
  std::printf("  findings: %zu", v.findings.size());
  for (const report::Finding& f : v.findings) std::printf(" rank %d (%s)", f.rank, f.section.c_str());
  std::printf("\n  peak RSS %ld MiB\n", peak_rss_mib());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "detailed" && argc == 5) {
    const int ranks = std::atoi(argv[2]), kernels = std::atoi(argv[3]), steps = std::atoi(argv[4]);
    report::RunModel m = timed("build model", [&] { return synth::make_run(spec_of(ranks, kernels, steps)); });
    std::printf("detailed: %d ranks x %d kernels x %d steps = %.1f M kernel records\n", ranks, kernels, steps,
                double(ranks) * (kernels + 1) * steps / 1e6);
    run(m);
    return 0;
  }
  if (mode == "summaries" && argc == 4) {
    const int ranks = std::atoi(argv[2]), steps = std::atoi(argv[3]);
    synth::Spec s = spec_of(ranks, 12, steps);
    s.window_s = 0.002;  // many windows, as a long run flushed every few seconds
    report::RunModel m = timed("build model", [&] { return synth::make_run(s); });
    for (report::RankData& r : m.ranks)
      for (report::CaptureWindow& w : r.windows) {
        w.gpu.clear();
        w.gpu.shrink_to_fit();
        w.gpu_sampled = false;
      }
    std::printf("summaries: %d ranks x %d steps, %zu windows per rank\n", ranks, steps,
                m.ranks.empty() ? size_t(0) : m.ranks[0].windows.size());
    run(m);
    return 0;
  }
  std::fprintf(stderr, "usage: %s detailed RANKS KERNELS STEPS | summaries RANKS STEPS\n", argv[0]);
  return 2;
}
