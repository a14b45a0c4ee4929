#include "gpu_timeline.h"

#include <algorithm>

#include "parallel.h"

namespace laggard::report {
namespace {

// The sampled windows' activities, in window order (each window's in the files' order):
// GpuActivity records become owned spans,
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

// Files are mostly in launch order already. Equal launch times keep the files' order (spans carry
// no correlation id to break ties with since issue 29; a CUDA graph's kernels share their launch's).
void sort_by_launch(std::vector<const GpuSpan*>& v) {
  auto before = [](const GpuSpan* a, const GpuSpan* b) { return launch_time(*a) < launch_time(*b); };
  if (!std::is_sorted(v.begin(), v.end(), before)) std::stable_sort(v.begin(), v.end(), before);
}

// Grouping by stream without a comparison sort of every record: a stream runs its work in
// launch order (CUDA's stream semantics), so a counting pass by (device, stream) in launch order
// leaves each group sorted by GPU start already; a group is sorted only when its start times say
// otherwise (clock corrections, imported traces). A rank has a handful of streams.
struct StreamKey {
  int32_t device;
  uint32_t stream;
  auto operator<=>(const StreamKey&) const = default;
};

// Each record's group, and the groups in (device, stream) order.
std::vector<uint32_t> stream_groups(const GpuTimeline& g, std::vector<StreamKey>& keys) {
  std::vector<uint32_t> group(g.by_launch.size());
  for (size_t i = 0; i < group.size(); ++i) {
    const StreamKey k{g.by_launch[i]->device, g.by_launch[i]->stream};
    auto it = std::find(keys.begin(), keys.end(), k);  // a handful: linear is fastest
    group[i] = static_cast<uint32_t>(it - keys.begin());
    if (it == keys.end()) keys.push_back(k);
  }
  std::vector<uint32_t> order(keys.size()), rank_of(keys.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
  for (uint32_t i = 0; i < order.size(); ++i) rank_of[order[i]] = i;
  for (uint32_t& x : group) x = rank_of[x];
  std::sort(keys.begin(), keys.end());
  return group;
}

void index_streams(GpuTimeline& g) {
  std::vector<StreamKey> keys;
  const std::vector<uint32_t> group = stream_groups(g, keys);
  std::vector<uint32_t> start(keys.size() + 1, 0);
  for (uint32_t x : group) ++start[x + 1];
  for (size_t k = 1; k < start.size(); ++k) start[k] += start[k - 1];
  g.by_stream.resize(group.size());
  std::vector<uint32_t> fill(start.begin(), start.end() - 1);
  for (uint32_t i = 0; i < group.size(); ++i) g.by_stream[fill[group[i]]++] = i;  // launch order within a group
  auto by_start = [&](uint32_t a, uint32_t b) {
    const int64_t sa = g.by_launch[a]->start_ns, sb = g.by_launch[b]->start_ns;
    return sa != sb ? sa < sb : a < b;  // equal starts keep launch order
  };
  g.previous.assign(group.size(), GpuTimeline::kNoPrevious);
  g.stream_starts.assign(start.begin(), start.end());
  for (size_t k = 0; k + 1 < start.size(); ++k) {
    auto first = g.by_stream.begin() + start[k], last = g.by_stream.begin() + start[k + 1];
    if (!std::is_sorted(first, last, by_start)) std::sort(first, last, by_start);
    for (auto it = first + (first != last); it < last; ++it) g.previous[*it] = *(it - 1);
  }
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
