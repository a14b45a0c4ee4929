// Exact per-thread statistics of completed ranges, kept on the hot path: count, total, min and
// max per (section, parent). Ranges are never lost to rate: a thread's sample of occurrences
// (its ring) may fill up, these sums cannot.
//
// Hand-over without a lock on the hot path: each thread writes into the active one of two
// tables, marking itself busy meanwhile. The flush thread flips every thread's active index,
// then one membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) makes every running thread pass a full
// barrier (the asymmetric fence liburcu uses), so from then on each thread writes the other
// table; it waits out a thread that was busy in the old table and reads it at leisure. Where
// membarrier is unavailable (old kernel, seccomp), writers fence instead.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace laggard {

struct RangeTotals {
  uint64_t count = 0;
  int64_t total_ns = 0, min_ns = 0, max_ns = 0;

  void add(int64_t dur_ns) {
    if (count == 0 || dur_ns < min_ns) min_ns = dur_ns;
    if (count == 0 || dur_ns > max_ns) max_ns = dur_ns;
    ++count;
    total_ns += dur_ns;
  }
  void merge(const RangeTotals& o) {
    if (o.count == 0) return;
    if (count == 0 || o.min_ns < min_ns) min_ns = o.min_ns;
    if (count == 0 || o.max_ns > max_ns) max_ns = o.max_ns;
    count += o.count;
    total_ns += o.total_ns;
  }
};

class ThreadAggregates {
 public:
  // Distinct (section, parent) keys one thread may hold between two drains; past it ranges are
  // summed under (kFolded, kFolded), which the recorder reports as "(other)".
  static constexpr size_t kMaxKeys = 1u << 16;
  static constexpr uint32_t kFolded = 0xfffffffeu;

  ThreadAggregates();

  // Owning thread. May allocate when a new key needs a larger table (rare, like interning).
  void add(uint32_t name, uint32_t parent, int64_t dur_ns);

  // Flush thread, for a set of threads: flip() each, quiesce() once, then take() each.
  void flip();
  static void quiesce();
  // f(name, parent, totals) for each key written before the flip; then clears it.
  template <class F>
  void take(F&& f) {
    Table& t = wait_for_old();
    for (Slot& s : t.slots)
      if (s.key) f(static_cast<uint32_t>((s.key - 1) >> 32), static_cast<uint32_t>(s.key - 1), s.totals);
    t.clear();
  }

  // Once, before capture starts: registers for membarrier; writers fence when that fails.
  static void init_handover();

 private:
  struct Slot {
    uint64_t key = 0;  // (name << 32 | parent) + 1; 0 = empty
    RangeTotals totals;
  };
  struct Table {
    std::vector<Slot> slots;
    size_t used = 0;
    void clear();
  };

  Table& wait_for_old();
  static RangeTotals& find_or_insert(Table& t, uint64_t key);
  static void grow(Table& t);

  std::atomic<uint32_t> busy_{0};  // >0 while the owner writes (a counter: signal handlers nest)
  std::atomic<int> active_{0};     // written by the flush thread only
  Table tables_[2];
};

}  // namespace laggard
