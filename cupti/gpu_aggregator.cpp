#include "gpu_aggregator.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "records.h"

namespace laggard::cupti {
namespace {

GpuRecordKind to_kind(RecordKind k) {
  switch (k) {
    case RecordKind::memcpy: return GpuRecordKind::memcpy;
    case RecordKind::memset: return GpuRecordKind::memset;
    default: return GpuRecordKind::kernel;
  }
}

int64_t sample_median(std::vector<int64_t>& v) {
  if (v.empty()) return 0;
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  int64_t hi = v[mid];
  if (v.size() % 2) return hi;
  int64_t lo = *std::max_element(v.begin(), v.begin() + mid);
  return lo + (hi - lo) / 2;
}

// Window-local string table: each distinct string once, in first-use order.
class LocalStrings {
 public:
  uint32_t add(const std::string& s) {
    auto [it, added] = index_.emplace(s, static_cast<uint32_t>(out_.size()));
    if (added) out_.push_back(s);
    return it->second;
  }
  std::vector<std::string> take() { return std::move(out_); }

 private:
  std::map<std::string, uint32_t> index_;
  std::vector<std::string> out_;
};

}  // namespace

size_t GpuAggregator::KeyHash::operator()(const Key& k) const {
  uint64_t h = (uint64_t(k.section) << 32 | k.name) * 0x9e3779b97f4a7c15ull;
  for (uint32_t v : k.grid) h = (h ^ v) * 0x100000001b3ull;
  for (uint32_t v : k.block) h = (h ^ v) * 0x100000001b3ull;
  h ^= uint64_t(k.kind) << 1 | uint64_t(k.graph);
  return static_cast<size_t>(h ^ (h >> 31));
}

GpuAggregator::GpuAggregator(size_t records_per_window, size_t median_sample, size_t late_windows)
    : records_cap_(records_per_window),
      median_cap_(median_sample < 1 ? 1 : median_sample),
      late_windows_(late_windows) {}

void GpuAggregator::close_boundary(uint64_t window, uint64_t gpu_ts) {
  if (!boundaries_.empty() && gpu_ts < boundaries_.back().gpu_ts) forget_boundaries();  // clock went back
  boundaries_.push_back({window, gpu_ts});
  while (boundaries_.size() > late_windows_) {
    boundaries_.pop_front();
    boundaries_trimmed_ = true;
  }
}

void GpuAggregator::forget_boundaries() {
  if (!boundaries_.empty()) boundaries_trimmed_ = true;
  boundaries_.clear();
}

// Window k holds what ended in (close of k-1, close of k]. Before the oldest close remembered
// the window is unknown once older closes were forgotten: such a record stays in the open
// window, counted as unplaced.
const uint64_t* GpuAggregator::late_window(uint64_t end) {
  if (boundaries_.empty() || end > boundaries_.back().gpu_ts) return nullptr;
  auto it = std::lower_bound(boundaries_.begin(), boundaries_.end(), end,
                             [](const Boundary& b, uint64_t e) { return b.gpu_ts < e; });
  if (it == boundaries_.begin() && boundaries_trimmed_) {
    ++late_unplaced_;
    return nullptr;
  }
  return &it->window;
}

void GpuAggregator::accumulate(Acc& a, int64_t dur) {
  if (a.count == 0 || dur < a.min) a.min = dur;
  if (a.count == 0 || dur > a.max) a.max = dur;
  ++a.count;
  a.total += dur;
  if (a.sample.size() < median_cap_) {
    a.sample.push_back(dur);
  } else {
    uint64_t j = next_random() % a.count;  // reservoir sampling: every duration equally likely
    if (j < median_cap_) a.sample[j] = dur;
  }
}

uint64_t GpuAggregator::next_random() {
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  return rng_;
}

uint32_t GpuAggregator::intern(const GpuRecord& r) {
  const char* text = r.kind == RecordKind::kernel ? (r.name ? r.name : "(unnamed kernel)")
                     : r.kind == RecordKind::memcpy ? memcpy_label(r.copy_kind)
                                                    : "[memset]";
  if (auto it = by_ptr_.find(text); it != by_ptr_.end() && names_[it->second] == text) return it->second;
  auto [it, added] = by_text_.emplace(text, static_cast<uint32_t>(names_.size()));
  if (added) {
    names_.push_back(text);
    nccl_.push_back(r.kind == RecordKind::kernel && is_nccl_kernel(text));
  }
  by_ptr_[text] = it->second;
  return it->second;
}

void GpuAggregator::add(const GpuRecord& r, const LaunchInfo* launch) {
  ++records_;
  uint32_t name = intern(r);
  uint32_t section = launch ? launch->section : kNoName;
  if (!launch) ++unmatched_;

  int64_t dur = static_cast<int64_t>(r.end - r.start);
  Key key{section, name, r.kind, r.graph, r.kind == RecordKind::kernel ? r.grid : std::array<uint32_t, 3>{},
          r.kind == RecordKind::kernel ? r.block : std::array<uint32_t, 3>{}};
  const uint64_t* late = late_window(r.end);
  accumulate(late ? late_[*late][key] : stats_[key], dur);

  if (stored_.size() < records_cap_) {
    Stored s{r, name, section, launch ? *launch : LaunchInfo{kNoName, 0, 0, 0}, launch != nullptr, late != nullptr};
    s.r.name = nullptr;
    stored_.push_back(s);
  } else {
    ++not_stored_;
  }
}

GpuWindow GpuAggregator::close(int64_t gpu_to_epoch, int64_t mono_to_epoch, const SectionName& section_name) {
  return finish(take(), GpuClockMap::offset(gpu_to_epoch), mono_to_epoch, section_name);
}

GpuAggregator::Taken GpuAggregator::take() {
  Taken t;
  t.records = records_;
  t.late_unplaced = late_unplaced_;
  auto note_names = [&](const Stats& stats) {
    for (const auto& [k, a] : stats)
      if (!t.names.count(k.name)) t.names.emplace(k.name, std::make_pair(names_[k.name], bool(nccl_[k.name])));
  };
  note_names(stats_);
  for (const auto& [window, stats] : late_) note_names(stats);
  t.stats.swap(stats_);
  t.late.swap(late_);
  t.stored.swap(stored_);
  records_ = unmatched_ = not_stored_ = late_unplaced_ = 0;
  return t;
}

GpuWindow GpuAggregator::finish(Taken t, const GpuClockMap& clock, int64_t mono_to_epoch,
                                const SectionName& section_name) {
  GpuWindow w;
  w.present = true;
  w.clock_offset_ns = clock.epoch_ref - clock.gpu_ref;
  LocalStrings strings;
  std::map<uint32_t, uint32_t> name_idx, section_idx;
  auto name_of = [&](uint32_t id) {
    auto it = name_idx.find(id);
    if (it != name_idx.end()) return it->second;
    return name_idx[id] = strings.add(t.names.at(id).first);
  };
  auto is_nccl = [&](uint32_t id) { return t.names.at(id).second; };
  auto section_of = [&](uint32_t id) -> uint32_t {
    if (id == kNoName) return kNoString;
    auto it = section_idx.find(id);
    if (it != section_idx.end()) return it->second;
    return section_idx[id] = strings.add(section_name ? section_name(id) : std::to_string(id));
  };

  // Statistics, longest total first.
  auto statistics = [&](Stats& stats) {
    std::vector<std::pair<const Key*, Acc*>> order;
    order.reserve(stats.size());
    for (auto& [k, a] : stats) order.emplace_back(&k, &a);
    std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
      if (x.second->total != y.second->total) return x.second->total > y.second->total;
      return std::tie(x.first->section, x.first->name) < std::tie(y.first->section, y.first->name);
    });
    std::vector<GpuKernelStats> out;
    out.reserve(order.size());
    for (auto& [k, a] : order) {
      GpuKernelStats s;
      s.section = section_of(k->section);
      s.name = name_of(k->name);
      s.kind = to_kind(k->kind);
      s.nccl = is_nccl(k->name);
      s.graph = k->graph;
      s.grid = k->grid;
      s.block = k->block;
      s.count = a->count;
      s.total_ns = clock.to_ns(a->total);
      s.min_ns = clock.to_ns(a->min);
      s.max_ns = clock.to_ns(a->max);
      s.median_ns = clock.to_ns(sample_median(a->sample));
      out.push_back(s);
    }
    return out;
  };
  w.kernels = statistics(t.stats);
  for (auto& [window, stats] : t.late) w.late.push_back({window, statistics(stats)});
  w.late_unplaced = t.late_unplaced;

  std::stable_sort(t.stored.begin(), t.stored.end(),
                   [](const Stored& a, const Stored& b) { return a.r.start < b.r.start; });
  GpuRecords& out = w.records;
  std::map<std::array<uint32_t, 6>, int32_t> shape_idx;
  for (const Stored& s : t.stored) {
    const GpuRecord& r = s.r;
    out.kind.push_back(static_cast<uint8_t>(to_kind(r.kind)));
    out.name.push_back(name_of(s.name_id));
    out.section.push_back(section_of(s.section));
    out.start_ns.push_back(clock.to_epoch(r.start));
    out.dur_ns.push_back(clock.to_ns(static_cast<int64_t>(r.end - r.start)));
    bool api_known = s.matched && s.launch.api_start_ns != 0;
    out.api_start_ns.push_back(api_known ? s.launch.api_start_ns + mono_to_epoch : 0);
    out.api_dur_ns.push_back(api_known && s.launch.api_end_ns >= s.launch.api_start_ns
                                 ? s.launch.api_end_ns - s.launch.api_start_ns
                                 : -1);
    out.tid.push_back(s.matched ? s.launch.tid : 0);
    out.correlation.push_back(r.correlation);
    out.stream.push_back(r.stream);
    out.device.push_back(static_cast<int32_t>(r.device));
    int32_t shape = -1;
    if (r.kind == RecordKind::kernel) {
      std::array<uint32_t, 6> sh{r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1], r.block[2]};
      auto [it, added] = shape_idx.emplace(sh, static_cast<int32_t>(out.shapes.size()));
      if (added) out.shapes.push_back(sh);
      shape = it->second;
    }
    out.shape.push_back(shape);
    out.bytes.push_back(r.bytes);
    out.copy_kind.push_back(r.copy_kind);
    uint8_t flags = 0;
    if (r.kind == RecordKind::kernel && is_nccl(s.name_id)) flags |= kGpuFlagNccl;
    if (r.graph) flags |= kGpuFlagGraph;
    if (!s.matched) flags |= kGpuFlagUnmatched;
    if (s.late) flags |= kGpuFlagLate;
    out.flags.push_back(flags);
  }
  w.strings = strings.take();
  return w;
}

}  // namespace laggard::cupti
