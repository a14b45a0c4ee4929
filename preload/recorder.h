// Collects records from every capturing thread and aggregates them per window.
// Threads append to their own ThreadBuffer (lock-free); only the flush thread drains and
// aggregates, so aggregation needs no locks beyond the thread registry.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "name_table.h"
#include "records.h"
#include "spsc_ring.h"
#include "window.h"

namespace laggard {

struct ThreadBuffer {
  explicit ThreadBuffer(uint32_t t) : tid(t) {}
  const uint32_t tid;
  SpscRing<RangeRecord, 4096> ranges;
  // Written by the owning thread only, read by the flush thread.
  std::atomic<uint64_t> ring_full{0};
  std::atomic<uint64_t> stack_overflow{0};
  std::atomic<uint64_t> unbalanced_pop{0};
  std::atomic<uint64_t> unmatched_end{0};
  std::atomic<int> open_depth{0};    // push/pop ranges open right now
  std::atomic<bool> exited{false};   // the thread is gone; drain once more, then free

  void add(const RangeRecord& r) {
    if (!ranges.push(r)) ring_full.fetch_add(1, std::memory_order_relaxed);
  }
};

class Recorder {
 public:
  // max_occurrences: raw occurrences kept per section and window; window_budget: per window
  // over all sections (keeps one window's file small however many sections there are).
  Recorder(const NameTable& names, int max_occurrences, int64_t epoch_offset_ns,
           int64_t start_mono_ns, size_t window_budget = 65536);

  // Called once per thread, on its first NVTX call. Never returns null.
  ThreadBuffer* register_thread(uint32_t tid);

  // Flush thread only: move everything buffered into the open window.
  void drain();

  // Flush thread only: drain, close the open window at now_mono_ns and return it.
  // extra: counts gathered outside the thread buffers (evictions, name overflow, ...).
  WindowSnapshot close_window(int64_t now_mono_ns, const DropCounters& extra);

  // Push/pop ranges open on live threads right now.
  uint64_t open_ranges() const;
  // Whether any range was ever recorded (a process that records nothing writes nothing).
  bool has_data() const { return has_data_; }

 private:
  struct Occurrence {
    int64_t start_ns;
    int64_t dur_ns;
    uint32_t tid;
  };
  struct SectionAgg {
    uint64_t count = 0;
    int64_t total_ns = 0, min_ns = 0, max_ns = 0;
    std::vector<Occurrence> kept;  // reservoir sample, at most max_occurrences_
  };
  struct Baseline {  // last seen cumulative counters of a thread, to compute window deltas
    uint64_t ring_full = 0, stack_overflow = 0, unbalanced_pop = 0, unmatched_end = 0;
  };

  void add(const RangeRecord& r);
  void fit_window_budget();
  uint64_t next_random();

  const NameTable& names_;
  const size_t max_occurrences_;
  const size_t window_budget_;
  const int64_t epoch_offset_ns_;

  mutable std::mutex threads_mu_;
  std::vector<std::unique_ptr<ThreadBuffer>> threads_;

  // Flush-thread state.
  std::map<std::pair<uint32_t, uint32_t>, SectionAgg> open_;  // (name, parent) -> stats
  std::map<const ThreadBuffer*, Baseline> baselines_;
  DropCounters window_drops_;
  uint64_t window_index_ = 0;
  int64_t window_start_mono_ = 0;
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;
  bool has_data_ = false;
};

}  // namespace laggard
