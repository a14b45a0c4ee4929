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
#include <climits>
#include <vector>

namespace laggard {

struct RangeTotals {
  uint64_t count = 0;
  int64_t total_ns = 0;
  int64_t min_ns = INT64_MAX, max_ns = INT64_MIN;  // as such while count == 0: add() needs no branch

  void add(int64_t dur_ns) {
    min_ns = dur_ns < min_ns ? dur_ns : min_ns;
    max_ns = dur_ns > max_ns ? dur_ns : max_ns;
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

// The full fence writers and the flush thread use instead of membarrier(2) where the kernel lacks it.
// ThreadSanitizer models no fence (GCC 12 warns "atomic_thread_fence is not supported with
// -fsanitize=thread", -Wtsan), nor membarrier. It needs neither to see this hand-over as ordered:
// flip() releases the generation add() acquires (the flush thread's clear() before an owner's next
// writes), and add() releases busy_, which wait_for_old() acquires (an owner's writes before the
// flush thread reads them). So TSan checks the hand-over with no suppression, and
// Recorder.ConcurrentProducer* check the counts exactly.
inline void handover_fence() {
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
  std::atomic_thread_fence(std::memory_order_seq_cst);
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic pop
#endif
}

class ThreadAggregates {
 public:
  // Distinct (section, parent) keys one thread may hold between two drains; past it ranges are
  // summed under (kFolded, kFolded), which the recorder reports as "(other)".
  static constexpr size_t kMaxKeys = 1u << 16;
  static constexpr uint32_t kFolded = 0xfffffffeu;

  ThreadAggregates();

  // Owning thread. May allocate when a new key needs a larger table (rare, like interning).
  // Inline: this is the NVTX hot path (a few stores, one probe).
  // Returns how many ranges of this key the thread added since the flush thread last took them;
  // *table gets the low 8 bits of the generation that counted this one (the flush thread's
  // taken_generation() tells whether that generation's counts are the ones it is taking now,
  // will take next, or took at an earlier drain).
  __attribute__((always_inline)) uint64_t add(uint32_t name, uint32_t parent, int64_t dur_ns, uint8_t* table) {
    const uint32_t outer = busy_.load(std::memory_order_relaxed);  // >0 only in a nested signal handler
    busy_.store(outer + 1, std::memory_order_relaxed);
    // Orders the busy mark before reading active_: a compiler barrier suffices when the flush
    // thread's membarrier supplies the CPU barrier.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (__builtin_expect(writers_fence_.load(std::memory_order_relaxed), 0)) handover_fence();
    // Acquire pairs with flip()'s release: the flush thread's clear() of this table happens before
    // the writes below, as ThreadSanitizer can see (a plain load on x86-64; an address dependency
    // orders it on Arm anyway).
    const uint32_t generation = generation_.load(std::memory_order_acquire);
    *table = static_cast<uint8_t>(generation);
    Table& t = tables_[generation & 1];
    const uint64_t key = (uint64_t(name) << 32 | parent) + 1;
    Slot& s = t.slots[slot_of(key, t.mask)];
    if (__builtin_expect(s.key == key, 1)) {
      s.totals.add(dur_ns);
      const uint64_t n = s.totals.count;
      busy_.store(outer, std::memory_order_release);
      return n;
    }
    struct Release {  // find_or_insert may throw bad_alloc
      ~Release() { b.store(v, std::memory_order_release); }
      std::atomic<uint32_t>& b;
      uint32_t v;
    } release{busy_, outer};
    RangeTotals& tot = find_or_insert(t, key);
    tot.add(dur_ns);
    return tot.count;
  }

  // Flush thread, for a set of threads: flip() each, quiesce() once, then take() each.
  void flip();
  static void quiesce();
  // f(name, parent, totals) for each key written before the flip; then clears it. Returns false,
  // taking nothing, when the owner stays busy after a signal (owners_may_be_stopped): that
  // table's counts stay in it, and the drain after next takes them with that generation's.
  template <class F>
  bool take(F&& f) {
    Table* t = wait_for_old();
    if (!t) return false;
    for (Slot& s : t->slots)
      if (s.key) f(static_cast<uint32_t>((s.key - 1) >> 32), static_cast<uint32_t>(s.key - 1), s.totals);
    t->clear();
    return true;
  }

  // Async-signal-safe (one atomic store). A signal handler that waits for a flush calls it first:
  // the thread it interrupted may be inside add(), busy until the handler returns, and the flush
  // must not wait for it (lifecycle.cpp, on_signal). From then on take() waits for a busy owner
  // at most kStoppedOwnerPatienceNs.
  static void owners_may_be_stopped() { owners_may_be_stopped_.store(true, std::memory_order_relaxed); }
  static constexpr int64_t kStoppedOwnerPatienceNs = 20'000'000;

  friend struct ThreadAggregatesProbe;  // tests: hold an owner busy, reset the signal flag

  // Flush thread, after flip(): the generation take() reads (the one written before the flip),
  // low 8 bits, as add() hands them out. A generation is one table's use between two flips: the
  // table index alone (one bit) cannot tell a range counted after this flip from one counted
  // before the previous flip whose sample reached the ring late.
  uint8_t taken_generation() const { return static_cast<uint8_t>(generation_.load(std::memory_order_relaxed) - 1); }

  // Once, before capture starts: registers for membarrier; writers fence when that fails.
  static void init_handover();

 private:
  struct Slot {
    uint64_t key = 0;  // (name << 32 | parent) + 1; 0 = empty
    RangeTotals totals;
  };
  struct Table {
    std::vector<Slot> slots;
    size_t mask = 0;  // slots.size() - 1 (a power of two)
    size_t used = 0;
    void clear();
  };

  static size_t slot_of(uint64_t key, size_t mask) {
    key *= 0x9e3779b97f4a7c15ull;
    return static_cast<size_t>(key >> 32) & mask;
  }
  Table* wait_for_old();
  static RangeTotals& find_or_insert(Table& t, uint64_t key);
  static void grow(Table& t);

  // true until membarrier is known to work: writers then pay a full fence per range.
  static inline std::atomic<bool> writers_fence_{true};
  static inline std::atomic<bool> owners_may_be_stopped_{false};
  std::atomic<uint32_t> busy_{0};  // >0 while the owner writes (a counter: signal handlers nest)
  std::atomic<uint32_t> generation_{0};  // flips so far; the active table is generation_ & 1 (flush thread writes)
  Table tables_[2];
};

}  // namespace laggard
