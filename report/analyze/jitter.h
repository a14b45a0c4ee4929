// The GTC 2020 scale-out jitter analysis (Zulfiqar & Knight, "Scaling the Transformer model
// implementation in PyTorch across multiple nodes"), per step and per kernel position:
//  - kernel duration vs the cross-rank median of the same kernel at the same position;
//  - kernel gap: idle time on the stream before the kernel (for a step's first kernel: since
//    the previous kernel on the stream, usually the last NCCL kernel of the previous step);
//    NCCL kernels get gap 0, as in the talk;
//  - time to kernel end (TTKE): cumulative gap + duration from the step's start with NCCL
//    kernels zeroed, so waiting inside a collective does not count; where a rank's TTKE leaves
//    the cross-rank median by more than a threshold, it has diverged;
//  - launch-to-start delay (GPU start minus end of the launch call): near zero means the GPU
//    was waiting for the host (host-bound), large means the launch was queued (GPU-bound).
// Kernels are matched across ranks by (name, n-th occurrence of that name in the step).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu_timeline.h"
#include "steps.h"

namespace laggard::report {

struct JitterOptions {
  double divergence_ns = 0;  // 0: max(20 us, 5 % of the median step's final TTKE)
};

struct StepJitter {
  int step = 0;
  int ranks = 0;                 // ranks with kernels in this step
  double median_ttke_ns = 0;     // at the step's last kernel
  int worst_rank = -1;           // largest TTKE at the end of the step
  double worst_divergence_ns = 0;
  int first_diverging_slot = -1; // first kernel position where worst_rank exceeded the threshold
  std::string first_diverging_kernel;
  double step_time_spread_ns = 0;  // host step time, max - min across ranks
};

// One rank in one step (the matrix the verdict's per-step checks read).
struct RankStepJitter {
  bool present = false;          // the rank launched kernels in this step
  double end_divergence_ns = 0;  // final TTKE minus the cross-rank median
  double duration_excess_ns = 0; // sum over its kernels of (duration - cross-rank median)
  double gap_excess_ns = 0;      // sum over its kernels of (gap - cross-rank median)
  double memory_excess_ns = 0;   // duration excess of memcpy/memset only
  std::map<std::string, double> duration_excess_by_section;  // compute kernels, by section
  std::map<std::string, double> gap_excess_by_section;       // idle before its kernels, by section
  // Arrival at the step's first collective, measured from the end of the previous NCCL kernel
  // on the same rank (the last sync point): clock-independent across hosts. < 0: no collective.
  double arrival_ns = -1;
  double arrival_excess_ns = 0;  // minus the cross-rank median
  bool last_arrival = false;
  // Idle before that collective on its stream, minus the cross-rank median: the host (or a
  // dependency) delayed the collective. launched_late: its launch call ended after the stream
  // went idle (host), else it was queued in time and waited on something else.
  double precollective_idle_excess_ns = 0;
  bool collective_launched_late = false;
};

struct RankJitter {
  int rank = -1;
  std::string host;
  int device = -1;
  double median_end_divergence_ns = 0;  // TTKE at step end minus cross-rank median, median over steps
  int steps_worst = 0;                  // steps where this rank diverged most
  double duration_excess_ns = 0;        // per step (median): sum of (dur - cross-rank median) over kernels
  double gap_excess_ns = 0;             // per step (median): sum of (gap - cross-rank median)
  double median_launch_delay_ns = 0;
  double near_zero_launch_delay_share = 0;  // kernels whose launch-to-start delay < 10 us
  double median_step_ns = 0;            // host step time
  double median_arrival_excess_ns = 0;  // at the step's first collective (see RankStepJitter)
  double last_arrival_share = 0;        // of the steps with a collective
};

struct HostJitter {
  std::string host;
  int ranks = 0;
  double median_end_divergence_ns = 0;  // median of its ranks' values
  int worst_rank = -1;
};

struct KernelSlotStats {
  int slot = 0;                 // median launch position within the step
  std::string name;
  std::string section;
  bool nccl = false;
  double median_duration_ns = 0;  // across ranks (each rank: median over steps)
  int min_rank = -1, max_rank = -1;
  double min_duration_ns = 0, max_duration_ns = 0;
  double median_gap_ns = 0;
  int max_gap_rank = -1;
  double max_gap_ns = 0;
};

struct JitterReport {
  bool available = false;       // needs steps and per-kernel GPU records
  std::string why_not;
  double divergence_threshold_ns = 0;
  std::vector<StepJitter> steps;       // every comparable step, in order
  std::vector<std::vector<RankStepJitter>> matrix;  // [step][rank index], steps like `steps`
  std::vector<RankJitter> ranks;       // like RunModel::ranks
  std::vector<HostJitter> hosts;
  std::vector<KernelSlotStats> kernels;  // every position, in order
};

JitterReport analyze_jitter(const RunModel& model, const StepSet& steps, const JitterOptions& options = {});

// The same from timelines already built (index_gpu_all), shared with the breakdown.
JitterReport analyze_jitter(const RunModel& model, const StepSet& steps, const std::vector<GpuTimeline>& timelines,
                            const JitterOptions& options = {});

// The analysis in two parts: each rank's index (its steps' launches, TTKEs, collective arrivals and
// launch delays) built by add(r, timeline) on whichever thread built that rank's timeline, right
// after it (index_gpu_all's callback: the rank's records still in that core's cache; issue 29, they
// were read from memory once more), then the analysis across ranks in finish, from the same timelines.
class JitterByRank {
 public:
  JitterByRank(const RunModel& model, const StepSet& steps);
  ~JitterByRank();
  JitterByRank(const JitterByRank&) = delete;
  JitterByRank& operator=(const JitterByRank&) = delete;
  void add(size_t r, const GpuTimeline& g);  // any thread; each rank once
  JitterReport finish(const std::vector<GpuTimeline>& timelines, const JitterOptions& options = {});

 private:
  struct Ranks;
  const RunModel& model_;
  const StepSet& steps_;
  const int nsteps_;  // steps.count() (it looks at every rank: once, not once a rank); 0 unless every rank has steps
  std::unique_ptr<Ranks> ranks_;
};

}  // namespace laggard::report
