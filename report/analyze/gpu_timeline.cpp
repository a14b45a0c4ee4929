#include "gpu_timeline.h"

#include <algorithm>

#include "parallel.h"

namespace laggard::report {
namespace {

// The sampled windows' activities, in window order: GpuActivity records become owned spans,
// compact ones (ReadOptions::compact_gpu) are pointed at where they are.
void gather(const RankData& rank, GpuTimeline& g) {
  std::vector<Interval> spans;
  size_t n = 0, owned = 0;
  for (const CaptureWindow& w : rank.windows)
    if (w.gpu_sampled) {
      n += w.gpu.size() + w.gpu_spans.size();
      owned += w.gpu.size();
    }
  g.owned.reserve(owned);  // never reallocated below: by_launch points into it
  g.by_launch.reserve(n);
  for (const CaptureWindow& w : rank.windows) {
    if (!w.gpu_sampled) continue;
    spans.push_back({w.start_ns, w.end_ns});
    for (const GpuActivity& a : w.gpu) {
      g.owned.push_back(span_of(a));
      g.by_launch.push_back(&g.owned.back());
    }
    for (const GpuSpan& a : w.gpu_spans) g.by_launch.push_back(&a);
  }
  g.sampled = merge(std::move(spans));
}

void sort_by_launch(std::vector<const GpuSpan*>& v) {
  auto before = [](const GpuSpan* a, const GpuSpan* b) {
    return launch_time(*a) != launch_time(*b) ? launch_time(*a) < launch_time(*b) : a->correlation < b->correlation;
  };
  if (!std::is_sorted(v.begin(), v.end(), before)) std::sort(v.begin(), v.end(), before);  // files are mostly in order
}

// Sort-based grouping by stream: one flat key array instead of a map of vectors.
void index_streams(GpuTimeline& g) {
  struct Key {
    int32_t device;
    uint32_t stream;
    int64_t start;
    uint32_t pos;  // in by_launch: equal starts keep launch order
  };
  std::vector<Key> keys(g.by_launch.size());
  for (uint32_t i = 0; i < keys.size(); ++i) {
    const GpuSpan& a = *g.by_launch[i];
    keys[i] = {a.device, a.stream, a.start_ns, i};
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.device != b.device) return a.device < b.device;
    if (a.stream != b.stream) return a.stream < b.stream;
    return a.start != b.start ? a.start < b.start : a.pos < b.pos;
  });
  g.by_stream.resize(keys.size());
  g.previous.assign(keys.size(), GpuTimeline::kNoPrevious);
  for (uint32_t i = 0; i < keys.size(); ++i) {
    g.by_stream[i] = keys[i].pos;
    if (i == 0 || keys[i].device != keys[i - 1].device || keys[i].stream != keys[i - 1].stream)
      g.stream_starts.push_back(i);
    else
      g.previous[keys[i].pos] = keys[i - 1].pos;
  }
  g.stream_starts.push_back(static_cast<uint32_t>(keys.size()));
}

}  // namespace

GpuTimeline index_gpu(const RankData& rank) {
  GpuTimeline g;
  gather(rank, g);
  sort_by_launch(g.by_launch);
  index_streams(g);
  return g;
}

std::vector<GpuTimeline> index_gpu_all(const RunModel& model) {
  std::vector<GpuTimeline> out(model.ranks.size());
  parallel_for(out.size(), [&](size_t r) { out[r] = index_gpu(model.ranks[r]); });
  return out;
}

std::pair<size_t, size_t> GpuTimeline::launched_in(const Step& step) const {
  auto lo = std::lower_bound(by_launch.begin(), by_launch.end(), step.start_ns,
                             [](const GpuSpan* a, int64_t t) { return launch_time(*a) < t; });
  auto hi = std::lower_bound(lo, by_launch.end(), step.end_ns,
                             [](const GpuSpan* a, int64_t t) { return launch_time(*a) < t; });
  return {size_t(lo - by_launch.begin()), size_t(hi - by_launch.begin())};
}

}  // namespace laggard::report
