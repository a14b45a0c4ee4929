// A rank's GPU activities indexed for the analyses: in launch order (what a step launched)
// and in GPU start order per stream (what ran after what).
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "intervals.h"
#include "model.h"
#include "steps.h"

namespace laggard::report {

struct GpuTimeline {
  std::vector<const GpuActivity*> by_launch;  // host launch time (GPU start when unknown)
  std::map<std::pair<int32_t, uint32_t>, std::vector<const GpuActivity*>> by_stream;  // (device, stream) by start
  std::vector<Interval> sampled;  // the windows whose per-kernel records were kept, merged

  // Activities launched during the step (host time), in launch order.
  std::vector<const GpuActivity*> in_step(const Step& step) const;
  // The activity that ran on the same stream right before `a` (nullptr if none).
  const GpuActivity* previous_on_stream(const GpuActivity* a) const;
  // The same, as positions [first, second) in by_launch (no copy).
  std::pair<size_t, size_t> launched_in(const Step& step) const;
  // For every activity of by_launch, the one before it on its stream (nullptr: none), as
  // previous_on_stream says, all at once.
  std::vector<const GpuActivity*> previous_by_launch() const;
  bool empty() const { return by_launch.empty(); }
};

GpuTimeline index_gpu(const RankData& rank);

inline int64_t launch_time(const GpuActivity& a) { return a.api_start_ns ? a.api_start_ns : a.start_ns; }
inline bool is_compute(const GpuActivity& a) { return a.kind == GpuKind::kernel && !a.nccl; }
inline bool is_memory(const GpuActivity& a) { return a.kind != GpuKind::kernel; }

}  // namespace laggard::report
