// A rank's GPU activities indexed for the analyses: in launch order (what a step launched)
// and in GPU start order per stream (what ran after what). Built once per rank and shared by
// the jitter analysis and the HTA breakdown (issue 14); flat arrays of positions, no maps.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "intervals.h"
#include "model.h"
#include "steps.h"

namespace laggard::report {

struct GpuTimeline {
  static constexpr uint32_t kNoPrevious = 0xffffffffu;
  GpuTimeline() = default;
  GpuTimeline(GpuTimeline&&) = default;  // in_order and by_launch may point into owned: moves only
  GpuTimeline& operator=(GpuTimeline&&) = default;
  GpuTimeline(const GpuTimeline&) = delete;
  GpuTimeline& operator=(const GpuTimeline&) = delete;

  // The rank's activities of its sampled windows by host launch time (GPU start when unknown), then
  // the files' order: at(0) ... at(size() - 1). Where they lie in one array in that order already (a
  // rank's records as the reader keeps them, RankData::span_chunks; or `owned`), they are read there,
  // with no pointer each (issue 29: 8 B a record, 350 MB at 960 x 903 x 50); else through by_launch.
  std::vector<GpuSpan> owned;             // spans made from the rank's GpuActivity records (if any)
  const GpuSpan* in_order = nullptr;      // the one array, when by_launch is empty
  std::vector<const GpuSpan*> by_launch;  // otherwise
  size_t count = 0;
  const GpuSpan& at(size_t pos) const { return by_launch.empty() ? in_order[pos] : *by_launch[pos]; }
  size_t size() const { return count; }
  // Positions (at()), grouped by (device, stream) in that order, each group by GPU start
  // (ties in launch order); stream_starts: where each group begins, and by_stream.size() last.
  std::vector<uint32_t> by_stream;
  std::vector<uint32_t> stream_starts;
  // Per position: the position of the activity right before it on its stream, or kNoPrevious.
  std::vector<uint32_t> previous;
  std::vector<Interval> sampled;  // the windows whose per-kernel records were kept, merged

  // The activities launched during the step (host time), as positions [first, second).
  std::pair<size_t, size_t> launched_in(const Step& step) const;
  const GpuSpan* previous_of(size_t pos) const { return previous[pos] == kNoPrevious ? nullptr : &at(previous[pos]); }
  bool empty() const { return count == 0; }
};

GpuTimeline index_gpu(const RankData& rank);
// Every rank's timeline, like RunModel::ranks, built on every core.
std::vector<GpuTimeline> index_gpu_all(const RunModel& model);

inline int64_t launch_time(const GpuSpan& a) { return a.api_start_ns ? a.api_start_ns : a.start_ns; }
inline bool is_compute(const GpuSpan& a) { return a.kind == GpuKind::kernel && !a.nccl; }
inline bool is_memory(const GpuSpan& a) { return a.kind != GpuKind::kernel; }

}  // namespace laggard::report
