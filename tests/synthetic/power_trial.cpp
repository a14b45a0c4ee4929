#include "power_trial.h"

#include <map>
#include <random>

#include "analyses.h"
#include "comm_analysis.h"
#include "gpu_scores.h"
#include "scores.h"
#include "synthetic_run.h"

namespace laggard::synth {
namespace {

// CPU-only: issue 13's loop, train_step ~15.5 ms.
std::vector<KernelSpec> cpu_layout() {
  return {{"load", "data_load", 1'000'000},
          {"fwd", "forward", 4'000'000},
          {"bwd", "backward", 8'000'000},
          {"opt", "optimizer", 2'000'000}};
}

int64_t section_ns(const std::vector<KernelSpec>& ks, const std::string& section) {
  int64_t t = 0;
  for (const KernelSpec& k : ks)
    if (k.section == section && k.kind == GpuKind::kernel) t += k.dur_ns;
  return t;
}

Spec spec_of(const PowerTrial& t) {
  Spec s;
  s.gpu = t.gpu;
  s.ranks = t.ranks;
  s.ranks_per_host = 8;
  s.steps = t.steps;
  s.jitter = t.noise;
  s.seed = t.seed;
  if (!t.gpu) {
    s.kernels = cpu_layout();
    s.step_gap_ns = 300'000;
    s.window_s = 0.1;
  }
  return s;
}

// Median step time of a healthy run of this layout (host time, what the verdict divides by).
double step_ns(const PowerTrial& t) {
  static std::map<bool, double> cache;
  auto it = cache.find(t.gpu);
  if (it != cache.end()) return it->second;
  PowerTrial h = t;
  h.ranks = 4;
  h.noise = 0;
  report::RunModel m = make_run(spec_of(h));
  report::StepSet s = report::detect_steps(m, "");
  return cache[t.gpu] = double(s.per_rank[0][0].end_ns - s.per_rank[0][0].start_ns);
}

}  // namespace

double section_share(bool gpu, const std::string& section) {
  PowerTrial t;
  t.gpu = gpu;
  return double(section_ns(spec_of(t).kernels, section)) / step_ns(t);
}

PowerOutcome run_power_trial(const PowerTrial& t) {
  Spec spec = spec_of(t);
  std::mt19937_64 rng(t.seed * 7919 + 17);
  const int rank = std::uniform_int_distribution<int>(0, t.ranks - 1)(rng);
  const bool healthy = t.factor == 1.0;
  int first = 0, last = t.steps;  // [first, last)
  if (t.duration > 0) {
    first = std::uniform_int_distribution<int>(0, t.steps - t.duration)(rng);
    last = first + t.duration;
  }
  if (!healthy) spec.faults.push_back({Fault::Kind::slow_gpu, rank, t.factor, 0, t.section, first, last});

  report::RunModel m = make_run(spec);
  report::ScoreReport sc = report::compute_scores(m, {});
  report::GpuScoreReport gpu;
  report::CommReport comm;
  if (t.gpu) {
    gpu = report::compute_gpu_scores(m, sc);
    comm = report::analyze_collectives(m, sc);
    sc.stragglers.insert(sc.stragglers.end(), comm.stragglers.begin(), comm.stragglers.end());
  }
  report::Verdict v = report::run_analyses(m, sc, {}, nullptr, gpu, comm).verdict;

  PowerOutcome out;
  out.cost_share = healthy ? 0 : (t.factor - 1) * double(section_ns(spec.kernels, t.section)) / step_ns(t);
  for (const report::Finding& f : v.findings) {
    const bool whole = f.first_step < 0;
    const bool overlaps = whole || (f.first_step < last && f.last_step >= first);
    if (!healthy && !out.found && f.rank == rank && f.section == t.section && overlaps) {
      out.found = true;
      out.exact_steps = t.duration == 0 ? whole : f.first_step == first && f.last_step == last - 1;
      continue;
    }
    if (!healthy && f.rank == rank) {
      ++out.misplaced;
      continue;
    }
    if (out.other_findings++ == 0) out.first_other = f.kind + " " + f.section + ": " + f.summary;
  }
  return out;
}

}  // namespace laggard::synth
