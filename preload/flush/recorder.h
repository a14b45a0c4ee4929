// ROOM flush/ -- code here runs on laggard's own flush thread (and at exit on the exiting
// thread, once the flush thread is stopped): it drains what app threads appended, closes windows
// and hands them to files/. Allocation and the registry lock are fine here; waiting on anything
// the application holds (its locks, its fds, a GPU call) is not: the flush thread must always
// come back to flush and to run the hang watchdog. Capture sources (cupti/, nccl_hooks/, nvml/)
// plug in through source.h.
//
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
#include "thread_aggregates.h"
#include "window.h"

namespace laggard {

struct ThreadBuffer {
  explicit ThreadBuffer(uint32_t t) : tid(t) {}
  const uint32_t tid;
  // Exact statistics of every completed kept range (never lost to rate).
  ThreadAggregates totals;
  // The sample of occurrences (start, duration, thread) medians and timelines come from: when
  // the ring is full the occurrence is left out of the sample, never out of the statistics.
  SpscRing<RangeRecord, 4096> ranges;
  // Written by the owning thread only (relaxed load + store, no locked instruction), read by
  // the flush thread.
  std::atomic<uint64_t> filtered{0};    // ranges LAGGARD_SECTIONS did not keep
  std::atomic<uint64_t> stack_overflow{0};
  std::atomic<uint64_t> unbalanced_pop{0};
  std::atomic<uint64_t> unmatched_end{0};
  std::atomic<int> open_depth{0};    // push/pop ranges open right now
  std::atomic<bool> exited{false};   // the thread is gone; drain once more, then free
  // Flush thread only: samples drained before their statistics, which were counted after the
  // flip in the table the next drain takes; they join the window of their count then.
  std::vector<RangeRecord> counted_next;

  // Occurrences of one (section, parent) a thread offers to the sample between two drains
  // (20 a second): 2560 a second per key, more than a 10 s window's reservoir (2048) draws
  // from, and one hot section cannot fill the ring and starve rare ones of samples.
  static constexpr uint64_t kSamplesPerKeyPerDrain = 128;

  // A completed kept range: into the statistics, and offered to the sample.
  void add(const RangeRecord& r) {
    RangeRecord kept = r;
    uint64_t n = totals.add(r.name_id, r.parent_id, r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0, &kept.counted_in);
    if (n <= kSamplesPerKeyPerDrain) ranges.push(kept);  // not sampled: the recorder counts count - stored
  }
  // The same for a push/pop range whose start is computed only when the occurrence is offered
  // to the sample (start_ns(): CLOCK_MONOTONIC ns; the end is start + dur_ns).
  template <class StartNs>
  __attribute__((always_inline)) void add(uint32_t name_id, uint32_t parent_id, uint32_t tid, uint16_t depth,
                                          int64_t dur_ns, StartNs&& start_ns) {
    uint8_t counted_in;
    uint64_t n = totals.add(name_id, parent_id, dur_ns, &counted_in);
    if (__builtin_expect(n <= kSamplesPerKeyPerDrain, 0)) {
      const int64_t start = start_ns();
      ranges.push(RangeRecord{start, start + dur_ns, name_id, parent_id, tid, depth, RangeKind::push_pop, counted_in});
    }
  }
  static void bump(std::atomic<uint64_t>& c) {
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
};

class Recorder {
 public:
  // max_occurrences: raw occurrences kept per section and window; window_budget: per window
  // over all sections (keeps one window's file small however many sections there are).
  Recorder(NameTable& names, int max_occurrences, int64_t epoch_offset_ns,
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
    RangeTotals totals;            // exact, from the threads' aggregates
    uint64_t sampled = 0;          // occurrences that reached the recorder through the rings
    std::vector<Occurrence> kept;  // reservoir sample of those, at most max_occurrences_
    bool waited = false;           // carried into a window once, waiting for its totals
  };
  struct Baseline {  // last seen cumulative counters of a thread, to compute window deltas
    uint64_t stack_overflow = 0, unbalanced_pop = 0, unmatched_end = 0, filtered = 0;
  };

  void add_sample(const RangeRecord& r);
  void take_samples(ThreadBuffer& t, bool exited);
  void add_totals(uint32_t name, uint32_t parent, const RangeTotals& t);
  void fit_window_budget();
  uint64_t next_random();

  NameTable& names_;
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
