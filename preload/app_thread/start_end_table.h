// Open nvtxRangeStart/End ranges, which may end on another thread. A fixed table indexed by
// the range id: lock-free, no allocation. Ids are never reused; an id whose slot is taken by a
// range still open is skipped (issue 24: 16 threads with at most 16 ranges open saw false
// evictions), and only a table with kMaxProbes taken slots in a row evicts a range (counted).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "name_table.h"
#include "records.h"

namespace laggard {

// Range ids a thread takes from the shared counter in blocks, so threads starting ranges
// concurrently neither contend on the counter nor share slots' cache lines.
struct IdBlock {
  uint64_t next = 0, end = 0;
};

class StartEndTable {
 public:
  static constexpr uint64_t kIdBlock = 256;
  static constexpr int kMaxProbes = 64;

  explicit StartEndTable(size_t slots_pow2 = 1u << 14);

  // Returns the NVTX range id (never 0). With a block, ids come from the caller's block.
  // `epoch`: pause_state.h's value when the range started.
  uint64_t start(const NameEntry* name, int64_t now_ns, uint32_t tid, IdBlock* block = nullptr, uint32_t epoch = 0);

  // Closes range `id`. Returns false when the id is unknown (never started, already ended,
  // or evicted). *emit tells whether the range is a kept section and *out is filled.
  // A range during which capture was paused (started paused, ends paused, or `epoch` moved
  // on since its start) is closed but not emitted, and *paused is set when given.
  bool end(uint64_t id, int64_t now_ns, RangeRecord* out, bool* emit, uint32_t epoch = 0, bool* paused = nullptr);

  uint64_t evicted() const { return evicted_.load(std::memory_order_relaxed); }
  // Ranges still open right now (for the "unclosed at exit" count).
  uint64_t open_count() const;

 private:
  static constexpr uint64_t kBusy = ~0ull;
  uint64_t take_id(IdBlock* block);
  struct Slot {
    std::atomic<uint64_t> id{0};  // 0 free, kBusy being written, else the open range's id
    // Relaxed atomics: the id's acquire/release orders them; atomics keep torn reads defined.
    std::atomic<const NameEntry*> name{nullptr};
    std::atomic<int64_t> start_ns{0};
    std::atomic<uint32_t> tid{0};
    std::atomic<uint32_t> epoch{0};
  };
  std::unique_ptr<Slot[]> slots_;
  size_t mask_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> evicted_{0};
};

}  // namespace laggard
