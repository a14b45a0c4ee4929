#include "reader_gpu_late.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace laggard::report {
namespace {

struct Key {
  uint32_t section, name;
  GpuKind kind;
  bool graph, nccl;
  uint32_t grid[3], block[3];

  explicit Key(const KernelWindowStats& s)
      : section(s.section), name(s.name), kind(s.kind), graph(s.graph), nccl(s.nccl),
        grid{s.grid[0], s.grid[1], s.grid[2]}, block{s.block[0], s.block[1], s.block[2]} {}
  bool operator==(const Key& o) const {
    return section == o.section && name == o.name && kind == o.kind && graph == o.graph && nccl == o.nccl &&
           std::equal(grid, grid + 3, o.grid) && std::equal(block, block + 3, o.block);
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = (uint64_t(k.section) << 32 | k.name) * 0x9e3779b97f4a7c15ull;
    for (uint32_t v : k.grid) h = (h ^ v) * 0x100000001b3ull;
    for (uint32_t v : k.block) h = (h ^ v) * 0x100000001b3ull;
    return static_cast<size_t>(h ^ (h >> 29) ^ (uint64_t(k.kind) << 2 | uint64_t(k.graph) << 1 | k.nccl));
  }
};

void merge(KernelWindowStats& s, const KernelWindowStats& late) {
  if (late.count == 0) return;
  if (s.count == 0 || late.min_ns < s.min_ns) s.min_ns = late.min_ns;
  if (s.count == 0 || late.max_ns > s.max_ns) s.max_ns = late.max_ns;
  if (late.count > s.count) s.median_ns = late.median_ns;
  s.count += late.count;
  s.total_ns += late.total_ns;
}

// Adds `late` to a window's statistics: one hash lookup per late entry.
void merge_all(CaptureWindow& target, const std::vector<const KernelWindowStats*>& late) {
  std::unordered_map<Key, size_t, KeyHash> at;
  at.reserve(target.kernel_stats.size() + late.size());
  for (size_t i = 0; i < target.kernel_stats.size(); ++i) at.emplace(Key(target.kernel_stats[i]), i);
  for (const KernelWindowStats* l : late) {
    auto [it, added] = at.emplace(Key(*l), target.kernel_stats.size());
    if (added) target.kernel_stats.push_back(*l);
    else merge(target.kernel_stats[it->second], *l);
  }
}

}  // namespace

void merge_late_gpu_stats(RankData& r) {
  std::vector<LateKernelStats> all;  // keeps the entries alive while they are merged
  std::map<CaptureWindow*, std::vector<size_t>> by_target;
  for (CaptureWindow& carrier : r.windows) {
    for (LateKernelStats& l : carrier.gpu_late) {
      auto it = std::lower_bound(r.windows.begin(), r.windows.end(), l.window,
                                 [](const CaptureWindow& w, uint64_t index) { return w.index < index; });
      CaptureWindow* target = it != r.windows.end() && it->index == l.window ? &*it : &carrier;
      by_target[target].push_back(all.size());
      all.push_back(std::move(l));
    }
    carrier.gpu_late.clear();
  }
  for (auto& [target, indices] : by_target) {
    std::vector<const KernelWindowStats*> late;
    late.reserve(indices.size());
    for (size_t i : indices) late.push_back(&all[i].stats);
    merge_all(*target, late);
  }
}

}  // namespace laggard::report
