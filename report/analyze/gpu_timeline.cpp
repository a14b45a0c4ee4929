#include "gpu_timeline.h"

#include <algorithm>

namespace laggard::report {

GpuTimeline index_gpu(const RankData& rank) {
  GpuTimeline g;
  std::vector<Interval> spans;
  for (const CaptureWindow& w : rank.windows) {
    if (!w.gpu_sampled) continue;
    spans.push_back({w.start_ns, w.end_ns});
    for (const GpuActivity& a : w.gpu) {
      g.by_launch.push_back(&a);
      g.by_stream[{a.device, a.stream}].push_back(&a);
    }
  }
  g.sampled = merge(spans);
  std::sort(g.by_launch.begin(), g.by_launch.end(), [](const GpuActivity* a, const GpuActivity* b) {
    return launch_time(*a) != launch_time(*b) ? launch_time(*a) < launch_time(*b) : a->correlation < b->correlation;
  });
  for (auto& [key, v] : g.by_stream)
    std::sort(v.begin(), v.end(), [](const GpuActivity* a, const GpuActivity* b) { return a->start_ns < b->start_ns; });
  return g;
}

std::pair<size_t, size_t> GpuTimeline::launched_in(const Step& step) const {
  auto lo = std::lower_bound(by_launch.begin(), by_launch.end(), step.start_ns,
                             [](const GpuActivity* a, int64_t t) { return launch_time(*a) < t; });
  auto hi = std::lower_bound(lo, by_launch.end(), step.end_ns,
                             [](const GpuActivity* a, int64_t t) { return launch_time(*a) < t; });
  return {size_t(lo - by_launch.begin()), size_t(hi - by_launch.begin())};
}

std::vector<const GpuActivity*> GpuTimeline::in_step(const Step& step) const {
  auto [lo, hi] = launched_in(step);
  return {by_launch.begin() + lo, by_launch.begin() + hi};
}

std::vector<const GpuActivity*> GpuTimeline::previous_by_launch() const {
  // (activity, its predecessor on the stream), looked up by address.
  std::vector<std::pair<const GpuActivity*, const GpuActivity*>> prev;
  prev.reserve(by_launch.size());
  for (const auto& [key, v] : by_stream)
    for (size_t i = 0; i < v.size(); ++i) prev.emplace_back(v[i], i ? v[i - 1] : nullptr);
  std::sort(prev.begin(), prev.end());
  std::vector<const GpuActivity*> out(by_launch.size(), nullptr);
  for (size_t i = 0; i < by_launch.size(); ++i) {
    auto it = std::lower_bound(prev.begin(), prev.end(), std::make_pair(by_launch[i], (const GpuActivity*)nullptr));
    if (it != prev.end() && it->first == by_launch[i]) out[i] = it->second;
  }
  return out;
}

const GpuActivity* GpuTimeline::previous_on_stream(const GpuActivity* a) const {
  auto it = by_stream.find({a->device, a->stream});
  if (it == by_stream.end()) return nullptr;
  const auto& v = it->second;
  auto pos = std::lower_bound(v.begin(), v.end(), a, [](const GpuActivity* x, const GpuActivity* y) {
    return x->start_ns < y->start_ns;
  });
  // Several activities may share a start time: step back to a itself, then before it.
  while (pos != v.end() && *pos != a && (*pos)->start_ns == a->start_ns) ++pos;
  if (pos == v.end() || *pos != a || pos == v.begin()) return nullptr;
  return *(pos - 1);
}

}  // namespace laggard::report
