// Holistic Trace Analysis (HTA) breakdowns, from the per-kernel GPU records:
//  - temporal: compute / communication / memory / idle share of the profiled time. Overlaps
//    count once, in that priority (compute, then communication, then memory);
//  - idle: gaps between consecutive activities of a stream, tested in HTA's order: host wait
//    (the launch call of the next activity ended after the stream went idle: the GPU waited for
//    the CPU; only that part of the gap, the rest is other), else kernel wait (gap below
//    kernel_wait_ns, HTA's 30 µs: launch-to-launch overhead), else other (the work was queued yet
//    did not start: syncs, events, dependencies). HTA instead counts the whole gap as host wait
//    when the call *started* after the stream went idle; `--hta-compatible` shows HTA's numbers;
//  - kernel types (COMP / COMM / MEM) and top kernels;
//  - communication-computation overlap: time computing while communicating / time communicating;
//  - launch statistics: short kernels (GPU time below the launch call's own time), launch delay
//    outliers (GPU start - launch call end above a cutoff), runtime outliers (long launch calls).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu_timeline.h"
#include "steps.h"

namespace laggard::report {

struct BreakdownOptions {
  int64_t kernel_wait_ns = 30'000;          // HTA's consecutive_kernel_delay default: 30 in the trace's unit, µs
  double launch_delay_cutoff_ns = 100'000;  // HTA's launch_delay_cutoff default (100 us)
  double runtime_cutoff_ns = 50'000;        // HTA's runtime_cutoff default (50 us)
  size_t top_kernels = 10;
};

struct Temporal {
  double span_ns = 0, compute_ns = 0, comm_ns = 0, memory_ns = 0, idle_ns = 0;
  Temporal& operator+=(const Temporal& o);
};

struct IdleSplit {
  double host_wait_ns = 0, kernel_wait_ns = 0, other_ns = 0;
  IdleSplit& operator+=(const IdleSplit& o);
  double total() const { return host_wait_ns + kernel_wait_ns + other_ns; }
};

struct TypeTotals {
  double comp_ns = 0, comm_ns = 0, mem_ns = 0;  // sums of durations (not unions)
  uint64_t comp = 0, comm = 0, mem = 0;
  TypeTotals& operator+=(const TypeTotals& o);
};

struct LaunchStats {
  uint64_t with_launch = 0;       // activities whose launch call was captured
  uint64_t short_kernels = 0;
  uint64_t delay_outliers = 0;
  uint64_t runtime_outliers = 0;
  double median_delay_ns = 0, p95_delay_ns = 0;
  double median_runtime_ns = 0;
};

struct RankBreakdown {
  int rank = -1;
  std::string host;
  Temporal temporal;
  IdleSplit idle;
  TypeTotals types;
  std::optional<double> overlap;  // fraction 0..1; none without communication
  LaunchStats launch;
};

struct HostBreakdown {
  std::string host;
  int ranks = 0;
  Temporal temporal;  // sums over its ranks
  IdleSplit idle;
};

struct StepBreakdown {
  int step = 0;
  double median_idle_share = 0;  // of the host step time, across ranks
  int max_idle_rank = -1;
  double max_idle_share = 0;
  double median_host_wait_share = 0;
};

struct TopKernel {
  std::string name;
  std::string type;  // COMP | COMM | MEM
  double total_ns = 0;  // over all ranks
  uint64_t count = 0;
  double share_of_type = 0;
  int min_rank = -1, max_rank = -1;  // by per-rank total
  double min_rank_ns = 0, max_rank_ns = 0;
};

struct BreakdownReport {
  bool available = false;
  std::string why_not;
  BreakdownOptions options;
  std::vector<RankBreakdown> ranks;  // like RunModel::ranks
  std::vector<HostBreakdown> hosts;
  std::vector<StepBreakdown> steps;
  std::vector<TopKernel> top;
  std::map<std::string, TypeTotals> by_section;  // all ranks
};

BreakdownReport analyze_breakdown(const RunModel& model, const StepSet& steps, const BreakdownOptions& options = {});

// The same a rank at a time, from timelines grouped by stream as index_gpu_all builds them (its
// while_grouped), so that the jitter analysis can share the timelines: add() each rank's from any
// thread (once per rank), then finish() on one.
class BreakdownByRank {
 public:
  BreakdownByRank(const RunModel& model, const StepSet& steps, const BreakdownOptions& options = {});
  ~BreakdownByRank();
  BreakdownByRank(const BreakdownByRank&) = delete;
  BreakdownByRank& operator=(const BreakdownByRank&) = delete;
  void add(size_t rank_index, const GpuTimeline& grouped_by_stream);
  BreakdownReport finish();

 private:
  struct Parts;  // one per rank (breakdown.cpp)
  const RunModel& model_;
  const StepSet& steps_;
  const BreakdownOptions options_;
  const int nsteps_;
  std::unique_ptr<Parts> parts_;
};

// Idle split of the gaps of the given activities' streams inside [lo, hi) (exposed for tests).
IdleSplit split_idle(const GpuTimeline& gpu, int64_t lo, int64_t hi, int64_t kernel_wait_ns);

}  // namespace laggard::report
