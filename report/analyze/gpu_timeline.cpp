#include "gpu_timeline.h"

#include <algorithm>

#include "parallel.h"

namespace laggard::report {
namespace {

bool launched_before(const GpuSpan& a, const GpuSpan& b) { return launch_time(a) < launch_time(b); }

// Where the sampled windows' spans in the rank's arrays lie, in window order: one run of one
// array, or not.
struct ChunkRun {
  const SpanChunk* chunk = nullptr;
  size_t first = 0, next = 0;
  bool one = true;
  void add(const SpanRange& s) {
    if (s.empty()) return;
    if (!chunk) chunk = s.chunk(), first = next = s.first();
    one &= s.chunk() == chunk && s.first() == next;
    next = s.first() + s.size();
  }
};

// One record read per position: the last one's launch time is carried (comparing at(i) with
// at(i - 1) unpacked each packed record twice).
template <class At>
bool in_launch_order(size_t n, At at) {
  int64_t before = INT64_MIN;
  for (size_t i = 0; i < n; ++i) {
    const int64_t t = launch_time(at(i));
    if (t < before) return false;
    before = t;
  }
  return true;
}

// Every record by reference, then in launch order. Equal launch times keep the files' order
// (spans carry no correlation id to break ties with since issue 29; a CUDA graph's kernels share
// their launch's time).
void collect_by_launch(const RankData& rank, GpuTimeline& g) {
  using Ref = GpuTimeline::Ref;
  g.by_launch.reserve(g.count);
  uint32_t next_owned = 0;
  for (const CaptureWindow& w : rank.windows) {
    if (!w.gpu_sampled) continue;
    const SpanRange s = rank.spans_of(w);
    for (size_t i = 0; i < w.gpu.size() + w.gpu_spans.size(); ++i) g.by_launch.push_back({Ref::kOwned, next_owned++});
    if (s.chunk())
      for (size_t i = 0; i < s.size(); ++i)
        g.by_launch.push_back({w.gpu_spans_chunk, static_cast<uint32_t>(s.first() + i)});
  }
  auto before = [&](Ref a, Ref b) { return launched_before(g.of(a), g.of(b)); };
  if (!std::is_sorted(g.by_launch.begin(), g.by_launch.end(), before))  // a rank's files in turn often are
    std::stable_sort(g.by_launch.begin(), g.by_launch.end(), before);
}

// The sampled windows' activities, in window order (each window's in the files' order): the
// rank's arrays (ReadOptions::compact_gpu) are read where they are; GpuActivity records and
// windows' own compact arrays (models made in memory) become owned spans. In launch order
// already and in one array (the usual case: files are written in that order), they need no
// reference each.
void gather(const RankData& rank, GpuTimeline& g) {
  std::vector<Interval> sampled;
  size_t in_chunks = 0, owned = 0;
  ChunkRun run;
  for (const CaptureWindow& w : rank.windows)
    if (w.gpu_sampled) {
      const SpanRange s = rank.spans_of(w);
      (s.chunk() ? in_chunks : owned) += s.size();
      owned += w.gpu.size();
      if (s.chunk()) run.add(s);
      sampled.push_back({w.start_ns, w.end_ns});
    }
  g.sampled = merge(std::move(sampled));
  g.count = in_chunks + owned;
  g.chunks = &rank.span_chunks;
  g.owned.reserve(owned);
  for (const CaptureWindow& w : rank.windows)
    if (w.gpu_sampled) {
      for (const GpuActivity& a : w.gpu) g.owned.push_back(span_of(a));
      g.owned.insert(g.owned.end(), w.gpu_spans.begin(), w.gpu_spans.end());
    }
  if (owned == g.count && in_launch_order(g.count, [&](size_t i) { return g.owned[i]; })) return;
  if (in_chunks == g.count && run.one &&
      in_launch_order(g.count, [&](size_t i) { return run.chunk->at(run.first + i); })) {
    g.in_chunk = run.chunk;
    g.in_chunk_first = run.first;
    return;
  }
  collect_by_launch(rank, g);
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

uint32_t key_index(std::vector<StreamKey>& keys, StreamKey k) {
  const auto at = static_cast<uint32_t>(std::find(keys.begin(), keys.end(), k) - keys.begin());  // a handful
  if (at == keys.size()) keys.push_back(k);
  return at;
}

// Each record's group in order of first sight, keys in that order.
void first_seen_groups(const GpuTimeline& g, std::vector<StreamKey>& keys, std::vector<uint32_t>& group) {
  if (!g.in_chunk) {
    for (size_t i = 0; i < group.size(); ++i) group[i] = key_index(keys, {g.at(i).device, g.at(i).stream});
    return;
  }
  // One file's records: its labels say the pair, each looked up once.
  const SpanChunk& c = *g.in_chunk;
  std::vector<uint32_t> key_of_label(c.labels.size(), UINT32_MAX);
  for (size_t i = 0; i < group.size(); ++i) {
    const PackedSpan& p = c.packed[g.in_chunk_first + i];
    if (SpanChunk::is_escaped(p)) {
      group[i] = key_index(keys, {g.at(i).device, g.at(i).stream});
      continue;
    }
    uint32_t& k = key_of_label[p.label];
    if (k == UINT32_MAX) k = key_index(keys, {c.labels[p.label].device, c.labels[p.label].stream});
    group[i] = k;
  }
}

// Each record's group, and the groups in (device, stream) order.
std::vector<uint32_t> stream_groups(const GpuTimeline& g, std::vector<StreamKey>& keys) {
  std::vector<uint32_t> group(g.size());
  first_seen_groups(g, keys, group);
  std::vector<uint32_t> order(keys.size()), rank_of(keys.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
  for (uint32_t i = 0; i < order.size(); ++i) rank_of[order[i]] = i;
  for (uint32_t& x : group) x = rank_of[x];
  std::sort(keys.begin(), keys.end());
  return group;
}

// 0, then each group's size. Four counters per group, one per record position mod 4: with one stream
// (the usual case) a single counter made every increment wait for the store of the one before
// (issue 29: a quarter of this function's time at 960 ranks).
std::vector<uint32_t> group_sizes(const std::vector<uint32_t>& group, size_t groups) {
  std::vector<uint32_t> lanes(4 * groups, 0);
  size_t i = 0;
  for (; i + 4 <= group.size(); i += 4) {
    ++lanes[4 * group[i]];
    ++lanes[4 * group[i + 1] + 1];
    ++lanes[4 * group[i + 2] + 2];
    ++lanes[4 * group[i + 3] + 3];
  }
  for (; i < group.size(); ++i) ++lanes[4 * group[i]];
  std::vector<uint32_t> sizes(groups + 1, 0);
  for (size_t k = 0; k < groups; ++k) sizes[k + 1] = lanes[4 * k] + lanes[4 * k + 1] + lanes[4 * k + 2] + lanes[4 * k + 3];
  return sizes;
}

// by_stream and stream_starts.
void order_by_stream(GpuTimeline& g) {
  std::vector<StreamKey> keys;
  const std::vector<uint32_t> group = stream_groups(g, keys);
  std::vector<uint32_t> start = group_sizes(group, keys.size());  // then prefix sums: where each group begins
  for (size_t k = 1; k < start.size(); ++k) start[k] += start[k - 1];
  g.by_stream.resize(group.size());
  std::vector<uint32_t> fill(start.begin(), start.end() - 1);
  for (uint32_t i = 0; i < group.size(); ++i) g.by_stream[fill[group[i]]++] = i;  // launch order within a group
  auto by_start = [&](uint32_t a, uint32_t b) {
    const int64_t sa = g.at(a).start_ns, sb = g.at(b).start_ns;
    return sa != sb ? sa < sb : a < b;  // equal starts keep launch order
  };
  // Sorted by by_start when the starts do not decrease: a group was filled in launch order, so equal
  // starts are in order already. One record read per position (std::is_sorted read two).
  auto starts_rise = [&](std::vector<uint32_t>::const_iterator first, std::vector<uint32_t>::const_iterator last) {
    int64_t previous = INT64_MIN;
    for (; first != last; ++first) {
      const int64_t s = g.at(*first).start_ns;
      if (s < previous) return false;
      previous = s;
    }
    return true;
  };
  g.stream_starts.assign(start.begin(), start.end());
  for (size_t k = 0; k + 1 < start.size(); ++k) {
    auto first = g.by_stream.begin() + start[k], last = g.by_stream.begin() + start[k + 1];
    if (!starts_rise(first, last)) std::sort(first, last, by_start);
  }
}

// previous, from by_stream.
void link_previous(GpuTimeline& g) {
  g.previous.assign(g.by_stream.size(), GpuTimeline::kNoPrevious);
  for (size_t k = 0; k + 1 < g.stream_starts.size(); ++k)
    for (size_t i = g.stream_starts[k] + 1; i < g.stream_starts[k + 1]; ++i) g.previous[g.by_stream[i]] = g.by_stream[i - 1];
}

template <class T>
void free_vector(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

}  // namespace

GpuTimeline index_gpu(const RankData& rank) {
  GpuTimeline g;
  gather(rank, g);
  order_by_stream(g);
  link_previous(g);
  return g;
}

std::vector<GpuTimeline> index_gpu_all(const RunModel& model,
                                       const std::function<void(size_t, const GpuTimeline&)>& while_grouped) {
  std::vector<GpuTimeline> out(model.ranks.size());
  parallel_for(out.size(), [&](size_t r) {
    GpuTimeline& g = out[r];
    gather(model.ranks[r], g);
    order_by_stream(g);
    link_previous(g);
    if (while_grouped) while_grouped(r, g);
    free_vector(g.by_stream);
    free_vector(g.stream_starts);
  });
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
