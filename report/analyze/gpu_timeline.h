// A rank's GPU activities indexed for the analyses: in launch order (what a step launched)
// and in GPU start order per stream (what ran after what). Built once per rank and shared by
// the jitter analysis and the HTA breakdown (issue 14); flat arrays of positions, no maps.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "intervals.h"
#include "model.h"
#include "steps.h"

namespace laggard::report {

struct GpuTimeline {
  static constexpr uint32_t kNoPrevious = 0xffffffffu;
  GpuTimeline() = default;
  GpuTimeline(GpuTimeline&&) = default;  // big: moves only
  GpuTimeline& operator=(GpuTimeline&&) = default;
  GpuTimeline(const GpuTimeline&) = delete;
  GpuTimeline& operator=(const GpuTimeline&) = delete;

  // The rank's activities of its sampled windows by host launch time (GPU start when unknown), then
  // the files' order: at(0) ... at(size() - 1), as values. Where they lie in one array in that order
  // already (a rank's records as the reader keeps them, one RankData::span_chunks entry; or `owned`),
  // they are read there, with no reference each (issue 29: 8 B a record, 350 MB at 960 x 903 x 50);
  // else through by_launch.
  struct Ref {
    static constexpr uint32_t kOwned = UINT32_MAX;
    uint32_t chunk;  // in the rank's span_chunks, or kOwned
    uint32_t pos;
  };
  std::vector<GpuSpan> owned;  // made from the windows' GpuActivity records and own compact arrays (if any)
  const SpanChunk* in_chunk = nullptr;  // the one array, from in_chunk_first, when by_launch is empty
  size_t in_chunk_first = 0;            // (neither: `owned`)
  const std::vector<SpanChunk>* chunks = nullptr;  // the rank's, for by_launch
  std::vector<Ref> by_launch;
  size_t count = 0;
  [[gnu::always_inline]] GpuSpan at(size_t pos) const {
    if (in_chunk) return in_chunk->at(in_chunk_first + pos);
    return by_launch.empty() ? owned[pos] : of(by_launch[pos]);
  }
  [[gnu::always_inline]] GpuSpan of(Ref r) const { return r.chunk == Ref::kOwned ? owned[r.pos] : (*chunks)[r.chunk].at(r.pos); }
  size_t size() const { return count; }
  // Positions (at()), grouped by (device, stream) in that order, each group by GPU start
  // (ties in launch order); stream_starts: where each group begins, and by_stream.size() last.
  std::vector<uint32_t> by_stream;
  std::vector<uint32_t> stream_starts;
  // Per position: the position of the activity right before it on its stream, or kNoPrevious.
  // index_gpu_all keeps this or the two above, not both (see there).
  std::vector<uint32_t> previous;
  std::vector<Interval> sampled;  // the windows whose per-kernel records were kept, merged

  // The activities launched during the step (host time), as positions [first, second).
  std::pair<size_t, size_t> launched_in(const Step& step) const;
  [[gnu::always_inline]] std::optional<GpuSpan> previous_of(size_t pos) const {
    if (previous[pos] == kNoPrevious) return std::nullopt;
    return at(previous[pos]);
  }
  bool empty() const { return count == 0; }
};

GpuTimeline index_gpu(const RankData& rank);
// Every rank's timeline, like RunModel::ranks, built on every core, kept with `previous` (what jitter
// reads) but not by_stream and stream_starts (issue 29: 4 B a record less at the peak, 170 MB at
// 960 x 903 x 50). What needs those (the breakdown) reads each rank's in while_grouped(r, timeline):
// called on the thread that built rank r's, right after, with all three set and the rank's records
// still in that core's cache (issue 29: before, the timelines were grouped by stream a second time
// after the jitter analysis, and every record read from memory twice more).
std::vector<GpuTimeline> index_gpu_all(const RunModel& model,
                                       const std::function<void(size_t, const GpuTimeline&)>& while_grouped = {});

inline int64_t launch_time(const GpuSpan& a) { return a.api_start_ns ? a.api_start_ns : a.start_ns; }
inline bool is_compute(const GpuSpan& a) { return a.kind == GpuKind::kernel && !a.nccl; }
inline bool is_memory(const GpuSpan& a) { return a.kind != GpuKind::kernel; }

}  // namespace laggard::report
