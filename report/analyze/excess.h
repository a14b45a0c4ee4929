// Per-step excess detection: which rank spends clearly more time than the others in one
// signal (an NVTX section's CPU time per step, or the whole step's lateness at its collective),
// for the whole run or for a run of consecutive steps, and what that costs the job.
//
// Statistics (docs/report.md, "How sure a finding is"):
//   excess e[k][r]  = x[k][r] - median over ranks of x[k][.]      (step k, rank r)
//   noise  sigma    = 1.4826 * MAD of all e[k][r] (pooled over steps and ranks: robust spread
//                     across ranks), raised to the rank's own step-to-step sigma (1.4826 * MAD
//                     of successive differences / sqrt 2, blind to level shifts) when larger
//                     (a rank that is only noisier is not slower)
//   z of a run of L steps = median e over the run / (1.2533 * sigma / sqrt(L))
//                     (the standard error of a median; medians so that one outlier step does
//                     not make a run)
//   runs: one-sided CUSUM (Page 1954) S = max(0, S + e - k) with k = half the material excess;
//         each excursion [first S>0, argmax S] is a candidate, narrowed to the sub-run whose
//         steps sit above half its level (Kadane's maximum sum of e - level/2)
//   a finding needs z >= z_crit (Bonferroni over ranks x signals x steps at `false_alarm_rate`
//   false findings per run, at least `min_z`), a median excess >= `min_cost_share` of the
//   median step time, and >= `min_steps` steps (or 2 report windows' worth of time).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace laggard::report {

struct ExcessOptions {
  double min_cost_share = 0.02;      // material: median excess per affected step / median step time
  int min_steps = 5;                 // a transient lasts at least this many consecutive steps ...
  double window_ns = 0;              // ... or at least 2 report windows (0: not used)
  double false_alarm_rate = 0.01;    // expected false findings per run (sets z_crit)
  double min_z = 4.0;                // z_crit never below this
};

// One quantity measured per step and rank. NaN: not measured for that rank in that step.
struct Signal {
  std::string name;    // NVTX section, or empty for the whole step
  std::string parent;  // the section's parent, empty at top level
  std::vector<std::vector<double>> ns;  // [step row][rank index]
};

struct Excess {
  size_t rank = 0;               // rank index (as in the signal's columns)
  int first = 0, last = 0;       // step rows, inclusive
  bool whole_run = false;
  double median_excess_ns = 0;   // over the run's steps: the loss per affected step
  double mean_excess_ns = 0;
  double z = 0;                  // median excess in standard errors of the noise
  double noise_ns = 0;           // sigma used (per step)
  double own_noise_ns = 0;       // the rank's own step-to-step sigma
  double own_shift_ns = 0;       // run's median excess minus the rank's median outside the run
  double cost_share = 0;         // median_excess_ns / step_ns
};

struct ExcessCriteria {
  double z_crit = 0;
  double min_excess_ns = 0;
  double cusum_k_ns = 0;
};

// z_crit for `tests` tests at the options' false-alarm rate.
double critical_z(const ExcessOptions& options, double tests);

// Criteria for a run: tests = ranks x signals x steps examined.
ExcessCriteria excess_criteria(const ExcessOptions& options, double step_ns, double tests);

// The rank's excess over the per-step median, per step (NaN where it or the step lacks data).
std::vector<std::vector<double>> excess_matrix(const Signal& s);

// Findings on one signal: at most one whole-run finding per rank, else transient runs.
// step_start_ns (optional, per row): when each step started, for the 2-window rule.
std::vector<Excess> detect_excess(const Signal& s, double step_ns, const ExcessCriteria& criteria,
                                  const ExcessOptions& options, const std::vector<double>& step_start_ns = {});

}  // namespace laggard::report
