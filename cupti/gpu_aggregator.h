// Per-window aggregation of GPU records: statistics per (section, name, kind, graph, grid,
// block) for scores, and the records themselves (up to a cap) for later analyses. Not
// thread-safe: the caller (GpuCapture) serializes access with its data mutex.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "activity_parser.h"
#include "correlation_table.h"
#include "gpu_window.h"

namespace laggard::cupti {

// CUPTI timestamp -> host epoch ns. CUPTI's timestamps are nanoseconds unless another client
// installed a timestamp callback (Kineto's returns TSC cycles): then ticks_per_ns is measured
// and times are converted around a reference point measured at window close.
struct GpuClockMap {
  int64_t gpu_ref = 0;       // a CUPTI timestamp ...
  int64_t epoch_ref = 0;     // ... and the host epoch time it was read at
  double ticks_per_ns = 1.0;

  static GpuClockMap offset(int64_t gpu_to_epoch) { return {0, gpu_to_epoch, 1.0}; }
  int64_t to_epoch(uint64_t ts) const {
    int64_t d = static_cast<int64_t>(ts) - gpu_ref;
    return epoch_ref + (ticks_per_ns == 1.0 ? d : static_cast<int64_t>(double(d) / ticks_per_ns));
  }
  int64_t to_ns(int64_t ticks) const {
    return ticks_per_ns == 1.0 ? ticks : static_cast<int64_t>(double(ticks) / ticks_per_ns);
  }
};

class GpuAggregator {
 public:
  static constexpr size_t kRecordsPerWindow = 65536;
  static constexpr size_t kMedianSample = 4096;

  using SectionName = std::function<std::string(uint32_t section_id)>;

  static constexpr size_t kLateWindows = 16;

  explicit GpuAggregator(size_t records_per_window = kRecordsPerWindow, size_t median_sample = kMedianSample,
                         size_t late_windows = kLateWindows);

  // launch: what the launch callback saw for this record's correlation id; null when unknown
  // (the record then counts as unmatched and goes to "(no section)"). A record that completed
  // before an earlier window's close goes to that window's late statistics (close_boundary).
  void add(const GpuRecord& r, const LaunchInfo* launch);

  // Window `window` closed at CUPTI time `gpu_ts`: records arriving later that ended by then
  // belong to it (CUPTI hands back a buffer only once all its records are complete, so records
  // of a closed window keep arriving). The last `late_windows` closes are remembered.
  void close_boundary(uint64_t window, uint64_t gpu_ts);
  // CUPTI's clock changed or was not measured: later records cannot be placed by time.
  void forget_boundaries();

  struct Taken;

  // Hands over the open window and starts the next one. gpu_to_epoch_ns maps CUPTI timestamps,
  // mono_to_epoch_ns maps CLOCK_MONOTONIC (launch times) to epoch ns.
  GpuWindow close(int64_t gpu_to_epoch_ns, int64_t mono_to_epoch_ns, const SectionName& section_name);

  // close() in two steps, so the caller's lock is held only for the cheap one: take() moves
  // the open window out (and copies its few distinct names); finish() sorts and builds the
  // window from it and touches nothing of the aggregator.
  Taken take();
  static GpuWindow finish(Taken taken, const GpuClockMap& clock, int64_t mono_to_epoch_ns,
                          const SectionName& section_name);

  // Counts for the open window.
  uint64_t records() const { return records_; }
  uint64_t unmatched() const { return unmatched_; }
  uint64_t not_stored() const { return not_stored_; }
  size_t distinct_names() const { return names_.size(); }

 public:
  struct Key {
    uint32_t section, name;
    RecordKind kind;
    bool graph;
    std::array<uint32_t, 3> grid, block;
    bool operator==(const Key& o) const {
      return section == o.section && name == o.name && kind == o.kind && graph == o.graph &&
             grid == o.grid && block == o.block;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Acc {
    uint64_t count = 0;
    int64_t total = 0, min = 0, max = 0;
    std::vector<int64_t> sample;  // reservoir of durations for the median
  };
  struct Stored {
    GpuRecord r;  // r.name is not used (may dangle): name_id holds it
    uint32_t name_id, section;
    LaunchInfo launch;
    bool matched;
    bool late;  // counted in an earlier window's statistics
  };
  using Stats = std::unordered_map<Key, Acc, KeyHash>;
  struct Taken {
    Stats stats;
    std::map<uint64_t, Stats> late;  // earlier window index -> its records that arrived in this one
    std::vector<Stored> stored;
    std::unordered_map<uint32_t, std::pair<std::string, bool>> names;  // id -> (name, NCCL)
    uint64_t records = 0;
    uint64_t late_unplaced = 0;
  };

 private:
  struct Boundary {
    uint64_t window;
    uint64_t gpu_ts;
  };

  void accumulate(Acc& a, int64_t dur);
  // The closed window a record that ended at `end` belongs to; null: the open one.
  const uint64_t* late_window(uint64_t end);

  uint32_t intern(const GpuRecord& r);
  uint64_t next_random();

  const size_t records_cap_, median_cap_, late_windows_;
  // Process-wide kernel names: CUPTI shares one name pointer among a kernel's records, so the
  // pointer finds the id without hashing the (often very long) name.
  std::vector<std::string> names_;
  std::vector<bool> nccl_;
  std::unordered_map<const char*, uint32_t> by_ptr_;
  std::unordered_map<std::string, uint32_t> by_text_;

  Stats stats_;
  std::map<uint64_t, Stats> late_;
  std::vector<Stored> stored_;
  uint64_t records_ = 0, unmatched_ = 0, not_stored_ = 0, late_unplaced_ = 0;
  std::deque<Boundary> boundaries_;  // oldest first
  bool boundaries_trimmed_ = false;   // closes before boundaries_.front() were forgotten
  uint64_t rng_ = 0x2545f4914f6cdd1dull;
};

}  // namespace laggard::cupti
