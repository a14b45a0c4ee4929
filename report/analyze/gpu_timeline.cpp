#include "gpu_timeline.h"

#include <algorithm>
#include <span>

#include "parallel.h"

namespace laggard::report {
namespace {

bool launched_before(const GpuSpan& a, const GpuSpan& b) { return launch_time(a) < launch_time(b); }

// Where the sampled windows' compact spans lie, in window order: one run of one array, or not.
struct SpanRun {
  const GpuSpan* first = nullptr;
  const GpuSpan* last = nullptr;
  bool one = true;
  void add(std::span<const GpuSpan> s) {
    if (s.empty()) return;
    if (!first) first = s.data(), last = s.data();
    one &= s.data() == last;
    last = s.data() + s.size();
  }
};

// The sampled windows' activities, in window order (each window's in the files' order):
// GpuActivity records become owned spans, compact ones (ReadOptions::compact_gpu) are read where
// they are. In launch order already and in one array (the usual case: files are written in that
// order), they need no pointer each.
void gather(const RankData& rank, GpuTimeline& g) {
  std::vector<Interval> sampled;
  size_t spans = 0, owned = 0;
  SpanRun run;
  for (const CaptureWindow& w : rank.windows)
    if (w.gpu_sampled) {
      const std::span<const GpuSpan> s = rank.spans_of(w);
      spans += s.size();
      owned += w.gpu.size();
      run.add(s);
      sampled.push_back({w.start_ns, w.end_ns});
    }
  g.sampled = merge(std::move(sampled));
  g.count = spans + owned;
  g.owned.reserve(owned);  // never reallocated below: in_order and by_launch point into it
  for (const CaptureWindow& w : rank.windows)
    if (w.gpu_sampled)
      for (const GpuActivity& a : w.gpu) g.owned.push_back(span_of(a));
  const GpuSpan* one = owned == g.count ? g.owned.data() : spans == g.count && run.one ? run.first : nullptr;
  if (one && std::is_sorted(one, one + g.count, launched_before)) {
    g.in_order = one;
    return;
  }
  g.by_launch.reserve(g.count);
  size_t next_owned = 0;
  for (const CaptureWindow& w : rank.windows) {
    if (!w.gpu_sampled) continue;
    for (size_t i = 0; i < w.gpu.size(); ++i) g.by_launch.push_back(&g.owned[next_owned++]);
    for (const GpuSpan& a : rank.spans_of(w)) g.by_launch.push_back(&a);
  }
  // Equal launch times keep the files' order (spans carry no correlation id to break ties with
  // since issue 29; a CUDA graph's kernels share their launch's time).
  std::stable_sort(g.by_launch.begin(), g.by_launch.end(),
                   [](const GpuSpan* a, const GpuSpan* b) { return launched_before(*a, *b); });
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
  std::vector<uint32_t> group(g.size());
  for (size_t i = 0; i < group.size(); ++i) {
    const StreamKey k{g.at(i).device, g.at(i).stream};
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
    const int64_t sa = g.at(a).start_ns, sb = g.at(b).start_ns;
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
  index_streams(g);
  return g;
}

std::vector<GpuTimeline> index_gpu_all(const RunModel& model) {
  std::vector<GpuTimeline> out(model.ranks.size());
  parallel_for(out.size(), [&](size_t r) { out[r] = index_gpu(model.ranks[r]); });
  return out;
}

std::pair<size_t, size_t> GpuTimeline::launched_in(const Step& step) const {
  auto first_at_or_after = [&](size_t lo, int64_t t) {  // positions are in launch order
    size_t hi = count;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (launch_time(at(mid)) < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const size_t lo = first_at_or_after(0, step.start_ns);
  return {lo, first_at_or_after(lo, step.end_ns)};
}

}  // namespace laggard::report
